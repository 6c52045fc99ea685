// Stage A, the prologue kernel: the query RMSNorm of every token, then this rank's cache entries.
// The per-token pieces (row RMSNorm, top-k clear) are here; the cache entry formats are in
// dsa_cache_format.cuh, the indexer key in dsa_indexer_key.cuh.
#pragma once
#include "dsa_cache_format.cuh"
#include "dsa_indexer_key.cuh"

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

} // namespace dsa
