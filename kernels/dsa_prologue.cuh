// Stage A, the prologue kernel body: the query RMSNorm of every token, then this rank's cache entries.
// The steps are in the order of docs/design.md, "The step"; the order is the point. The cache entry
// formats are in dsa_cache_format.cuh, the indexer key in dsa_indexer_key.cuh.
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

// One CTA of kPrologueThreads per token.
template <class C> __device__ __forceinline__ void prologue(const dsa_prologue_params &p)
{
    constexpr int L = C::kv_lora_rank, R = C::qk_rope_dim;
    static_assert(C::prologue_threads == kPrologueThreads,
                  "the plan's prologue CTA is the one this kernel is written for (block sums, the indexer's warp)");
    static_assert(L / 8 + R / 2 <= kPrologueThreads - 32, "latent chunks and rope pairs must leave the last warp to the indexer");
    __shared__ float scratch[kPrologueThreads / 32 + 1];
    __shared__ float kpe[R];
    const int t = blockIdx.x;
    const int tid = threadIdx.x;

    // 1. The query latent is normalised for EVERY token, before the slot check: a rank that owns
    //    no KV slot for this token still feeds its q_c_out to the query projections. Skipping it
    //    on non-owning ranks was the first defect dsagen exists to prevent (docs/design.md, "The step").
    rmsnorm_row<C::q_lora_rank>(p.q_c + t * p.q_c_stride, p.q_norm_w, p.q_c_out + (int64_t)t * C::q_lora_rank,
                                C::rms_norm_eps(), scratch);

    // 2. On indexer layers the top-k row starts as all -1 (no key); layers that share the
    //    previous layer's top-k pass clear_topk = 0 and the row is left alone.
    if (p.clear_topk && p.topk)
        clear_topk_row<C::idx_topk>(p.topk + (int64_t)t * C::idx_topk);

    // 3. The slot check. Everything below writes this rank's caches, and only for its own slots.
    //    The branch is uniform across the CTA (one token per CTA), so returning is safe.
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0)
        return;
    const int64_t pos = p.positions[t];
    if (slot >= p.num_slots || pos < 0 || pos >= C::max_positions) {
        if (tid == 0)
            atomicAdd(&p.rejected[slot >= p.num_slots ? 0 : 1], 1ull); // counted, never written out of bounds
        return;
    }

    // 4. KV latent RMSNorm, k_pe rope, one cache entry of C::cache_bytes bytes.
    const uint16_t *kv = p.kv + t * p.kv_stride;
    uint8_t *entry = p.kv_cache + slot * C::cache_bytes;
    constexpr int kLatentThreads = L / 8;
    constexpr int kRopeThreads = R / 2;
    if (tid >= kLatentThreads && tid < kLatentThreads + kRopeThreads) {
        const int i = tid - kLatentThreads;
        kpe[2 * i] = bf16_to_float(kv[L + 2 * i]);
        kpe[2 * i + 1] = bf16_to_float(kv[L + 2 * i + 1]);
    }
    float v[8];
    float ss = 0.0f;
    if (tid < kLatentThreads) {
        bf16x8{load16(kv + 8 * tid)}.to_float(v);
#pragma unroll
        for (int i = 0; i < 8; i++)
            ss += v[i] * v[i];
    }
    const float r = rsqrtf(block_sum<kPrologueThreads>(ss, scratch) / (float)L + C::rms_norm_eps()); // also publishes kpe[]
    const float *cos_row = p.rope_cos + pos * (R / 2);
    const float *sin_row = p.rope_sin + pos * (R / 2);
    if (tid < kLatentThreads) {
        float w[8];
        bf16x8{load16(p.kv_norm_w + 8 * tid)}.to_float(w);
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = v[i] * r * w[i];
        write_latent_chunk<C::cache_format, L, C::cache_scale_offset, C::cache_fp8_scale_pow2>(v, tid, entry);
    } else if (tid < kLatentThreads + kRopeThreads) {
        const int i = tid - kLatentThreads;
        write_rope_pair<C::cache_format, R, C::rope_interleaved, C::cache_rope_offset>(kpe, i, cos_row[i], sin_row[i],
                                                                                         entry);
    } else if (tid >= kPrologueThreads - 32 && p.idx_k) {
        // 5. Indexer key (indexer layers): LayerNorm, rope, optional Hadamard, e4m3 page entry.
        write_indexer_key<C::idx_head_dim, R, C::idx_rope_first, C::idx_rope_interleaved, C::idx_hadamard,
                          C::block_size>(p.idx_k + t * p.idx_k_stride, p.idx_norm_w, p.idx_norm_b, C::idx_norm_eps(),
                                         cos_row, sin_row, slot, p.idx_cache);
    }
}

} // namespace dsa
