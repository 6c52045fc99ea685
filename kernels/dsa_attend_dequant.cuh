// Sparse MLA key tiles: fp8_ds_mla and nvfp4_ds_mla cache entries dequantised to bf16 in shared memory.
// The CPU reference rounds the dequantised keys to bf16 the same way, so both compute one function.
#pragma once
#include "dsa_attend_layout.cuh"

namespace dsa {

// 16 e4m3 bytes (4 words) times scale to 16 bf16 (two 16-byte vectors).
__device__ __forceinline__ void e4m3x16_to_bf16(uint4 v, float scale, uint4 &out0, uint4 &out1)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float a, b, c, d;
        e4m3x2_to_float(w[i] & 0xffffu, a, b);
        e4m3x2_to_float(w[i] >> 16, c, d);
        o[2 * i] = bf16x2(a * scale, b * scale);
        o[2 * i + 1] = bf16x2(c * scale, d * scale);
    }
    out0 = make_uint4(o[0], o[1], o[2], o[3]);
    out1 = make_uint4(o[4], o[5], o[6], o[7]);
}

// One nvfp4_ds_mla latent chunk: 16 bytes of 32 e2m1 values, scale blocks of 16 with e4m3 scales s0
// and s1, to bf16 dims [32 c, 32 c + 32) of row `row` of a bf16 key tile: st(offset, 16 bytes)
// takes each 16 bytes at its bf16 offset in the tile.
template <class Lay, class St>
__device__ __forceinline__ void nvfp4_chunk_to_bf16(uint4 v, uint32_t s0, uint32_t s1, int row, int c, St st)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[16];
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const float scale = e4m3_to_float((uint8_t)(half ? s1 : s0));
        const uint32_t scale2 = bf16x2(scale, scale); // exact: e4m3 has 4 significant bits
        e2m1x8_to_bf16(w[2 * half], scale2, o + 8 * half);
        e2m1x8_to_bf16(w[2 * half + 1], scale2, o + 8 * half + 4);
    }
#pragma unroll
    for (int q = 0; q < 4; q++)
        st(Lay::qk_at(row, 32 * c + 8 * q), make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]));
}

// Dequantise the raw entries of keys [0, KT) (zeros for missing keys) into the bf16 key tile.
template <class Lay, int ScaleOffset, int RopeOffset>
__device__ __forceinline__ void dequant_tile(const uint8_t *raw, uint16_t *k_s)
{
    constexpr int KV = Lay::kv, LAT = Lay::lat, Format = Lay::format, EntryBytes = Lay::entry_bytes;
    constexpr int R = KV - LAT;
    if constexpr (Format == kFp8DsMla) { // fp8_ds_mla: e4m3 latent x fp32 scale per 128, bf16 rope
        constexpr int CL = LAT / 16, CR = R / 8, C = CL + CR;
        static_assert(R % 8 == 0 && RopeOffset % 16 == 0, "fp8_ds_mla rope chunks");
        // a warp per 8 keys, lane l on key l % 8 and 16-byte chunks l / 8, + 4, ...: the 8 lanes of a
        // 16-byte access phase touch 8 keys, distinct banks in either tile layout
        const int w = threadIdx.x / 32, ln = threadIdx.x % 32;
        static_assert(Lay::KT % 8 == 0, "keys per warp");
#pragma unroll 1
        for (int j8 = w; j8 < Lay::KT / 8; j8 += kAttendThreads / 32) {
            const int j = 8 * j8 + ln % 8;
            const uint8_t *e = raw + j * EntryBytes;
#pragma unroll
            for (int c = ln / 8; c < C; c += 4) {
                if (c < CL) {
                    const float scale = reinterpret_cast<const float *>(e + ScaleOffset)[c / 8];
                    uint4 o0, o1;
                    e4m3x16_to_bf16(load16(e + 16 * c), scale, o0, o1);
                    store16(k_s + Lay::qk_at(j, 16 * c), o0);
                    store16(k_s + Lay::qk_at(j, 16 * c + 8), o1);
                } else {
                    store16(k_s + Lay::qk_at(j, LAT + 8 * (c - CL)), load16(e + RopeOffset + 16 * (c - CL)));
                }
            }
        }
    } else { // nvfp4_ds_mla: e2m1 latent x e4m3 scale per 16 (4 interleaved rows), e4m3 rope
        constexpr int CL = LAT / 32, CR = R / 16, C = CL + CR;
        static_assert(R % 16 == 0 && RopeOffset % 16 == 0, "nvfp4_ds_mla rope chunks");
#pragma unroll 1
        for (int i = threadIdx.x; i < Lay::KT * C; i += kAttendThreads) {
            const int j = 8 * (i / 8 / C) + i % 8, c = i / 8 % C; // 8 neighbouring threads on 8 keys
            const uint8_t *e = raw + j * EntryBytes;
            if (c < CL) { // 32 values, scale blocks 2c and 2c + 1
                const auto scale_at = [&](int s) { return e[ScaleOffset + nvfp4_scale_at<LAT>(s)]; };
                nvfp4_chunk_to_bf16<Lay>(load16(e + 16 * c), scale_at(2 * c), scale_at(2 * c + 1), j, c,
                                         [&](int off, uint4 x) { store16(k_s + off, x); });
            } else {
                const uint4 v = load16(e + RopeOffset + 16 * (c - CL));
                uint4 o0, o1;
                e4m3x16_to_bf16(v, 1.0f, o0, o1);
                store16(k_s + Lay::qk_at(j, LAT + 16 * (c - CL)), o0);
                store16(k_s + Lay::qk_at(j, LAT + 16 * (c - CL) + 8), o1);
            }
        }
    }
}

} // namespace dsa
