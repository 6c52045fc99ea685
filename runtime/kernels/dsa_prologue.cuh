// Stage A building blocks: the per-token pieces of the prologue kernel, parameterised by the
// configuration's constants. The generated prologue.cu of each configuration calls them in the
// order of DESIGN.md; the order is the point, so it stays visible there, not here.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

constexpr int kPrologueThreads = 256;

// RMSNorm of one bf16 row of Q values (x * rsqrt(mean(x^2) + eps) * w, fp32 math), written to out.
// Each thread holds its 16-byte chunks in registers, so the row is read once.
template <int Q> __device__ __forceinline__ void rmsnorm_row(const uint16_t *x, const uint16_t *w, uint16_t *out,
                                                             float eps, float *scratch)
{
    static_assert(Q % 8 == 0, "rows are read in 16-byte chunks");
    constexpr int kChunks = Q / 8, kPerThread = (kChunks + kPrologueThreads - 1) / kPrologueThreads;
    float v[kPerThread][8];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerThread; k++) {
        const int c = threadIdx.x + k * kPrologueThreads;
        if (c < kChunks) {
            bf16x8{load16(x + 8 * c)}.to_float(v[k]);
#pragma unroll
            for (int i = 0; i < 8; i++)
                ss += v[k][i] * v[k][i];
        }
    }
    const float r = rsqrtf(block_sum<kPrologueThreads>(ss, scratch) / (float)Q + eps);
#pragma unroll
    for (int k = 0; k < kPerThread; k++) {
        const int c = threadIdx.x + k * kPrologueThreads;
        if (c < kChunks) {
            float wf[8];
            bf16x8{load16(w + 8 * c)}.to_float(wf);
#pragma unroll
            for (int i = 0; i < 8; i++)
                v[k][i] = v[k][i] * r * wf[i];
            store16(out + 8 * c, bf16x8::from_float(v[k]));
        }
    }
}

// Fills one top-k row with -1 (int4 stores).
template <int TopK> __device__ __forceinline__ void clear_topk_row(int32_t *row)
{
    static_assert(TopK % 4 == 0, "top-k rows are cleared 16 bytes at a time");
    for (int i = threadIdx.x; i < TopK / 4; i += kPrologueThreads)
        reinterpret_cast<int4 *>(row)[i] = make_int4(-1, -1, -1, -1);
}

// ---- MLA cache entry: the latent part, one thread per 8 values ----

enum CacheFormat { kBf16 = 0, kFp8DsMla = 1, kNvfp4DsMla = 2 };

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
            entry[ScaleOffset + (L / 64) * (s & 3) + (s >> 2)] = code;
        }
    }
}

// One rope pair of k_pe, rotated and stored in the entry's rope area (bf16, or e4m3 unscaled).
template <int Format, int R, bool Interleaved, int RopeOffset>
__device__ __forceinline__ void write_rope_pair(const float *kpe, int i, float c, float s, uint8_t *entry)
{
    const int a = Interleaved ? 2 * i : i, b = Interleaved ? 2 * i + 1 : i + R / 2;
    const float x0 = kpe[a], x1 = kpe[b];
    const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
    if constexpr (Format == kNvfp4DsMla) {
        entry[RopeOffset + a] = e4m3(y0);
        entry[RopeOffset + b] = e4m3(y1);
    } else {
        reinterpret_cast<uint16_t *>(entry + RopeOffset)[a] = float_to_bf16(y0);
        reinterpret_cast<uint16_t *>(entry + RopeOffset)[b] = float_to_bf16(y1);
    }
}

// ---- indexer key: one warp, D / 32 values per lane ----
// LayerNorm (weight, bias), rope on 64 dims (first or last), optional Hadamard, e4m3 with a
// power-of-two scale into the page layout [bs x D e4m3][bs x fp32 scale].
template <int D, int R, bool RopeFirst, bool Interleaved, bool Hadamard, int BlockSize>
__device__ __forceinline__ void write_indexer_key(const uint16_t *k, const uint16_t *w, const uint16_t *b, float eps,
                                                  const float *cos_row, const float *sin_row, int64_t slot,
                                                  uint8_t *cache)
{
    constexpr int V = D / 32;
    static_assert(D % 32 == 0 && V <= 8 && (V & (V - 1)) == 0, "indexer head_dim: 32..256, a power of two");
    static_assert(R % V == 0 && R <= D, "rope dims must cover whole lanes");
    const int lane = threadIdx.x % 32;
    float x[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = bf16_to_float(k[lane * V + j]);
    float mean = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
        mean += x[j];
    mean = group_sum(mean) / (float)D;
    float var = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
        var += (x[j] - mean) * (x[j] - mean);
    const float r = rsqrtf(group_sum(var) / (float)D + eps);
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = (x[j] - mean) * r * bf16_to_float(w[lane * V + j]) + bf16_to_float(b[lane * V + j]);

    // rope on dims [base, base + R)
    constexpr int base = RopeFirst ? 0 : D - R;
    const int first = lane * V - base; // this lane's first rope dim, if inside
    const bool in_rope = first >= 0 && first < R;
    if constexpr (Interleaved) {
        static_assert(V % 2 == 0, "interleaved pairs must sit inside one lane");
        if (in_rope) {
#pragma unroll
            for (int j = 0; j < V; j += 2) {
                const int i = (first + j) / 2;
                const float x0 = x[j], x1 = x[j + 1];
                x[j] = x0 * cos_row[i] - x1 * sin_row[i];
                x[j + 1] = x0 * sin_row[i] + x1 * cos_row[i];
            }
        }
    } else {
        // NeoX: dim d pairs with d + R/2, which sits (R/2)/V lanes away
        constexpr int kLaneOff = (R / 2) / V;
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float other = __shfl_xor_sync(0xffffffffu, x[j], kLaneOff);
            if (in_rope) {
                const int d = first + j;
                const int i = d % (R / 2);
                x[j] = d < R / 2 ? x[j] * cos_row[i] - other * sin_row[i] : other * sin_row[i] + x[j] * cos_row[i];
            }
        }
    }

    if constexpr (Hadamard) {
#pragma unroll
        for (int h = 1; h < V; h *= 2) {
#pragma unroll
            for (int j = 0; j < V; j++) {
                if ((j & h) == 0) {
                    const float a = x[j], c = x[j + h];
                    x[j] = a + c;
                    x[j + h] = a - c;
                }
            }
        }
#pragma unroll
        for (int h = 1; h < 32; h *= 2) {
#pragma unroll
            for (int j = 0; j < V; j++) {
                const float other = __shfl_xor_sync(0xffffffffu, x[j], h);
                x[j] = (lane & h) ? other - x[j] : x[j] + other;
            }
        }
        const float s = rsqrtf((float)D);
#pragma unroll
        for (int j = 0; j < V; j++)
            x[j] *= s;
    }

    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    amax = group_max(amax);
    const float scale = pow2_ceil(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
    uint8_t *page = cache + (slot / BlockSize) * (int64_t)(BlockSize * (D + 4));
    const int off = (int)(slot % BlockSize);
#pragma unroll
    for (int j = 0; j < V; j += 2) {
        const uint32_t two = e4m3x2(__fdiv_rn(x[j], scale), __fdiv_rn(x[j + 1], scale));
        *reinterpret_cast<uint16_t *>(page + off * D + lane * V + j) = (uint16_t)two;
    }
    if (lane == 0)
        *reinterpret_cast<float *>(page + BlockSize * D + 4 * off) = scale;
}

} // namespace dsa
