// MLA cache entry formats (bf16, fp8_ds_mla, nvfp4_ds_mla): how the prologue encodes latent and rope.
// Byte layouts: docs/layouts.md; the attend kernel decodes them (dsa_attend_dequant.cuh).
#pragma once
#include "dsa_numerics.cuh"
#include "dsa_rope.cuh"

namespace dsa {

enum CacheFormat { kBf16 = 0, kFp8DsMla = 1, kNvfp4DsMla = 2 };

// nvfp4_ds_mla: where the e4m3 scale of latent block s (16 values) lies in the entry's scale area:
// the L / 16 scales as 4 interleaved rows of L / 64 (docs/layouts.md). The writer and every reader.
template <int L> __device__ __forceinline__ constexpr int nvfp4_scale_at(int s) { return (L / 64) * (s & 3) + (s >> 2); }

// The latent part, one thread per 8 values: chunk c of the normalised latent into the entry.
template <int Format, int L, int ScaleOffset, bool Pow2>
__device__ __forceinline__ void write_latent_chunk(const float (&v)[8], int c, uint8_t *entry)
{
    if constexpr (Format == kBf16) {
        store16(entry + 16 * c, bf16x8::from_float(v));
    } else if constexpr (Format == kFp8DsMla) {
        // 16 threads (one 128-value tile) share a scale: max(amax / 448, FLT_MIN)
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            amax = fmaxf(amax, fabsf(v[i]));
        amax = group_max<16>(amax);
        float scale = fmaxf(__fdiv_rn(amax, 448.0f), 1.17549435e-38f);
        if (Pow2)
            scale = pow2_ceil(scale);
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int i = 0; i < 4; i += 2)
            lo |= e4m3x2(__fdiv_rn(v[i], scale), __fdiv_rn(v[i + 1], scale)) << (8 * i);
#pragma unroll
        for (int i = 4; i < 8; i += 2)
            hi |= e4m3x2(__fdiv_rn(v[i], scale), __fdiv_rn(v[i + 1], scale)) << (8 * (i - 4));
        *reinterpret_cast<uint2 *>(entry + 8 * c) = make_uint2(lo, hi);
        if (c % 16 == 0)
            *reinterpret_cast<float *>(entry + ScaleOffset + 4 * (c / 16)) = scale;
    } else {
        // 2 threads (one 16-value block) share an e4m3 scale
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++)
            amax = fmaxf(amax, fabsf(v[i]));
        amax = group_max<2>(amax);
        const uint8_t code = nvfp4_block_scale(amax);
        const float scale = e4m3_to_float(code);
        uint32_t packed = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            packed |= e2m1(__fdiv_rn(v[i], scale)) << (4 * i); // even element in the low nibble
        *reinterpret_cast<uint32_t *>(entry + 4 * c) = packed;
        if (c % 2 == 0) {
            const int s = c / 2;
            entry[ScaleOffset + nvfp4_scale_at<L>(s)] = code;
        }
    }
}

// The rope part: one pair of k_pe, rotated and stored in the entry's rope area (bf16, or e4m3 unscaled).
template <int Format, int R, bool Interleaved, int RopeOffset>
__device__ __forceinline__ void write_rope_pair(const float *kpe, int i, float c, float s, uint8_t *entry)
{
    const int a = Interleaved ? 2 * i : i, b = Interleaved ? 2 * i + 1 : i + R / 2;
    const float x0 = kpe[a], x1 = kpe[b];
    const float y0 = rope_rotate(x0, x1, c, s, true), y1 = rope_rotate(x0, x1, c, s, false); // as the CPU reference
    if constexpr (Format == kNvfp4DsMla) {
        entry[RopeOffset + a] = e4m3(y0);
        entry[RopeOffset + b] = e4m3(y1);
    } else {
        reinterpret_cast<uint16_t *>(entry + RopeOffset)[a] = float_to_bf16(y0);
        reinterpret_cast<uint16_t *>(entry + RopeOffset)[b] = float_to_bf16(y1);
    }
}

} // namespace dsa
