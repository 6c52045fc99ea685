// Stage B, the indexer: query preparation, scores of a row's keys on fp8 tensor cores, the exact
// top-k of a row, and under DCP the merge of the ranks' candidate lists. Every order used is one
// total order (score_key, then position), so every rank and every run picks the same set.
#pragma once
#include "dsa_index_select.cuh"
#include "dsa_index_wgmma.cuh"
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

// The last position row t may see (causal, inside its request), or -1 for a row with no keys: its
// request out of range, or its position outside the rope table [0, MaxPositions) (the host's
// fault, as the prologue and the query kernel take it), which also bounds a row's keys by the
// keys workspace the plan sized for MaxPositions (a position of 2^31 with a request as long wrote
// gigabytes past it).
template <int64_t MaxPositions>
__device__ __forceinline__ int64_t row_last(const int64_t *positions, const int32_t *req_of_token,
                                            const int32_t *seq_lens, int64_t num_requests, int t)
{
    const int32_t req = req_of_token[t];
    if (req < 0 || req >= num_requests)
        return -1;
    const int64_t pos = positions[t], len = seq_lens[req], last = pos < len - 1 ? pos : len - 1;
    // a select, not a branch: with GivenCounts' loads beside it, a branch took the split top-k past
    // its 64 registers (the prepared index_latency patch in tests/bench/logs/, rebased on this)
    return (uint64_t)pos < (uint64_t)MaxPositions ? last : -1; // empty request: -1 or less
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
    // the position, the query's values and the head's weight in one round of loads: none of their
    // addresses depends on another's value (a load under the position's test, or after the e4m3
    // stores, which may alias it, waited for a round trip of its own). ptxas still issues the
    // weight's load late, after the rope's loads (which wait for the position) and only some hundred
    // cycles before its use at the end, so most of its round trip was the kernel's last wait: its
    // line is asked for here, into L1, and the load hits there.
    const int64_t pos = p.positions[t];
    const uint16_t *q = p.q + t * p.q_stride + h * D + lane * V;
    uint16_t raw[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        raw[j] = q[j];
    const float *const wp = p.weights + t * p.w_stride + h;
    asm volatile("prefetch.global.L1 [%0];" ::"l"(wp));
    const float w = *wp;
    const bool pos_ok = pos >= 0 && pos < C::max_positions;
    float x[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = pos_ok ? bf16_to_float(raw[j]) : 0.0f; // a position outside the rope table: every score 0
    const int64_t row = pos_ok ? pos : 0;
    indexer_rope_hadamard<D, R, C::idx_rope_first, C::idx_rope_interleaved, C::idx_hadamard>(
        x, lane, p.rope_cos + row * (R / 2), p.rope_sin + row * (R / 2));
    const float scale = indexer_scale<D>(x);
    indexer_store_e4m3<D>(x, scale, p.q8 + ((int64_t)t * H + h) * D, lane);
    if (lane == 0)
        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));
}

// B.2 on mma.sync (targets without wgmma): each warp scores 8 keys at a time on fp8 tensor cores
// (m16n8k32): A = the row's query heads (16 x 32 per step, kept in registers; heads past H are zero
// with weight 0), B = 8 keys' values. The 32-dim k-steps walk each thread's own D / 4 contiguous
// bytes of the query and key rows, a permutation of the dims that both operands share, so q . k is
// unchanged and every load is 16 bytes.
template <class C> __device__ __forceinline__ void index_score_mma_sync(const dsa_index_score_params &p)
{
    constexpr int H = C::idx_heads, D = C::idx_head_dim, W = C::dcp, I = C::interleave, BS = C::block_size;
    constexpr int Threads = C::idx_score_threads;
    static_assert(D % 64 == 0, "each thread takes D / 4 bytes of a row in 16-byte loads");
    constexpr int MT = (H + 15) / 16, KS = D / 32, LOADS = D / 64, WARPS = Threads / 32;
    const int t = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
    const int64_t last = row_last<C::max_positions>(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    if (n == 0)
        return;
    const int32_t req = p.req_of_token[t];
    const int32_t *blocks = p.block_table + (int64_t)req * p.max_blocks;
    // The row's query fragments, staged once in shared memory in the order the mma reads them (one
    // 16-byte load per thread and step, no bank conflict): kept in registers they took 32 (GLM-5.2)
    // to 64 (DeepSeek-V3.2) registers per thread and capped the warps an SM holds.
    __shared__ uint4 qfrag[MT * KS * 32];
    for (int mt = warp; mt < MT; mt += WARPS) {
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
    float wh[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int h = mt * 16 + g + 8 * half;
            wh[mt][half] = h < H ? p.wq[(int64_t)t * H + h] : 0.0f;
        }
    __syncthreads();
    uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    // G groups of 8 keys per warp step: every group's loads are issued before the first mma, so a
    // warp keeps G KiB of key rows in flight (the kernel is bound by how many bytes are in flight)
    constexpr int G = C::idx_score_keys_per_cta / (WARPS * 8); // the plan's split assumes this step
    static_assert(G * WARPS * 8 == C::idx_score_keys_per_cta, "a warp step is G groups of 8 keys");
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
        // keys 2 tig, 2 tig + 1 of each group, summed over this thread's heads; each query fragment
        // is read from shared memory once and used for the G groups
        float s0[G], s1[G];
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
#pragma unroll
        for (int gi = 0; gi < G; gi++) {
            // sum over the 8 head groups (lanes with the same tig), in a fixed order
            float t0 = s0[gi], t1 = s1[gi];
#pragma unroll
            for (int o = 4; o < 32; o *= 2) {
                t0 = __fadd_rn(t0, __shfl_xor_sync(0xffffffffu, t0, o));
                t1 = __fadd_rn(t1, __shfl_xor_sync(0xffffffffu, t1, o));
            }
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

// B.2: score = k_scale * sum_h w'_h ReLU(q_h . k) for each key of the row this rank owns, written
// as an orderable key (score_key; 0 where the key has no page). sm_90a: warpgroup MMA fed by bulk
// copies (dsa_index_wgmma.cuh), up to 64 heads; elsewhere mma.sync. Every CTA and rank of one
// build computes a key's score the same way, bit for bit.
// The kernel waits for the query kernel ahead of it (after_prior_grid) itself: on wgmma, after its
// first key tiles' copies are issued (score_rows_wgmma).
template <class C> __device__ __forceinline__ void index_score(const dsa_index_score_params &p)
{
    if constexpr (kHasWgmma && C::idx_heads <= 64) {
        // thread 0's first block-table entries first: they load with the row's length, not after it
        const ScoreFirstBlocks<C, C::idx_score_stages> first(p, blockIdx.x);
        const int64_t last = row_last<C::max_positions>(p.positions, p.req_of_token, p.seq_lens, p.num_requests, blockIdx.x);
        index_score_wgmma<C>(p, last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank), first);
    } else {
        after_prior_grid();
        index_score_mma_sync<C>(p);
    }
}

// B.2 for rows that share a request (prefill), on the same grid as index_score (CTA x = row t,
// y = the key split). With R = the plan's idx_score_group_rows, the CTAs of rows t0 .. t0 + R - 1 (t0
// a multiple of R; those below num_tokens, at least 2) check whether all those rows belong to one
// request: then CTA t0 scores all of them at once, each key tile loaded once for the group
// (score_rows_wgmma with N = R x the padded heads), and the others return at once; otherwise
// (decode rows, a group across two requests, a last group of one row) each CTA scores its own row
// as index_score does. Each row's keys are its own count (causality, DCP), every score
// index_score's, bit for bit. Dynamic shared memory: ScoreGroupOf<C>::smem bytes; where that is 0
// (no wgmma, more than 64 heads) this is index_score.
template <class C> __device__ __forceinline__ void index_score_group(const dsa_index_score_params &p)
{
    using G = ScoreGroupOf<C>;
    if constexpr (G::on) {
        constexpr int R = G::rows;
        extern __shared__ __align__(128) uint8_t score_smem[];
        const int t = blockIdx.x, t0 = t - t % R, rows = p.num_tokens - t0 < R ? p.num_tokens - t0 : R;
        const int32_t req = p.req_of_token[t0];
        bool group = rows > 1;
        for (int j = 1; j < rows; j++)
            group = group && p.req_of_token[t0 + j] == req;
        auto keys_of = [&](int row) -> int64_t { // the row's keys on this rank (index_score's count)
            const int64_t last = row_last<C::max_positions>(p.positions, p.req_of_token, p.seq_lens, p.num_requests, row);
            return last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank);
        };
        if (!group) {
            index_score_wgmma_in<C>(p, keys_of(t), *reinterpret_cast<typename G::One *>(score_smem));
            return;
        }
        if (t != t0)
            return; // scored by CTA t0
        int64_t n[R];
#pragma unroll
        for (int j = 0; j < R; j++)
            n[j] = j < rows ? keys_of(t0 + j) : 0;
        score_rows_wgmma<C, R>(p, *reinterpret_cast<typename G::Smem *>(score_smem), t0, rows, n);
    } else
        index_score<C>(p);
}

// Where B.3 puts row t's candidate list at DCP > 1: this rank's cand_out, or with the fused gather
// (p.cfused) list block `rank` of every rank's cand_in, stored straight over NVLink.
template <int W, int K> struct CandidateSink {
    // the fused gather runs at W <= DSA_MAX_PEERS only (the runtime's rule): never index cdest past it
    static constexpr int P = W < DSA_MAX_PEERS ? W : DSA_MAX_PEERS;
    const dsa_index_topk_params &p; // the kernel's parameters (constant memory)
    const int t;
    __device__ __forceinline__ CandidateSink(const dsa_index_topk_params &p_, int t_) : p(p_), t(t_) {}
    // each destination's address formed at its store from the parameters, so that no more than one
    // is held in registers (W of them made the split kernel spill under its 64 registers)
    __device__ __forceinline__ void put(int j, uint32_t key, uint32_t pos) const
    {
        const int64_t at = (int64_t)t * K * 2 + 2 * j;
        if (!p.cfused) {
            *reinterpret_cast<uint2 *>(p.cand_out + at) = make_uint2(key, pos);
            return;
        }
#pragma unroll
        for (int r = 0; r < P; r++)
            *reinterpret_cast<uint2 *>(p.cdest[r] + (int64_t)p.rank * p.num_tokens * K * 2 + at) = make_uint2(key, pos);
    }
};

// index_topk's selection of a row of n keys: from registers where it has at most Threads x R keys
// (v: its first Threads x R / 2, already loaded, for rows of at most that many), else select_topk's
// passes over the row in L2
template <int Threads, int R, class Emit>
__device__ __forceinline__ int select_row(const uint32_t (&v)[R / 2], const uint32_t *keys, int64_t n, int K, Emit emit,
                                          SelectRegsSmem &regs_smem, uint32_t *hist, uint32_t *scratch)
{
    return n <= R / 2 * Threads ? select_topk_regs<Threads, R / 2>(v, K, emit, regs_smem)
           : n <= R * Threads   ? select_topk_loaded<Threads, R>(keys, n, K, emit, regs_smem)
                                : select_topk<Threads, 1>(keys, n, K, emit, hist, scratch);
}

// B.3: one CTA per row over its keys (ascending local index = ascending position). DCP = 1 writes
// the row's positions; DCP > 1 writes the row's candidate list for the exchange.
template <class C> __device__ __forceinline__ void index_topk(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, I = C::interleave, K = C::idx_topk, Threads = C::idx_topk_threads;
    __shared__ uint32_t hist[256], scratch[3 + 2 * (C::idx_topk_threads / 32)];
    __shared__ SelectRegsSmem regs_smem;
    // the rows the runtime gives one CTA by their keys on this rank (at most the plan's
    // index_topk_split_min_keys) are held in registers: R keys a thread, and a row of at most half
    // that RS = R / 2, the first loads once the row's length is known and the score kernel has ended
    // (at one row of 8K keys the top-k's chain is most of the call)
    constexpr int RegKeys = C::idx_topk_split_min_keys, R = RegKeys / Threads, RS = R / 2;
    static_assert(RegKeys % (8 * Threads) == 0 && R <= 16, "a thread's keys: whole 16-byte loads, 64 registers");
    const int t = blockIdx.x;
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    // the row's length before the wait for the score kernel: it reads only the call's inputs, which
    // no kernel of this call writes (dsa_launch.cuh), so its two dependent loads overlap the score
    // kernel's tail rather than following it (one row of 8K: ~1 us from the wait to the keys in
    // registers, tests/bench/RESULTS.md)
    const int64_t last = row_last<C::max_positions>(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    after_prior_grid();
    uint32_t v[RS];
    load_keys<Threads, RS>(keys, n, v);
    const int rank = p.rank;
    int written;
    if constexpr (W == 1) {
        int32_t *out = p.topk + (int64_t)t * p.topk_stride;
        const auto emit = [&](int j, int64_t i) { out[j] = (int32_t)i; };
        if (K <= SelectRegsSmem::OutWords && n <= RegKeys) {
            // the register rows' positions placed in shared memory (the histograms, free by the
            // emit) with 32-bit addresses, then the row written whole, -1 padded, coalesced: the
            // emit was a quarter of the kernel's instructions, most of them forming each store's
            // 64-bit address (tests/bench/RESULTS.md)
            uint32_t *stage = &regs_smem.hist[0][0];
            const auto place = [stage](int j, int64_t i) { stage[j] = (uint32_t)i; };
            written = n <= RS * Threads ? select_topk_regs<Threads, RS>(v, K, place, regs_smem)
                                        : select_topk_loaded<Threads, R>(keys, n, K, place, regs_smem);
            for (int j = threadIdx.x; j < K; j += Threads)
                out[j] = j < written ? (int32_t)stage[j] : -1;
        } else {
            if constexpr (K <= SelectRegsSmem::OutWords) // the register rows went the way above
                written = select_topk<Threads, 1>(keys, n, K, emit, hist, scratch);
            else
                written = select_row<Threads, R>(v, keys, n, K, emit, regs_smem, hist, scratch);
            for (int j = written + threadIdx.x; j < K; j += Threads)
                out[j] = -1;
        }
    } else {
        const CandidateSink<W, K> out(p, t);
        written = select_row<Threads, R>(
            v, keys, n, K, [&](int j, int64_t i) { out.put(j, keys[i], (uint32_t)global_position<W, I>(i, rank)); },
            regs_smem, hist, scratch);
        for (int j = written + threadIdx.x; j < K; j += Threads)
            out.put(j, 0u, 0xffffffffu);
    }
    // DCP = 1 only: at DCP > 1 the discard took the kernel past 32 registers, when it had 32 (the
    // rows held in registers have since taken it to 64)
    if constexpr (W == 1) {
        if (p.discard_keys)
            discard_row<Threads>(keys, n);
    }
}

// index_topk_split's CTAs an SM, the second argument of its __launch_bounds__ (templates/index.cu.in).
// None (0) below sm_100: ptxas gives it 64 registers of its own accord, and any minimum, even 1,
// changes the machine code that was timed. On sm_100 and later, with none, ptxas aimed at 3 CTAs of
// 512 threads by itself (40 registers) and spilled 28-56 bytes (CUDA 13.0); there the bound asks for
// as many CTAs as leave a thread sm_90a's 64 registers (2 of 512 threads), and nothing spills. The
// runtime sizes the cooperative grid by the occupancy the compiled kernel has (runtime/ctx.c).
template <class C> struct TopkSplitCtasOf {
    static constexpr int fit = (64 * 1024) / (64 * C::idx_topk_split_threads);
    static constexpr int ctas = !kSm100 ? 0 : fit > 1 ? fit : 1;
};

// B.3 over several CTAs of a row (grid T x splits, launched cooperatively: the CTAs of a row meet
// at barriers): the same rows as index_topk, bit for bit (select_topk_split). The row's state
// (p.split_state) is all zero before the call and again after it.
template <class C> __device__ __forceinline__ void index_topk_split(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, I = C::interleave, K = C::idx_topk, Threads = C::idx_topk_split_threads;
    constexpr int RB = C::idx_topk_radix_bits, SplitKeys = C::idx_topk_split_keys, Cands = C::idx_topk_split_cands;
    using St = SplitState<RB, Cands, K>;
    static_assert(St::bytes(C::idx_topk_split_max) == C::idx_topk_state_bytes, "the plan's row state is the kernel's layout");
    __shared__ uint32_t hist[1 << RB], red[3 + 2 * (Threads / 32)];
    __shared__ __align__(16) uint32_t cand_s[Cands + Cands / 32]; // the row's candidates' keys, a bit each
    constexpr bool Bins = C::idx_score_bins != 0;
    const int t = blockIdx.x;
    // the score kernel's first-pass counts of the row and their mark (where the plan has it count
    // them) first: they load with the row's request, not after its length (GivenCounts)
    const GivenCounts<Threads, St> given(p.split_state + (int64_t)t * p.state_stride, Bins ? p.hist_given : 0);
    const int64_t last = row_last<C::max_positions>(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    uint32_t *state = p.split_state + (int64_t)t * p.state_stride;
    const int rank = p.rank;
    if constexpr (W == 1) {
        int32_t *out = p.topk + (int64_t)t * p.topk_stride;
        select_topk_split<Threads, RB, SplitKeys, Cands, C::idx_topk_split_max, K, Bins>(
            keys, n, p.bit_keys, p.hist_given, p.discard_keys != 0, [&](int j, int64_t i) { out[j] = (int32_t)i; }, [&](int j) { out[j] = -1; },
            state, hist, red, cand_s, Bins ? &given : nullptr);
    } else {
        // the sink formed at each store from the parameters (constant memory): its W pointers held
        // through the selection made the kernel spill under its 64 registers
        select_topk_split<Threads, RB, SplitKeys, Cands, C::idx_topk_split_max, K, Bins>(
            keys, n, p.bit_keys, p.hist_given, p.discard_keys != 0,
            [&](int j, int64_t i) {
                CandidateSink<W, K>(p, t).put(j, keys[i], (uint32_t)global_position<W, I>(i, rank));
            },
            [&](int j) { CandidateSink<W, K>(p, t).put(j, 0u, 0xffffffffu); }, state, hist, red, cand_s,
            Bins ? &given : nullptr);
    }
}

// B.4 (DCP > 1): the W lists of a row, each ascending in position with its candidates first
// (padding: key 0, position 0xffffffff), merged into one ascending list (a candidate's place: its
// index in its own list plus how many candidates of each other list have a smaller position), then
// the same selection as B.3. Every rank runs this on the same gathered lists, so every rank writes
// the same row. Where the plan gives the shared memory (C::idx_merge_smem = 12 W K bytes), the
// lists' positions are staged there and the merged list is built there too, so that the binary
// searches and the selection's passes read shared memory, not L2; otherwise both live in global
// memory (p.merged).
template <class C> __device__ __forceinline__ void index_merge(const dsa_index_topk_params &p)
{
    constexpr int W = C::dcp, K = C::idx_topk, Threads = C::idx_topk_threads;
    constexpr bool Staged = C::idx_merge_smem > 0;
    static_assert(!Staged || (C::idx_merge_smem == 12 * W * K && K % 2 == 0),
                  "the plan's merge shared memory: W x K positions, then the merged keys and positions");
    __shared__ uint32_t hist[256], scratch[3 + 2 * (C::idx_topk_threads / 32)];
    __shared__ int count[W];
    extern __shared__ __align__(16) uint32_t merge_s[]; // Staged: [W K] positions, [W K] merged keys, [W K] their positions
    const int t = blockIdx.x;
    // list(r): rank r's list of this row (computed, not an array: a dynamic index would put it in
    // local memory)
    const auto list = [&](int r) { return p.cand_in + ((int64_t)r * p.num_tokens + t) * K * 2; };
    uint32_t *const pos_s = merge_s, *const mkey_s = merge_s + W * K, *const mpos_s = merge_s + 2 * W * K;
    if constexpr (Staged) {
        // two (key, position) pairs a 16-byte load (K is a multiple of 4, the spec's rule: every list
        // is 16-byte aligned)
        for (int e = threadIdx.x; e < W * K / 2; e += Threads) {
            const int r = e / (K / 2), i = e % (K / 2);
            const uint4 v = *reinterpret_cast<const uint4 *>(list(r) + 4 * i);
            *reinterpret_cast<uint2 *>(pos_s + r * K + 2 * i) = make_uint2(v.y, v.w);
        }
        __syncthreads();
    }
    const auto pos_of = [&](int r, int i) -> uint32_t { return Staged ? pos_s[r * K + i] : list(r)[2 * i + 1]; };
    if (threadIdx.x < W) { // candidates first, then padding (position 0xffffffff): count them
        const int r = threadIdx.x;
        int lo = 0, hi = K;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (pos_of(r, mid) != 0xffffffffu)
                lo = mid + 1;
            else
                hi = mid;
        }
        count[r] = lo;
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
        const uint32_t key = list(r)[2 * i], pos = pos_of(r, i);
        int at = i;
#pragma unroll
        for (int o = 0; o < W; o++) {
            if (o == r)
                continue;
            int lo = 0, hi = count[o]; // candidates of list o with a smaller position
            while (lo < hi) {
                const int mid = (lo + hi) / 2;
                if (pos_of(o, mid) < pos)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            at += lo;
        }
        if constexpr (Staged) {
            mkey_s[at] = key;
            mpos_s[at] = pos;
        } else {
            merged[2 * at] = key;
            merged[2 * at + 1] = pos;
        }
    }
    __syncthreads();
    int32_t *out = p.topk + (int64_t)t * p.topk_stride;
    int written;
    if constexpr (Staged)
        written = select_topk<Threads, 1>(mkey_s, total, K, [&](int j, int64_t i) { out[j] = (int32_t)mpos_s[i]; },
                                          hist, scratch);
    else
        written = select_topk<Threads, 2>(merged, total, K,
                                          [&](int j, int64_t i) { out[j] = (int32_t)merged[2 * i + 1]; }, hist,
                                          scratch);
    for (int j = written + threadIdx.x; j < K; j += Threads)
        out[j] = -1;
}

} // namespace dsa
