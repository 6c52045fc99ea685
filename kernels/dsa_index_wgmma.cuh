// Stage B.2 on warpgroup MMA (sm_90a): a row's keys scored 64 at a time by one warpgroup, the key
// pages streamed into a ring of shared-memory slots by the copy engine. dsa_index.cuh picks this or
// the mma.sync kernel at compile time; both compute the same formula (index_score there).
#pragma once
#include "dsa_async.cuh"
#include "dsa_index_select.cuh"
#include "dsa_launch.cuh"

namespace dsa {

// ReLU that keeps a NaN a NaN (relu_nan in one instruction: max.NaN returns the NaN)
__device__ __forceinline__ float relu_keep_nan(float x)
{
    float r;
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(r) : "f"(x));
    return r;
}

// The inline asm of the score wgmmas (A: 4 registers, B: a descriptor, D: n fp32 accumulators,
// dsa_async.cuh): OPS_n, the operand list after D; PRED_n, the operand that says whether D
// accumulates. One statement per shape and type below.
#define DSA_SCORE_OPS4 DSA_WG_REGS4 ", {%4,%5,%6,%7}, %8"
#define DSA_SCORE_PRED4 "%9"
#define DSA_SCORE_OPS8 DSA_WG_REGS8 ", {%8,%9,%10,%11}, %12"
#define DSA_SCORE_PRED8 "%13"
#define DSA_SCORE_OPS16 DSA_WG_REGS16 ", {%16,%17,%18,%19}, %20"
#define DSA_SCORE_PRED16 "%21"
#define DSA_SCORE_OPS32 DSA_WG_REGS32 ", {%32,%33,%34,%35}, %36"
#define DSA_SCORE_PRED32 "%37"
#define DSA_SCORE_OPS64 DSA_WG_REGS64 ", {%64,%65,%66,%67}, %68"
#define DSA_SCORE_PRED64 "%69"
#define DSA_SCORE_OPS128 DSA_WG_REGS128 ", {%128,%129,%130,%131}, %132"
#define DSA_SCORE_PRED128 "%133"
#define DSA_SCORE_WGMMA(SHAPE, TYPES, TAIL, NACC)                                                          \
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " DSA_SCORE_PRED##NACC ", 0;\n\t"                       \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPES " " DSA_SCORE_OPS##NACC ", p, 1, 1" TAIL ";\n\t}" \
                 : DSA_WG_D##NACC(0)                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))

// D (+)= A B, m64 x N x K -> fp32: A (64 keys x K dims) in registers (the m16n8kK A fragment per
// warp), B (K dims x N columns: heads, K-major) by descriptor. Accumulate 0: D = A B. wgmma_e4m3:
// K = 32, e4m3 inputs; wgmma_f16: K = 16, f16 (its trailing 0: B not transposed).
#define DSA_SCORE_WGMMA_N(NAME, K, TYPES, TAIL)                                                           \
    template <int N> __device__ __forceinline__ void NAME(float(&d)[N / 2], const uint32_t(&a)[4], uint64_t b, \
                                                          int accumulate)                                  \
    {                                                                                                      \
        static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 256,                     \
                      "columns per wgmma: 8, 16, 32, 64, 128 or 256");                                     \
        if constexpr (N == 8)                                                                              \
            DSA_SCORE_WGMMA("m64n8k" #K, TYPES, TAIL, 4);                                                  \
        else if constexpr (N == 16)                                                                        \
            DSA_SCORE_WGMMA("m64n16k" #K, TYPES, TAIL, 8);                                                 \
        else if constexpr (N == 32)                                                                        \
            DSA_SCORE_WGMMA("m64n32k" #K, TYPES, TAIL, 16);                                                \
        else if constexpr (N == 64)                                                                        \
            DSA_SCORE_WGMMA("m64n64k" #K, TYPES, TAIL, 32);                                                \
        else if constexpr (N == 128)                                                                       \
            DSA_SCORE_WGMMA("m64n128k" #K, TYPES, TAIL, 64);                                               \
        else                                                                                               \
            DSA_SCORE_WGMMA("m64n256k" #K, TYPES, TAIL, 128);                                              \
    }
DSA_SCORE_WGMMA_N(wgmma_e4m3, 32, "e4m3.e4m3", "")
DSA_SCORE_WGMMA_N(wgmma_f16, 16, "f16.f16", ", 0")

// Four e4m3 bytes to two f16x2, exactly: bytes 0, 1 (bits 0-7: the first) into lo, bytes 2, 3 into
// hi (the halves of the word go to the conversions as they are, with no masking or shifting first)
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t word, uint32_t &lo, uint32_t &hi)
{
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(word));
}

// The tensor cores' input type for the scores. e4m3 (QGMMA, twice f16's rate) keeps only about
// 14 bits of each sum of 32 products and of the running sum (the DeepSeek-V3 report, 3.5.2; seen
// by others as an FP22 accumulator), far coarser than the reference's fp32 sums that test_index
// allows 2^-16 of; the mma.sync kernel on sm_90 runs as HMMA on f16 (SASS: F2FP unpack, then
// HMMA.16816.F32) and meets it. So the keys and query go to the tensor cores as f16, exactly
// (every e4m3 value is an f16), on HGMMA: 1 MFLOP per tile of 64 keys at 64 heads, about half of
// the f16 rate at the memory floor. false: e4m3, for measuring.
constexpr bool kScoreF16 = true;

// The score CTA's shape: one warpgroup; tiles of 64 keys (the wgmma M), each a ring slot of the
// keys' D bytes then their 64 fp32 scales (the page's layout, so a page's part lands with two bulk
// copies, a whole page of 64 keys with one); `stages` slots, so that as many tiles (25 or 34 KiB)
// per CTA are in flight. The query in the MMA's type (f16: 16 KiB at 64 heads). index_score holds
// them in static shared memory, of which no launch gets more than 48 KiB, with the first pass's
// counts beside it (4 KiB): the plan's idx_score_stages slots, as many as fit (3; 2 at 16 heads of
// 256 dims), which the generator derives and index_score_wgmma checks.
template <int H, int D, bool F16> struct ScoreWgmmaShape {
    enum : int {
        keys = 64,                                          // per tile
        heads = H <= 8 ? 8 : H <= 16 ? 16 : H <= 32 ? 32 : 64, // the wgmma N: heads past H are zero, weight 0
        elem = F16 ? 2 : 1,                                 // bytes per query or key value at the MMA
        kdims = F16 ? 16 : 32,                              // dims per wgmma (its K)
        slot_bytes = keys * (D + 4),
        q_bytes = heads * D * elem,
        // the head weights in shared memory: a quad lane's heads / 4 of a row, then the next
        // lane's wq_pitch floats on; 4 more where heads / 4 is a multiple of 16 (64 heads), so that
        // the 4 lanes' 16-byte loads fall in distinct banks (at 16 floats, lanes 0 and 2 collided:
        // 23% of the prefill score kernel's shared wavefronts, tests/bench/RESULTS.md)
        wq_pitch = heads / 4 % 16 == 0 ? heads / 4 + 4 : heads / 4,
        wq_row = 4 * wq_pitch, // floats a row
    };
};

// The CTA's shared memory: the row's query (B: core matrices of 8 heads x 16 bytes, 128 bytes each;
// a group of 8 heads takes 8 D elem bytes, its 16-byte chunks 128 bytes apart), the ring, its barriers
// (full: the slot's copies landed; empty: the warpgroup has read the slot).
template <int H, int D, bool F16, int Stages> struct ScoreWgmmaSmem {
    using S = ScoreWgmmaShape<H, D, F16>;
    enum : int { stages = Stages };
    static_assert(Stages >= 2, "a ring of two key slots at least (the generator refuses fewer)");
    alignas(128) uint8_t q[S::q_bytes];
    alignas(128) uint8_t ring[Stages][S::slot_bytes];
    uint64_t full[Stages], empty[Stages];
    uint32_t present[Stages]; // bit c: part c of the slot's tile has a page (its keys landed)
    alignas(16) float wq[S::wq_row]; // the row's head weights, as ScoreGroupSmem's
};

// The grouped score CTA's shared memory (index_score_group, dynamic): the R rows' queries side by
// side (row j's from byte j q_bytes, so its 8-head groups continue row j - 1's at the same SBO: B of
// R x the padded heads columns), 4 ring slots (a tile keeps the tensor cores R times as long as one
// row's, so 4 slots hold more time in flight than the one-row CTA's 3), the barriers, and the R rows'
// head weights, row j's padded heads at [j][tig][wq_pitch] in the order a thread of the quad's
// lane tig sums them (its heads 8 c + 2 tig + {0, 1} at 2 c + {0, 1}), read per tile: in registers
// they would take heads / 4 a thread for the whole loop (64 beside the 128 accumulators at N = 256;
// at one row of 64 heads 16, which the next tile's key pieces take instead: ScoreCtasOf).
// 98 KiB at 64 heads x 4 rows and at 32 x 8 (D 128, block 64): two CTAs an SM.
template <int H, int D, int R, bool F16> struct ScoreGroupSmem {
    using S = ScoreWgmmaShape<H, D, F16>;
    enum : int { stages = 4 };
    alignas(128) uint8_t q[R * S::q_bytes];
    alignas(128) uint8_t ring[stages][S::slot_bytes];
    uint64_t full[stages], empty[stages];
    uint32_t present[stages]; // as ScoreWgmmaSmem's
    alignas(16) float wq[R * S::wq_row];
};

// The sums score_sum_rows gives a lane for RB rows: a row alone's, or one of each pair.
__host__ __device__ constexpr int score_sums_of(int rows) { return rows == 1 ? 1 : rows / 2; }

// The scores of one key of a tile for RB queries (rows j0 .. j0 + RB - 1 of the group), the key of
// this lane: tig 0 and 2 take the tile's key r0, 1 and 3 its key r0 + 8. Row j's heads'
// accumulators are acc[o .. o + N1 / 2), o = j N1 / 2 (this thread's heads 8 h + 2 tig + {0, 1}:
// acc[o + 4 h + {0, 1}] for key r0, acc[o + 4 h + {2, 3}] for r0 + 8), its weights at wq + j wq_row
// + tig wq_pitch (head 8 h + 2 tig + b's at 2 h + b, ScoreGroupSmem). ReLU, the weight and the sum
// over the thread's heads in head order for both keys, then over the quad's heads: each lane gives
// its partner (tig ^ 1) the key the partner keeps, so that one exchange sums the pair for both keys
// and a second the two pairs, ((s_0 + s_1) + (s_2 + s_3)) for either key (fp32 addition commutes
// bit for bit). One row (RB = 1): sc[0], its sum in every lane; a pair of rows (RB even): sc[i] =
// row j0 + 2 i + tig / 2's, so that each lane forms and stores the key of one row of a pair. The RB
// rows' chains advance together, head by head, so that 2 RB independent sums are in flight rather
// than two (each row's sum is the same bits as alone). The key's scale comes after. Every
// warpgroup-MMA score, of one row or of a group, is reduced by this code.
template <class Shape, int RB, int NA>
__device__ __forceinline__ void score_sum_rows(const float (&acc)[NA], int j0, const float *wq, int tig,
                                               float (&sc)[score_sums_of(RB)])
{
    static_assert(RB == 1 || RB % 2 == 0, "one row, or whole pairs of rows");
    constexpr int N1 = Shape::heads, WN = N1 / 4, WL = WN % 4 == 0 ? 4 : 2; // a lane's weights of a row; per load
    static_assert(WN % WL == 0 && WL % 2 == 0, "whole float2 / float4 loads of the weights");
    float lo[RB], hi[RB];
#pragma unroll
    for (int r = 0; r < RB; r++)
        lo[r] = 0.0f, hi[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < WN; c += WL) {
        float w[RB][WL];
#pragma unroll
        for (int r = 0; r < RB; r++) {
            const float *at = wq + (j0 + r) * Shape::wq_row + tig * Shape::wq_pitch + c;
            if constexpr (WL == 4) {
                const float4 v = *reinterpret_cast<const float4 *>(at);
                w[r][0] = v.x, w[r][1] = v.y, w[r][2] = v.z, w[r][3] = v.w;
            } else {
                const float2 v = *reinterpret_cast<const float2 *>(at);
                w[r][0] = v.x, w[r][1] = v.y;
            }
        }
#pragma unroll
        for (int b = 0; b < WL; b += 2)
#pragma unroll
            for (int r = 0; r < RB; r++) {
                const int o = (j0 + r) * (N1 / 2) + 2 * (c + b); // head group h = (c + b) / 2: acc[o + 4 h]
                lo[r] = __fmaf_rn(w[r][b], relu_keep_nan(acc[o]), lo[r]);
                lo[r] = __fmaf_rn(w[r][b + 1], relu_keep_nan(acc[o + 1]), lo[r]);
                hi[r] = __fmaf_rn(w[r][b], relu_keep_nan(acc[o + 2]), hi[r]);
                hi[r] = __fmaf_rn(w[r][b + 1], relu_keep_nan(acc[o + 3]), hi[r]);
            }
    }
    const bool odd = tig & 1, upper = tig & 2;
    float pair[RB];
#pragma unroll
    for (int r = 0; r < RB; r++)
        pair[r] = __fadd_rn(odd ? hi[r] : lo[r], __shfl_xor_sync(0xffffffffu, odd ? lo[r] : hi[r], 1));
    if constexpr (RB == 1) {
        sc[0] = __fadd_rn(pair[0], __shfl_xor_sync(0xffffffffu, pair[0], 2));
    } else {
        // rows 2 i and 2 i + 1: lanes 0, 1 keep the first, 2, 3 the second, each giving its partner
        // (tig ^ 2) the row the partner keeps: one exchange a pair of rows
#pragma unroll
        for (int i = 0; i < RB / 2; i++) {
            const float keep = upper ? pair[2 * i + 1] : pair[2 * i], give = upper ? pair[2 * i] : pair[2 * i + 1];
            sc[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, give, 2));
        }
    }
}

// The split top-k's first radix pass as index_score counts it (score_rows_wgmma), where the plan
// says so (on; elsewhere the kernels are compiled without it): the row state's layout (St), the bin
// of a key (key >> shift) and the shared words of the CTA's counts, two bins a word (none when off).
template <class C> struct ScoreBinsOf {
    using St = SplitState<C::idx_topk_radix_bits, C::idx_topk_split_cands, C::idx_topk>;
    static constexpr bool on = C::idx_score_bins != 0;
    static constexpr int shift = 32 - C::idx_topk_radix_bits, words = on ? St::BINS / 2 : 0;
};

// The block-table entries of the first S + 1 tiles of a one-row score CTA (index_score), which its
// thread 0 looks up before the first copies (score_rows_wgmma's fill cursor: which tiles a CTA takes
// follows from the grid alone), loaded as soon as the row's request is known, beside its length
// (row_last): their addresses depend on the request, not on the row's key count, so they go out in
// the length's round trip instead of one after it (what a score CTA waits for before its first
// copies, at one row the path to its first tile). entry[s][c]: part c of the s-th tile's, or -1 where
// the request is out of range or the part's block past the table's row; -1 in every thread but 0.
// score_rows_wgmma drops the tiles at or past the row's keys (block_of's other test), so that each
// tile it copies has the page it would have looked up itself.
template <class C, int S> struct ScoreFirstBlocks {
    static constexpr int TK = 64, BS = C::block_size, CK = BS < TK ? BS : TK, PARTS = TK / CK;
    static constexpr int RUN = C::idx_score_keys_per_cta / TK;
    int32_t entry[S + 1][PARTS];
    __device__ __forceinline__ ScoreFirstBlocks(const dsa_index_score_params &p, int t)
    {
        const int32_t req = p.req_of_token[t];
        const bool ok = threadIdx.x == 0 && req >= 0 && req < p.num_requests;
        const int32_t *blocks = p.block_table + (int64_t)req * p.max_blocks;
        int64_t tile = (int64_t)blockIdx.y * RUN; // the cursor's steps (score_rows_wgmma's advance)
        int k = 0;
#pragma unroll
        for (int s = 0; s <= S; s++) {
#pragma unroll
            for (int c = 0; c < PARTS; c++) {
                const int64_t b = (tile * TK + c * CK) / BS;
                entry[s][c] = ok && b < p.max_blocks ? blocks[b] : -1;
            }
            if (++k == RUN) {
                k = 0;
                tile += ((int64_t)gridDim.y - 1) * RUN + 1;
            } else {
                tile++;
            }
        }
    }
};

// B.2 on wgmma, the same scores as the mma.sync kernel up to the order of the fp32 sums, for R rows
// t0 .. t0 + R - 1 of one request at once (R = 1: row t0 alone, index_score; R > 1: a group,
// index_score_group), in sm (ScoreWgmmaSmem or ScoreGroupSmem). n[j]: row t0 + j's keys on this
// rank (0 past the group's `rows`). A CTA takes the tiles of 64 keys below the largest n[j] in runs
// of keys_per_cta / 64 consecutive tiles, every gridDim.y-th run (the tiles a one-row CTA of the
// longest row takes); thread 0 keeps the ring full with bulk copies of the tiles' pages (a tile's
// keys in one page when block_size >= 64, else in 64 / block_size pages). The keys are A, read from
// the slot into registers (f16 after an exact conversion; kScoreF16): a thread loads 16-byte pieces
// of its rows, which fixes a permutation of the D dims (thread tig of a quad takes dims
// [tig D/4, (tig + 1) D/4), one 4-byte word per k-step of 16 dims, two per k-step of 32); the
// queries, B (R x the padded heads columns), are stored with the same permutation, so each q . k is
// unchanged. The accumulators hold (key, row, head): the rows' slices go through score_sum_rows,
// then the key's scale, and each row's keys below n[j] are written. A score is one
// wgmma column's k-steps in the same order whatever N, so every key of every tile, CTA, group and
// DCP rank takes the same steps: grouped or alone, a row's scores are the same bits.
// bins (R = 1, or null): ScoreBinsOf<C>::words of shared memory where the CTA counts the split top-k's
// first radix pass over the keys it writes (count_bins below). first (R = 1, or null): thread 0's
// first entries, looked up already (ScoreFirstBlocks).
template <class C, int R, class Smem>
__device__ __forceinline__ void score_rows_wgmma(const dsa_index_score_params &p, Smem &sm, int t0, int rows,
                                                 const int64_t (&n)[R], uint32_t *bins = nullptr,
                                                 const ScoreFirstBlocks<C, Smem::stages> *first_blocks = nullptr)
{
    constexpr int H = C::idx_heads, D = C::idx_head_dim, BS = C::block_size, Threads = C::idx_score_threads;
    constexpr bool F16 = kScoreF16;
    using Shape = ScoreWgmmaShape<H, D, F16>;
    constexpr int TK = Shape::keys, N1 = Shape::heads, N = R * N1, S = Smem::stages, E = Shape::elem;
    constexpr int KS = D / Shape::kdims, LOADS = D / 64, WORDS = D / 16; // k-steps; 16-byte loads, words per thread and row
    constexpr uint32_t SBO = D * E / 16 * 128;                      // between 8-head groups of B
    constexpr int CK = BS < TK ? BS : TK, PARTS = TK / CK;          // keys per page part, parts per tile
    constexpr int64_t PAGE = (int64_t)BS * (D + 4);
    constexpr int RUN = C::idx_score_keys_per_cta / TK;             // consecutive tiles per CTA step
    static_assert(Threads == 128, "one warpgroup per CTA");
    static_assert(H <= 64, "up to 64 heads (one wgmma N)");
    static_assert(R >= 1 && N <= 256, "a wgmma's N: at most 256 columns of rows x heads");
    static_assert(D == 64 || D == 128 || D == 256, "each thread takes D / 4 bytes of a row in 16-byte loads");
    static_assert(RUN * TK == C::idx_score_keys_per_cta, "the plan's CTA step is whole tiles");
    static_assert(TK % CK == 0 && BS % CK == 0 && (4 * CK) % 16 == 0, "a tile is whole page parts of 16-byte copies");
    static_assert(BS != TK || PAGE == Shape::slot_bytes, "a page of a tile's keys is laid out as a slot");
    using First = ScoreFirstBlocks<C, S>;
    static_assert(First::TK == TK && First::CK == CK && First::PARTS == PARTS && First::RUN == RUN,
                  "ScoreFirstBlocks walks the tiles and parts this kernel does");

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, tig = lane % 4;
    int64_t most = 0; // the keys of the group's longest row
#pragma unroll
    for (int j = 0; j < R; j++)
        most = n[j] > most ? n[j] : most;
    const int64_t tiles = (most + TK - 1) / TK, step = (int64_t)gridDim.y;
    // this CTA's tiles in increasing order, RUN consecutive ones every gridDim.y-th run: a cursor
    // (the tile, its place in its run) steps through them without a division (the CTA's tiles are
    // those below `tiles`)
    struct Cursor {
        int64_t tile;
        int k;
    };
    auto advance = [&](Cursor &c) {
        if (++c.k == RUN) {
            c.k = 0;
            c.tile += (step - 1) * RUN + 1;
        } else {
            c.tile++;
        }
    };
    if ((int64_t)blockIdx.y * RUN >= tiles) {
        // no tile: the CTA still waits, so that the grid never ends before the query kernel ahead
        // of it (the kernels after this one wait for this grid alone)
        after_prior_grid();
        return;
    }
    // The split top-k's first radix pass over a row it takes (p.topk_hist: the runtime gives its
    // row states where that kernel follows; a row of more than idx_topk_split_keys keys, as it
    // tests): each written key > 0 counted by its top RB bits, two 16-bit counts a shared word, and
    // the CTA's counts added to the row's histogram at the end, so that the top-k starts from the
    // row-wide counts rather than reading the row once more and meeting at a barrier for them. Where
    // the CTA with the most tiles (blockIdx.y = 0) could count 65,536 keys in one bin, no CTA of the
    // row counts (the same test in each), and the top-k, finding no count, counts itself.
    using Bins = ScoreBinsOf<C>;
    const bool count_bins = Bins::on && R == 1 && bins != nullptr && p.topk_hist != nullptr &&
                            n[0] > C::idx_topk_split_keys && ((tiles + RUN - 1) / RUN + step - 1) / step * RUN * TK < 65536;
    const uint32_t bins_s = smem_addr(bins);
    if (count_bins)
        for (int w = threadIdx.x; w < Bins::words; w += Threads)
            bins[w] = 0u;
    const int32_t req = p.req_of_token[t0];
    const int32_t *blocks = p.block_table + (int64_t)req * p.max_blocks;
    // the page holding local key l, or null: past the longest row, no block, or a block beyond the
    // cache (the mma.sync kernel's test, key by key; a page part is copied when its first key has a
    // page, so every key that has one lies in a copied part). Below row j's n[j] it is what row j
    // alone would find.
    // (in two steps: the block-table entry, -1 where there is none; then the page it names, so that
    // a look-up made ahead is not waited for until its page is wanted)
    auto block_of = [&](int64_t l) -> int32_t {
        return l >= most || l / BS >= p.max_blocks ? -1 : blocks[l / BS];
    };
    auto page_at = [&](int32_t blk, int64_t l) -> const uint8_t * {
        return blk >= 0 && (int64_t)blk * BS + l % BS < p.num_slots ? p.idx_cache + blk * PAGE : nullptr;
    };

    const uint32_t q_s = smem_addr(sm.q), ring_s = smem_addr(sm.ring[0]);
    const uint32_t full_s = smem_addr(&sm.full[0]), empty_s = smem_addr(&sm.empty[0]);
    // the block-table entries of a tile's parts
    auto blocks_of = [&](int64_t tile, int32_t(&blk)[PARTS]) {
#pragma unroll
        for (int c = 0; c < PARTS; c++)
            blk[c] = block_of(tile * TK + c * CK);
    };
    // a tile's page parts into slot s, completing on its full barrier, and which parts have a page
    // (thread 0 only; the barrier's arrival publishes the mask with the slot)
    auto issue = [&](int s, int64_t tile, const int32_t (&blk)[PARTS]) {
        const int64_t l0 = tile * TK;
        const uint8_t *src[PARTS];
        uint32_t bytes = 0, mask = 0;
#pragma unroll
        for (int c = 0; c < PARTS; c++) {
            src[c] = page_at(blk[c], l0 + c * CK);
            bytes += src[c] ? CK * (D + 4) : 0;
            mask |= src[c] ? 1u << c : 0u;
        }
        sm.present[s] = mask;
        mbar_arrive_expect(full_s + 8 * s, bytes);
        const uint32_t slot = ring_s + s * Shape::slot_bytes;
        // a row scored alone (R = 1: every decode row, and the prefill rows that do not group) reads
        // its keys once: first out of L2, so that its scores, which the top-k reads next, stay (a
        // group's key pages are read again by the request's next rows)
        const uint64_t pol = R == 1 ? l2_evict_first() : 0;
        const auto copy = [&](uint32_t dst, const void *from, uint32_t n) {
            if constexpr (R == 1)
                bulk_copy_hint(dst, from, n, full_s + 8 * s, pol);
            else
                bulk_copy(dst, from, n, full_s + 8 * s);
        };
        if constexpr (BS == TK) {
            // a tile is one whole page, laid out as the slot is (its keys, then their scales): one copy
            if (src[0])
                copy(slot, src[0], Shape::slot_bytes);
        } else {
#pragma unroll
            for (int c = 0; c < PARTS; c++)
                if (src[c]) {
                    const int off = (int)((l0 + c * CK) % BS);
                    copy(slot + c * CK * D, src[c] + off * D, CK * D);
                    copy(slot + TK * D + 4 * c * CK, src[c] + BS * D + 4 * off, 4 * CK);
                }
        }
    };
    // thread 0's next tile to load (S ahead of the one being scored) and its pages, looked up a
    // step before they are needed so that the block table's latency is off the tiles' path
    Cursor fill = {(int64_t)blockIdx.y * RUN, 0};
    int32_t next[PARTS];
#pragma unroll
    for (int c = 0; c < PARTS; c++)
        next[c] = -1;
    if (tid == 0) {
        // the block-table entries of the first S + 1 tiles, all loads issued before any is used
        // (the barriers' operations are ordered with every memory access, so a look-up between two
        // copies would wait for the copies before it); -1 past the CTA's tiles
        // (the cursor walks them once: their tiles are kept for the copies, and fill ends S ahead)
        int32_t first[S + 1][PARTS];
        int64_t at[S];
#pragma unroll
        for (int s = 0; s <= S; s++) {
#pragma unroll
            for (int k = 0; k < PARTS; k++)
                first[s][k] = -1;
            if (fill.tile < tiles) {
                if (first_blocks) {
                    // looked up already; a part at or past the row's keys has none (block_of)
#pragma unroll
                    for (int k = 0; k < PARTS; k++)
                        first[s][k] = fill.tile * TK + k * CK >= most ? -1 : first_blocks->entry[s][k];
                } else {
                    blocks_of(fill.tile, first[s]);
                }
            }
            if (s < S) {
                at[s] = fill.tile;
                advance(fill);
            }
        }
#pragma unroll
        for (int s = 0; s < S; s++) {
            mbar_init(full_s + 8 * s, 1);
            mbar_init(empty_s + 8 * s, Threads);
        }
        mbar_init_fence();
#pragma unroll
        for (int s = 0; s < S; s++)
            if (at[s] < tiles)
                issue(s, at[s], first[s]);
#pragma unroll
        for (int k = 0; k < PARTS; k++)
            next[k] = first[S][k];
    }
    // Everything above read only the call's inputs and the cache, never what the query kernel ahead
    // of this one writes; that kernel lets this one launch only after its own wait for the kernels
    // ahead of it (the prologue, which writes the cache), so the first tiles' copies ran under it.
    // The queries and weights below are its output.
    after_prior_grid();
    // B: head h of row j's query, its dims in the keys' permutation, at row j's columns. Byte b of a
    // query row is byte b % 4 of word r / 4 (r = b % (D/4)) of thread tq = b / (D/4)'s piece; the A
    // fragment puts that word at logical dims k (of the k-step) 4 tq + 16 ((r/4) % 2) + {0..3} of
    // k-step r / 8 (e4m3), or bytes {0, 1} at 2 tq + {0, 1} and {2, 3} at 8 + 2 tq + {0, 1} of k-step
    // r / 4 (f16: 16 bytes of the row a load, each word two f16 pairs; their dims k0, k0 + 1 and
    // k0 + 8, k0 + 9 lie in core matrices 128 bytes apart)
    uint8_t *const qb = sm.q;
    // the head weights, in shared memory in each quad lane's order (ScoreGroupSmem); loaded first,
    // with the queries' pieces below, so that the CTA waits for one round of loads, not one per piece
    constexpr int WPER = (R * N1 + Threads - 1) / Threads;
    // this thread's u-th weight: column i of the group's R x N1, row j's padded head h
    struct Weight {
        int i, j, h;
    };
    auto weight_of = [&](int u) -> Weight {
        const int i = u * Threads + tid;
        return {i, i / N1, i % N1};
    };
    float wv[WPER];
#pragma unroll
    for (int u = 0; u < WPER; u++) {
        const Weight q = weight_of(u);
        wv[u] = q.i < R * N1 && q.j < rows && q.h < H ? p.wq[(int64_t)(t0 + q.j) * H + q.h] : 0.0f;
    }
    if constexpr (F16) {
        // a query piece i (16 bytes of head h of row j from byte b), or zeros for a padded head
        constexpr int ITEMS = R * N1 * (D / 16), BATCH = 4;
        struct Piece {
            int j, h, b; // row j of the group, head h, byte b of the head's query
        };
        auto place = [&](int i) -> Piece { return {i / (N1 * (D / 16)), (i / (D / 16)) % N1, 16 * (i % (D / 16))}; };
        auto piece = [&](int i) -> uint4 {
            const Piece q = place(i);
            return i < ITEMS && q.j < rows && q.h < H ? load16(p.q8 + ((int64_t)(t0 + q.j) * H + q.h) * D + q.b)
                                                      : make_uint4(0u, 0u, 0u, 0u);
        };
        for (int i0 = 0; i0 < ITEMS; i0 += BATCH * Threads) {
            uint4 v[BATCH];
#pragma unroll
            for (int u = 0; u < BATCH; u++)
                v[u] = piece(i0 + u * Threads + tid);
#pragma unroll
            for (int u = 0; u < BATCH; u++) {
                const int i = i0 + u * Threads + tid;
                if (i >= ITEMS)
                    break;
                const Piece q = place(i);
                const int j = q.j, h = q.h, b = q.b;
                const uint32_t word[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int tq = (b + 4 * c) / (D / 4), r = (b + 4 * c) % (D / 4), k0 = 16 * (r / 4) + 2 * tq;
                    uint8_t *at = qb + j * Shape::q_bytes + (h / 8) * SBO + (k0 / 8) * 128 + (h % 8) * 16 + (k0 % 8) * 2;
                    e4m3x4_to_f16x2x2(word[c], *reinterpret_cast<uint32_t *>(at), *reinterpret_cast<uint32_t *>(at + 128));
                }
            }
        }
    } else {
        for (int i = tid; i < R * N1 * D; i += Threads) {
            const int j = i / (N1 * D), h = (i / D) % N1, b = i % D, tq = b / (D / 4), r = b % (D / 4);
            const uint8_t v = j < rows && h < H ? p.q8[((int64_t)(t0 + j) * H + h) * D + b] : (uint8_t)0;
            const int k = 32 * (r / 8) + 16 * ((r / 4) % 2) + 4 * tq + r % 4;
            qb[j * Shape::q_bytes + (h / 8) * SBO + (k / 16) * 128 + (h % 8) * 16 + k % 16] = v;
        }
    }
    fence_proxy_async(); // the queries are read by the tensor cores
#pragma unroll
    for (int u = 0; u < WPER; u++) {
        const Weight q = weight_of(u);
        if (q.i < R * N1)
            sm.wq[q.j * Shape::wq_row + (q.h % 8 / 2) * Shape::wq_pitch + 2 * (q.h / 8) + q.h % 2] = wv[u];
    }
    __syncthreads(); // the barriers' initialization, the queries and weights

    const int r0 = 16 * warp + g; // this thread's rows (keys of the tile): r0 and r0 + 8
    // 16-byte loads of a row at 128-byte pitch: odd rows take their pieces in the other order, so
    // that a quarter warp's 8 loads hit all 32 banks
    const int swap = LOADS > 1 ? (g & 1) : 0;
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++)
        acc[i] = 0.0f;
    // a tile's part for this thread, read from its slot once the copies landed: rows r0, r0 + 8's
    // pieces, key l's scale and whether it has a page; then the slot is released to the refill
    auto fetch = [&](int s, uint32_t parity, uint32_t (&u)[2][WORDS], float &ksc, bool &have) {
        mbar_wait(full_s + 8 * s, parity);
        // the key has a page where its part does (a page's keys all lie in the cache or none do)
        have = (sm.present[s] >> ((r0 + 8 * (tig & 1)) / CK) & 1u) != 0;
        const uint8_t *slot = sm.ring[s];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const uint8_t *row = slot + (r0 + 8 * half) * D + tig * (D / 4);
            uint4 v[LOADS];
#pragma unroll
            for (int c = 0; c < LOADS; c++)
                v[c] = *reinterpret_cast<const uint4 *>(row + 16 * (c ^ swap));
#pragma unroll
            for (int c = 0; c < LOADS; c++) {
                const uint4 x = swap ? v[(c ^ 1) % LOADS] : v[c]; // piece c
                u[half][4 * c] = x.x, u[half][4 * c + 1] = x.y, u[half][4 * c + 2] = x.z, u[half][4 * c + 3] = x.w;
            }
        }
        ksc = reinterpret_cast<const float *>(slot + TK * D)[r0 + 8 * (tig & 1)]; // key l's
        mbar_arrive(empty_s + 8 * s); // this thread is done with the slot
    };
    Cursor cur = {(int64_t)blockIdx.y * RUN, 0};
    int s = 0;
    uint32_t parity = 0;
    // the current tile's part (the first one's here; each next one's fetched while the tensor cores
    // work on the current one, so that its shared loads wait under the MMA instead of before it)
    uint32_t u[2][WORDS];
    float ksc;
    bool have;
    fetch(0, 0u, u, ksc, have); // the CTA has a tile (it returned above otherwise)
    const uint64_t keep = R == 1 ? l2_evict_last() : 0; // a row scored alone: the top-k reads its scores next
    while (cur.tile < tiles) { // cur, s and parity move to the next tile at its prefetch below
        const int64_t l = cur.tile * TK + r0 + 8 * (tig & 1); // the key this lane writes (tig 0: row r0, 1: r0 + 8)
        const bool refill = tid == 0 && fill.tile < tiles;
        // the A fragments (rows r0 / r0 + 8 at registers 0, 2 / 1, 3): e4m3, k-step ks takes words
        // 2 ks, 2 ks + 1; f16, word ks's two byte pairs
        uint32_t a[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                if constexpr (F16) {
                    e4m3x4_to_f16x2x2(u[half][ks], a[ks][half], a[ks][2 + half]);
                } else {
                    a[ks][half] = u[half][2 * ks];
                    a[ks][2 + half] = u[half][2 * ks + 1];
                }
            }
        __syncwarp(); // the wgmma instructions are warp-aligned
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            if constexpr (F16)
                wgmma_f16<N>(acc, a[ks], wg_desc(q_s + 256u * ks, 128u, SBO), ks > 0);
            else
                wgmma_e4m3<N>(acc, a[ks], wg_desc(q_s + 256u * ks, 128u, SBO), ks > 0);
        wgmma_commit();
        // refill the slot with the tile S ahead once the whole warpgroup has read it, while the
        // tensor cores work; then look up the pages of the one after it
        if (refill) {
            mbar_wait(empty_s + 8 * s, parity);
            issue(s, fill.tile, next);
            advance(fill);
            if (fill.tile < tiles)
                blocks_of(fill.tile, next);
        }
        // the next tile's part, while the MMAs run (u is free: the fragments hold the current one)
        const float ksc_cur = ksc;
        const bool have_cur = have;
        advance(cur);
        s = s + 1 == S ? 0 : s + 1;
        parity ^= s == 0 ? 1u : 0u;
        if (cur.tile < tiles)
            fetch(s, parity, u, ksc, have);
        __syncwarp();
        wgmma_wait();
        wg_pin(acc);
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            wg_pin(a[ks]);
        // each row of the group: its weights, its slice of the accumulators, SUM rows' sums at a time;
        // every row's sum before the stores, so that the rows' chains (the sums, the exchanges)
        // overlap rather than wait behind each row's store. In pairs of rows, each lane keeps one
        // row's (lane tig: row 2 i + tig / 2 of pair i, key l), and every lane stores; one row alone
        // (R = 1), lanes 0 and 1 store. Each store is one predicated instruction: the key's value and
        // place are formed outside its test.
        constexpr int SUM = R % 4 == 0 ? 4 : R % 2 == 0 ? 2 : 1, OUT = score_sums_of(SUM);
        static_assert(R == 1 || SUM > 1, "one row, or whole pairs of rows");
        float sc[score_sums_of(R)];
#pragma unroll
        for (int j = 0; j < R; j += SUM) {
            float part[OUT];
            score_sum_rows<Shape, SUM>(acc, j, sm.wq, tig, part);
#pragma unroll
            for (int i = 0; i < OUT; i++)
                sc[j / SUM * OUT + i] = part[i]; // rows j .. j + SUM - 1's sums
        }
        const int upper = R == 1 ? 0 : tig >> 1; // this lane's row of each pair
        uint32_t *const krow = p.keys + (int64_t)(t0 + upper) * p.key_stride + l;
#pragma unroll
        for (int i = 0; i < score_sums_of(R); i++) {
            const uint32_t v = have_cur ? score_key(__fmul_rn(ksc_cur, sc[i])) : 0u;
            uint32_t *const at = krow + (int64_t)(R == 1 ? 0 : 2 * i) * p.key_stride;
            const int64_t nj = R == 1 ? n[0] : (upper ? n[2 * i + 1] : n[2 * i]);
            if ((R > 1 || tig < 2) && l < nj) {
                if constexpr (R == 1) {
                    store_hint(at, v, keep);
                    if (count_bins && v != 0u) // bin v >> shift: half (bin & 1) of word bin / 2
                        shared_add(bins_s + 4u * (v >> (Bins::shift + 1)), 1u << (16 * ((v >> Bins::shift) & 1u)));
                } else {
                    *at = v;
                }
            }
        }
    }
    if (count_bins) {
        __syncthreads();
        uint32_t *const state = p.topk_hist + (int64_t)t0 * p.hist_stride, *const g = state + Bins::St::HIST;
        if (threadIdx.x == 0)
            state[Bins::St::GIVEN] = 1u; // the mark the top-k reads: this row's first pass is counted
        for (int w = threadIdx.x; w < Bins::words; w += Threads) {
            const uint32_t c = bins[w];
            if (c & 0xffffu)
                atomicAdd(g + 2 * w, c & 0xffffu);
            if (c >> 16)
                atomicAdd(g + 2 * w + 1, c >> 16);
        }
    }
}

// B.2 on wgmma for row blockIdx.x alone, its n keys on this rank (index_score), in sm; bins and first:
// as score_rows_wgmma's
template <class C, class Smem>
__device__ __forceinline__ void index_score_wgmma_in(const dsa_index_score_params &p, int64_t n, Smem &sm,
                                                     uint32_t *bins = nullptr,
                                                     const ScoreFirstBlocks<C, Smem::stages> *first = nullptr)
{
    const int64_t ns[1] = {n};
    score_rows_wgmma<C, 1>(p, sm, (int)blockIdx.x, 1, ns, bins, first);
}

// The same in static shared memory (under 48 KiB: no opt-in), with the top-k's first pass counted
// where the plan says so; first: thread 0's first block-table entries (ScoreFirstBlocks)
template <class C>
__device__ __forceinline__ void index_score_wgmma(const dsa_index_score_params &p, int64_t n,
                                                  const ScoreFirstBlocks<C, C::idx_score_stages> &first)
{
    using Smem = ScoreWgmmaSmem<C::idx_heads, C::idx_head_dim, kScoreF16, C::idx_score_stages>;
    static_assert(sizeof(Smem) + 4 * ScoreBinsOf<C>::words <= 48 * 1024,
                  "static shared memory within the 48 KiB a launch allows (the plan's idx_score_stages)");
    __shared__ Smem sm;
    if constexpr (ScoreBinsOf<C>::on) {
        __shared__ uint32_t bins[ScoreBinsOf<C>::words];
        index_score_wgmma_in<C>(p, n, sm, bins, &first);
    } else {
        index_score_wgmma_in<C>(p, n, sm, nullptr, &first);
    }
}

// The grouped score kernel's configuration (index_score_group, dsa_index.cuh): rows = the plan's
// idx_score_group_rows a CTA; on: it groups (the target has wgmma, the heads fit one: 64 at most,
// and rows >= 2); smem: its dynamic shared memory, which its module exports (0 when off: the kernel
// is then index_score's).
template <class C> struct ScoreGroupOf {
    static constexpr int rows = C::idx_score_group_rows;
    static constexpr bool on = kHasWgmma && C::idx_heads <= 64 && rows >= 2;
    using Smem = ScoreGroupSmem<C::idx_heads, C::idx_head_dim, rows, kScoreF16>;
    using One = ScoreWgmmaSmem<C::idx_heads, C::idx_head_dim, kScoreF16, C::idx_score_stages>;
    static_assert(!on || sizeof(One) <= sizeof(Smem), "a CTA that scores its row alone fits the group's memory");
    static_assert(!on || sizeof(Smem) <= 227 * 1024, "the group's shared memory fits a CTA");
    static constexpr unsigned int smem = on ? (unsigned int)sizeof(Smem) : 0u;
};

// The mma.sync score kernel's CTAs an SM (index_score_few everywhere, index_score where the target
// has no wgmma): the plan's cap, and 0, no minimum, where it gives none: with 1, NVRTC gave
// DeepSeek-V3.2's 64 heads 255 registers on sm_90 and spilled, against 138 without. On sm_100 and
// later no minimum at all: there ptxas kept GLM-5.2's 32 heads at the plan's 128 registers with 8
// bytes of stack (4 of spills; 16 and 24 at a cap of 3 CTAs), against 134 registers and none
// without a cap (CUDA 13.0).
template <class C> struct ScoreMmaSyncCtasOf {
    static constexpr int ctas = kSm100 ? 0 : C::idx_score_min_ctas;
};

// index_score's CTAs an SM, the second argument of its __launch_bounds__ (templates/index.cu.in),
// which caps its registers. On sm_90a: as many CTAs as their shared memory lets an SM hold (228
// KiB, 1 KiB of it reserved a CTA), at most 4: the loop holds the next tile's key pieces beside the
// current one's fragments (127 registers at 64 heads, 110 at 32); at 5 CTAs (96 registers) it
// spills. Measured against the loop without that prefetch at 5 CTAs, 1-4% faster at 64 and 128 rows
// (tests/bench/RESULTS.md). Past 128 dims a head the key pieces are twice as many: 3 CTAs (at 4,
// 16 heads of 256 dims spilled 110 bytes). Elsewhere the mma.sync kernel's (ScoreMmaSyncCtasOf).
template <class C> struct ScoreCtasOf {
    using Smem = ScoreWgmmaSmem<C::idx_heads, C::idx_head_dim, kScoreF16, C::idx_score_stages>;
    static constexpr int fit = (int)((228u * 1024u) / (sizeof(Smem) + 4u * ScoreBinsOf<C>::words + 1024u));
    static constexpr int most = C::idx_head_dim <= 128 ? 4 : 3;
    static constexpr int ctas = kHasWgmma && C::idx_heads <= 64 ? (fit < most ? fit : most)
                                                                : ScoreMmaSyncCtasOf<C>::ctas;
    static_assert(!(kHasWgmma && C::idx_heads <= 64) || ctas >= 1, "a CTA's shared memory fits an SM");
};

} // namespace dsa
