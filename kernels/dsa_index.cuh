// Stage B, the indexer: query preparation, scores of a row's keys on fp8 tensor cores, the exact
// top-k of a row, and under DCP the merge of the ranks' candidate lists. Every order used is one
// total order (score_key, then position), so every rank and every run picks the same set.
#pragma once
#include "dsa_index_select.cuh"
#include "dsa_indexer_key.cuh"

namespace dsa {

// How many of the positions 0..last a DCP rank owns, positions dealt in runs of I over W ranks.
template <int W, int I> __device__ __forceinline__ int64_t owned_count(int64_t last, int rank)
{
    const int64_t n = last + 1, full = n / (W * I), rem = n % (W * I);
    const int64_t tail = rem - (int64_t)rank * I;
    return full * I + (tail < 0 ? 0 : tail > I ? I : tail);
}

// The global position of a rank's local index l.
template <int W, int I> __device__ __forceinline__ int32_t global_position(int64_t l, int rank)
{
    return (int32_t)((l / I) * (W * I) + (int64_t)rank * I + l % I);
}

// The last position row t may see (causal, inside its request), or -1 for a row with no keys.
__device__ __forceinline__ int64_t row_last(const int64_t *positions, const int32_t *req_of_token,
                                            const int32_t *seq_lens, int64_t num_requests, int t)
{
    const int32_t req = req_of_token[t];
    if (req < 0 || req >= num_requests)
        return -1;
    const int64_t pos = positions[t], len = seq_lens[req];
    return pos < len - 1 ? pos : len - 1; // negative pos or empty request: -1 or less
}

// fp8 tensor-core step: D += A (16 x 32 e4m3, row-major) x B (32 x 8 e4m3, col-major), fp32 accumulate.
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// B.1: one warp per (token, head). The query goes through the key's own preparation (rope on the
// same dims in the same style, the same Hadamard, the same scale rule), so q . k is the model's.
template <class C> __device__ __forceinline__ void index_query(const dsa_index_q_params &p)
{
    constexpr int H = C::idx_heads, D = C::idx_head_dim, R = C::qk_rope_dim, V = D / 32;
    static_assert(C::idx_q_threads == 256, "a warp per head, 8 heads per CTA");
    const int t = blockIdx.x, h = blockIdx.y * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (h >= H)
        return;
    const int64_t pos = p.positions[t];
    const bool pos_ok = pos >= 0 && pos < C::max_positions;
    float x[V];
    const uint16_t *q = p.q + t * p.q_stride + h * D + lane * V;
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = pos_ok ? bf16_to_float(q[j]) : 0.0f; // a position outside the rope table: every score 0
    const int64_t row = pos_ok ? pos : 0;
    indexer_rope_hadamard<D, R, C::idx_rope_first, C::idx_rope_interleaved, C::idx_hadamard>(
        x, lane, p.rope_cos + row * (R / 2), p.rope_sin + row * (R / 2));
    const float scale = indexer_scale<D>(x);
    indexer_store_e4m3<D>(x, scale, p.q8 + ((int64_t)t * H + h) * D, lane);
    if (lane == 0) {
        const float w = p.weights[t * p.w_stride + h];
        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));
    }
}

// B.2, the parts both score kernels share, so that a key's score is the same fp32 computation,
// bit for bit, whichever kernel runs. Each warp scores 8 keys at a time on fp8 tensor cores
// (m16n8k32): A = the row's query heads (16 x 32 per step; heads past H are zero with weight 0),
// B = 8 keys' values. The 32-dim k-steps walk each thread's own D / 4 contiguous bytes of the
// query and key rows, a permutation of the dims that both operands share, so q . k is unchanged
// and every load is 16 bytes. The per-key order of the fp32 operations: each head tile's dot
// products over the k-steps in order on the tensor cores; per tile, w'[g] relu(d[g]) +
// w'[g + 8] relu(d[g + 8]) added to the thread's running sum tile by tile; the 8 head groups
// summed by a butterfly (xor 4, 8, 16); the key's scale last.
template <class C> struct ScoreShape {
    static constexpr int H = C::idx_heads, D = C::idx_head_dim, MT = (H + 15) / 16, KS = D / 32, LOADS = D / 64;
    static constexpr int WARPS = C::idx_score_threads / 32;
    static constexpr int G = C::idx_score_keys_per_cta / (WARPS * 8); // groups of 8 keys a warp step
    static_assert(D % 64 == 0, "each thread takes D / 4 bytes of a row in 16-byte loads");
    static_assert(G * WARPS * 8 == C::idx_score_keys_per_cta, "a warp step is G groups of 8 keys");
    static constexpr int qfrag_words = MT * KS * 32; // uint4 of the staged query fragments
};

// The row's query fragments, staged once in shared memory in the order the mma reads them (one
// 16-byte load per thread and step, no bank conflict): kept in registers they took 32 (GLM-5.2)
// to 64 (DeepSeek-V3.2) registers per thread and capped the warps an SM holds. Also this thread's
// head weights (rows g and g + 8 of each tile). Ends with a barrier of the CTA.
template <class C>
__device__ __forceinline__ void score_stage_query(const dsa_index_score_params &p, int t, uint4 *qfrag,
                                                  float (&wh)[ScoreShape<C>::MT][2])
{
    using S = ScoreShape<C>;
    constexpr int H = S::H, D = S::D, MT = S::MT, KS = S::KS, LOADS = S::LOADS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
    for (int mt = warp; mt < MT; mt += S::WARPS) {
        uint32_t w[2][2 * KS]; // rows g and g + 8 of the tile: this thread's D / 4 bytes of each
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int h = mt * 16 + g + 8 * half;
            const uint8_t *q = p.q8 + ((int64_t)t * H + h) * D + tig * (D / 4);
#pragma unroll
            for (int c = 0; c < LOADS; c++) {
                const uint4 v = h < H ? load16(q + 16 * c) : make_uint4(0u, 0u, 0u, 0u);
                w[half][4 * c] = v.x, w[half][4 * c + 1] = v.y, w[half][4 * c + 2] = v.z, w[half][4 * c + 3] = v.w;
            }
        }
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            qfrag[(mt * KS + ks) * 32 + lane] = make_uint4(w[0][2 * ks], w[1][2 * ks], w[0][2 * ks + 1], w[1][2 * ks + 1]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int h = mt * 16 + g + 8 * half;
            wh[mt][half] = h < H ? p.wq[(int64_t)t * H + h] : 0.0f;
        }
    __syncthreads();
}

// The head sums of G groups of 8 keys whose B fragments b[gi] this thread holds: s0[gi], s1[gi]
// are keys 2 tig and 2 tig + 1 of group gi over this thread's heads (g and g + 8 of every tile).
// Each query fragment is read from shared memory once and used for the G groups.
template <class C, int G>
__device__ __forceinline__ void score_heads(const uint4 *qfrag, const float (&wh)[ScoreShape<C>::MT][2],
                                            const uint32_t (&b)[G][2 * ScoreShape<C>::KS], float (&s0)[G],
                                            float (&s1)[G])
{
    constexpr int MT = ScoreShape<C>::MT, KS = ScoreShape<C>::KS;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int gi = 0; gi < G; gi++)
        s0[gi] = 0.0f, s1[gi] = 0.0f;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        float d[G][4];
#pragma unroll
        for (int gi = 0; gi < G; gi++)
            d[gi][0] = d[gi][1] = d[gi][2] = d[gi][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            const uint4 f = qfrag[(mt * KS + ks) * 32 + lane];
            const uint32_t a[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
            for (int gi = 0; gi < G; gi++)
                mma_e4m3_16832(d[gi], a, b[gi][2 * ks], b[gi][2 * ks + 1]);
        }
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            s0[gi] = __fadd_rn(s0[gi], __fadd_rn(__fmul_rn(wh[mt][0], relu_nan(d[gi][0])),
                                                 __fmul_rn(wh[mt][1], relu_nan(d[gi][2]))));
            s1[gi] = __fadd_rn(s1[gi], __fadd_rn(__fmul_rn(wh[mt][0], relu_nan(d[gi][1])),
                                                 __fmul_rn(wh[mt][1], relu_nan(d[gi][3]))));
        }
    }
}

// The sum over the 8 head groups (lanes with the same tig), in a fixed order; every lane gets it.
__device__ __forceinline__ float score_sum_groups(float v)
{
#pragma unroll
    for (int o = 4; o < 32; o *= 2)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// B.2, the plain kernel: each warp loads G groups of 8 keys straight into registers (every group's
// loads issued before the first mma, so a warp keeps G KiB of key rows in flight), scores them,
// then loads the next; its warps wait on each step's loads.
template <class C> __device__ __forceinline__ void index_score(const dsa_index_score_params &p)
{
    using S = ScoreShape<C>;
    constexpr int D = S::D, W = C::dcp, I = C::interleave, BS = C::block_size;
    constexpr int MT = S::MT, KS = S::KS, LOADS = S::LOADS, WARPS = S::WARPS, G = S::G;
    const int t = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    if (n == 0)
        return;
    const int32_t req = p.req_of_token[t];
    const int32_t *blocks = p.block_table + (int64_t)req * p.max_blocks;
    __shared__ uint4 qfrag[S::qfrag_words];
    float wh[MT][2];
    score_stage_query<C>(p, t, qfrag, wh);
    uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    const int64_t step = (int64_t)gridDim.y * WARPS * 8 * G;
    for (int64_t l0 = ((int64_t)blockIdx.y * WARPS + warp) * 8 * G; l0 < n; l0 += step) {
        uint32_t b[G][2 * KS];
        float kscale[G];
        int have[G];
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            // this thread loads key l0 + 8 gi + g (the B column it feeds); its slot, or none
            const int64_t l = l0 + 8 * gi + g;
            const uint8_t *page = nullptr;
            int off = 0;
            if (l < n && l / BS < p.max_blocks) {
                const int32_t blk = blocks[l / BS];
                if (blk >= 0 && (int64_t)blk * BS + l % BS < p.num_slots) {
                    page = p.idx_cache + (int64_t)blk * (BS * (D + 4));
                    off = (int)(l % BS);
                }
            }
#pragma unroll
            for (int c = 0; c < LOADS; c++) {
                const uint4 v = page ? load16(page + off * D + tig * (D / 4) + 16 * c) : make_uint4(0u, 0u, 0u, 0u);
                b[gi][4 * c] = v.x, b[gi][4 * c + 1] = v.y, b[gi][4 * c + 2] = v.z, b[gi][4 * c + 3] = v.w;
            }
            kscale[gi] = page ? *reinterpret_cast<const float *>(page + BS * D + 4 * off) : 0.0f;
            have[gi] = page != nullptr;
        }
        float s0[G], s1[G];
        score_heads<C, G>(qfrag, wh, b, s0, s1);
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            const float t0 = score_sum_groups(s0[gi]), t1 = score_sum_groups(s1[gi]);
            // key scales and presence travel from the thread that loaded key j (lane 4 j)
            const float sc0 = __shfl_sync(0xffffffffu, kscale[gi], 8 * tig);
            const float sc1 = __shfl_sync(0xffffffffu, kscale[gi], 8 * tig + 4);
            const int have0 = __shfl_sync(0xffffffffu, have[gi], 8 * tig);
            const int have1 = __shfl_sync(0xffffffffu, have[gi], 8 * tig + 4);
            const int64_t j0 = l0 + 8 * gi + 2 * tig;
            if (g == 0 && j0 < n)
                keys[j0] = have0 ? score_key(__fmul_rn(sc0, t0)) : 0u;
            if (g == 0 && j0 + 1 < n)
                keys[j0 + 1] = have1 ? score_key(__fmul_rn(sc1, t1)) : 0u;
        }
    }
}

// The pipelined kernel's shared memory beyond the query fragments (dynamic; the plan's
// index_score_smem, which the runtime launches with): per warp, P stages of G groups of 8 keys,
// each group's values in the order its lanes read them ([c][lane] 16-byte words: lane (g, tig)
// gets key g's bytes tig * D / 4 + 16 c), then per warp and stage the keys' scales and presence.
template <class C> struct ScorePipeLayout {
    using S = ScoreShape<C>;
    static constexpr int P = C::idx_score_stages;
    static constexpr int stage_words = S::G * S::LOADS * 32;                // uint4 of one stage's key values
    static constexpr int keys_bytes = S::WARPS * P * stage_words * 16;
    static constexpr int meta_words = S::WARPS * P * S::G * 8;              // one scale (and one flag) a key
    static constexpr int bytes = keys_bytes + 2 * meta_words * 4;
    static_assert(P >= 2, "a stage in flight while one is scored");
    static_assert(bytes == C::idx_score_smem, "the plan's score shared memory is the kernel's layout");
};

// B.2, the pipelined kernel: the same warp steps and the same arithmetic as index_score, but each
// warp copies its key groups with cp.async into P stages of shared memory, P - 1 steps ahead of
// the step it scores, so (P - 1) G KiB of key rows per warp stay in flight while it computes, and
// the block-table entries of the next step are loaded a step early. Each lane copies exactly the
// 16-byte words it later reads (no barrier for those); the scales and presence flags, read by
// other lanes, are ordered by the warp's barriers. Scores bit-identical to index_score's.
template <class C> __device__ __forceinline__ void index_score_pipe(const dsa_index_score_params &p)
{
    using S = ScoreShape<C>;
    using Lay = ScorePipeLayout<C>;
    constexpr int D = S::D, W = C::dcp, I = C::interleave, BS = C::block_size, P = Lay::P;
    constexpr int MT = S::MT, KS = S::KS, LOADS = S::LOADS, WARPS = S::WARPS, G = S::G;
    const int t = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    if (n == 0)
        return;
    const int32_t req = p.req_of_token[t];
    const int32_t *blocks = p.block_table + (int64_t)req * p.max_blocks;
    __shared__ uint4 qfrag[S::qfrag_words];
    extern __shared__ uint4 score_pipe_smem[];
    float wh[MT][2];
    score_stage_query<C>(p, t, qfrag, wh);
    // after the CTA's one barrier above, every warp runs alone
    uint4 *const kbuf = score_pipe_smem + warp * P * Lay::stage_words;
    float *const kscale = reinterpret_cast<float *>(score_pipe_smem + WARPS * P * Lay::stage_words) + warp * P * G * 8;
    int *const kok = reinterpret_cast<int *>(score_pipe_smem + WARPS * P * Lay::stage_words) + Lay::meta_words +
                     warp * P * G * 8;
    uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    const int64_t first = ((int64_t)blockIdx.y * WARPS + warp) * 8 * G, step = (int64_t)gridDim.y * WARPS * 8 * G;
    if (first >= n)
        return;
    const int steps = (int)((n - first + step - 1) / step); // at most max_positions / 8
    // the block of key l0 + 8 gi + g of a step, or -1 where the key is past the row or its table
    auto fetch = [&](int64_t l0, int32_t (&blk)[G]) {
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            const int64_t l = l0 + 8 * gi + g;
            blk[gi] = l < n && l / BS < p.max_blocks ? blocks[l / BS] : -1;
        }
    };
    // this lane's copies of a step into stage st: its key's 16-byte words, its key's scale and
    // presence from lane tig 0; a key with no slot copies nothing and gets zeros (its source
    // address then lies in the cache's first page, aligned, and is not read)
    auto issue = [&](int64_t l0, const int32_t (&blk)[G], int st) {
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            const int64_t l = l0 + 8 * gi + g;
            const bool ok = blk[gi] >= 0 && (int64_t)blk[gi] * BS + l % BS < p.num_slots;
            const uint8_t *page = ok ? p.idx_cache + (int64_t)blk[gi] * (BS * (D + 4)) : p.idx_cache;
            const int off = ok ? (int)(l % BS) : 0;
#pragma unroll
            for (int c = 0; c < LOADS; c++)
                cp_async16(smem_addr(kbuf + st * Lay::stage_words + (gi * LOADS + c) * 32 + lane),
                           page + off * D + tig * (D / 4) + 16 * c, ok ? 16 : 0);
            if (tig == 0) {
                const int m = (st * G + gi) * 8 + g;
                cp_async4(smem_addr(kscale + m), page + BS * D + 4 * off, ok ? 4 : 0);
                kok[m] = ok;
            }
        }
    };
    int32_t blk[G];
    for (int s = 0; s < P - 1; s++) {
        if (s < steps) {
            fetch(first + s * step, blk);
            issue(first + s * step, blk, s);
        }
        cp_async_commit(); // one group per step, empty past the row, so the count below holds
    }
    fetch(first + (P - 1) * step, blk);
    for (int it = 0; it < steps; it++) {
        const int st = (int)(it % P);
        if (it + P - 1 < steps) // into the stage scored at it - 1 (the warp barrier below freed it)
            issue(first + (it + P - 1) * step, blk, (int)((it + P - 1) % P));
        cp_async_commit();
        fetch(first + (it + P) * step, blk); // in flight while this step computes
        cp_async_wait<P - 1>();               // this step's copies have landed
        __syncwarp();
        const int64_t l0 = first + it * step;
        uint32_t b[G][2 * KS];
#pragma unroll
        for (int gi = 0; gi < G; gi++)
#pragma unroll
            for (int c = 0; c < LOADS; c++) {
                const uint4 v = kbuf[st * Lay::stage_words + (gi * LOADS + c) * 32 + lane];
                b[gi][4 * c] = v.x, b[gi][4 * c + 1] = v.y, b[gi][4 * c + 2] = v.z, b[gi][4 * c + 3] = v.w;
            }
        float s0[G], s1[G];
        score_heads<C, G>(qfrag, wh, b, s0, s1);
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            const float t0 = score_sum_groups(s0[gi]), t1 = score_sum_groups(s1[gi]);
            const int m = (st * G + gi) * 8 + 2 * tig;
            const int64_t j0 = l0 + 8 * gi + 2 * tig;
            if (g == 0 && j0 < n)
                keys[j0] = kok[m] ? score_key(__fmul_rn(kscale[m], t0)) : 0u;
            if (g == 0 && j0 + 1 < n)
                keys[j0 + 1] = kok[m + 1] ? score_key(__fmul_rn(kscale[m + 1], t1)) : 0u;
        }
        __syncwarp(); // every lane is done with stage st before it is copied into again
    }
}

// B.3: one CTA per row over its keys (ascending local index = ascending position). DCP = 1 writes
// the row's positions; DCP > 1 writes the row's candidate list for the exchange.
template <class C> __device__ __forceinline__ void index_topk(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, I = C::interleave, K = C::idx_topk, Threads = C::idx_topk_threads;
    __shared__ uint32_t hist[256], scratch[3 + 2 * (C::idx_topk_threads / 32)];
    const int t = blockIdx.x;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    const int rank = p.rank;
    int written;
    if constexpr (W == 1) {
        int32_t *out = p.topk + (int64_t)t * p.topk_stride;
        written = select_topk<Threads, 1>(keys, n, K, [&](int j, int64_t i) { out[j] = (int32_t)i; }, hist, scratch);
        for (int j = written + threadIdx.x; j < K; j += Threads)
            out[j] = -1;
    } else {
        uint32_t *out = p.cand_out + (int64_t)t * K * 2;
        written = select_topk<Threads, 1>(keys, n, K, [&](int j, int64_t i) {
            out[2 * j] = keys[i];
            out[2 * j + 1] = (uint32_t)global_position<W, I>(i, rank);
        }, hist, scratch);
        for (int j = written + threadIdx.x; j < K; j += Threads) {
            out[2 * j] = 0u;
            out[2 * j + 1] = 0xffffffffu;
        }
    }
}

// B.3 over several CTAs of a row (grid T x splits, launched cooperatively: the CTAs of a row meet
// at barriers): the same rows as index_topk, bit for bit (select_topk_split). The row's state
// (p.split_state) is all zero before the call and again after it.
template <class C> __device__ __forceinline__ void index_topk_split(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, I = C::interleave, K = C::idx_topk, Threads = C::idx_topk_split_threads;
    constexpr int RB = C::idx_topk_radix_bits, SplitKeys = C::idx_topk_split_keys;
    static_assert(SplitState<RB>::bytes(C::idx_topk_split_max) == C::idx_topk_state_bytes,
                  "the plan's row state is the kernel's layout");
    __shared__ uint32_t hist[1 << RB], red[3 + 2 * (Threads / 32)];
    const int t = blockIdx.x;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    uint32_t *state = p.split_state + (int64_t)t * p.state_stride;
    const int rank = p.rank;
    if constexpr (W == 1) {
        int32_t *out = p.topk + (int64_t)t * p.topk_stride;
        select_topk_split<Threads, RB, SplitKeys>(
            keys, n, K, [&](int j, int64_t i) { out[j] = (int32_t)i; }, [&](int j) { out[j] = -1; }, state, hist, red);
    } else {
        uint32_t *out = p.cand_out + (int64_t)t * K * 2;
        select_topk_split<Threads, RB, SplitKeys>(
            keys, n, K,
            [&](int j, int64_t i) {
                out[2 * j] = keys[i];
                out[2 * j + 1] = (uint32_t)global_position<W, I>(i, rank);
            },
            [&](int j) {
                out[2 * j] = 0u;
                out[2 * j + 1] = 0xffffffffu;
            },
            state, hist, red);
    }
}

// B.4 (DCP > 1): the W lists of a row, each ascending in position with its candidates first,
// merged into one ascending list (a candidate's place: its index in its own list plus how many
// candidates of each other list have a smaller position), then the same selection as B.3. Every
// rank runs this on the same gathered lists, so every rank writes the same row.
template <class C> __device__ __forceinline__ void index_merge(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, K = C::idx_topk, Threads = C::idx_topk_threads;
    __shared__ uint32_t hist[256], scratch[3 + 2 * (C::idx_topk_threads / 32)];
    __shared__ int count[W];
    const int t = blockIdx.x;
    const uint32_t *list[W];
#pragma unroll
    for (int r = 0; r < W; r++)
        list[r] = p.cand_in + ((int64_t)r * p.num_tokens + t) * K * 2;
    if (threadIdx.x < W) { // candidates first, then padding (key 0): count them by binary search
        const uint32_t *c = list[threadIdx.x];
        int lo = 0, hi = K;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (c[2 * mid] != 0u)
                lo = mid + 1;
            else
                hi = mid;
        }
        count[threadIdx.x] = lo;
    }
    __syncthreads();
    int total = 0;
#pragma unroll
    for (int r = 0; r < W; r++)
        total += count[r];
    uint32_t *merged = p.merged + (int64_t)t * W * K * 2;
    for (int e = threadIdx.x; e < W * K; e += Threads) {
        const int r = e / K, i = e % K;
        if (i >= count[r])
            continue;
        const uint32_t key = list[r][2 * i], pos = list[r][2 * i + 1];
        int at = i;
#pragma unroll
        for (int o = 0; o < W; o++) {
            if (o == r)
                continue;
            int lo = 0, hi = count[o]; // candidates of list o with a smaller position
            while (lo < hi) {
                const int mid = (lo + hi) / 2;
                if (list[o][2 * mid + 1] < pos)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            at += lo;
        }
        merged[2 * at] = key;
        merged[2 * at + 1] = pos;
    }
    __syncthreads();
    int32_t *out = p.topk + (int64_t)t * p.topk_stride;
    const int written = select_topk<Threads, 2>(merged, total, K,
                                                        [&](int j, int64_t i) { out[j] = (int32_t)merged[2 * i + 1]; },
                                                        hist, scratch);
    for (int j = written + threadIdx.x; j < K; j += Threads)
        out[j] = -1;
}

} // namespace dsa
