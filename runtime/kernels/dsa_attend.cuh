// Stage C building blocks: the top-k entry to local slot mapping, dequantisation of one cache
// element in each format, and the per-CTA sparse MLA loop (fp32 on CUDA cores: the correct
// baseline; the tensor-core version replaces the inner products, not the structure).
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

constexpr int kAttendThreads = 256;
constexpr int kKeysPerTile = 16;
constexpr int kKeyStride = 577; // 576 floats + 1: rows of the key tile land in different banks

// The local slot of top-k entry g of a row of request req on this rank, or -1: invalid entries
// (negative, beyond the request, blocks the table does not have, slots beyond the cache) are
// treated as -1 and never read.
template <int W, int I, int BlockSize>
__device__ __forceinline__ int64_t local_slot(int32_t g, int32_t req, const dsa_attend_params &p)
{
    if (g < 0 || req < 0 || req >= p.num_requests || g >= p.seq_lens[req])
        return -1;
    if ((g / I) % W != p.rank)
        return -1;
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I;
    const int64_t b = local / BlockSize;
    if (b >= p.max_blocks)
        return -1;
    const int32_t blk = p.block_table[req * p.max_blocks + b];
    if (blk < 0)
        return -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return slot < p.num_slots ? slot : -1;
}

// Element d (0..kv_dim) of the key in a cache entry, dequantised to fp32.
template <int Format, int L, int ScaleOffset, int RopeOffset>
__device__ __forceinline__ float key_element(const uint8_t *e, int d)
{
    if constexpr (Format == 0) { // bf16: latent then rope, contiguous
        return bf16_to_float(reinterpret_cast<const uint16_t *>(e)[d]);
    } else if constexpr (Format == 1) { // fp8_ds_mla
        if (d < L)
            return e4m3_to_float(e[d]) * reinterpret_cast<const float *>(e + ScaleOffset)[d / 128];
        return bf16_to_float(reinterpret_cast<const uint16_t *>(e + RopeOffset)[d - L]);
    } else { // nvfp4_ds_mla
        if (d < L) {
            const int s = d / 16;
            const float scale = e4m3_to_float(e[ScaleOffset + (L / 64) * (s & 3) + (s >> 2)]);
            const uint32_t code = (e[d / 2] >> (4 * (d & 1))) & 0xf;
            const int ex = (code >> 1) & 3, mant = code & 1; // e2m1: 0 .5 1 1.5 2 3 4 6
            const float mag = ex == 0 ? 0.5f * (float)mant : (float)(2 + mant) * 0.25f * (float)(1 << ex);
            return (code & 8 ? -mag : mag) * scale;
        }
        return e4m3_to_float(e[RopeOffset + d - L]);
    }
}

} // namespace dsa
