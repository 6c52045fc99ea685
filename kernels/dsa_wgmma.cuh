// Sparse MLA main loop on warpgroup MMA (wgmma, sm_90a; 64 heads per CTA), warp-specialised: a
// producer warpgroup gathers and dequantises the key tiles into two bf16 tiles (mbarriers full and
// empty per tile), two consumer warpgroups compute on them, operands read from shared memory by
// the tensor cores, fp32 accumulators in registers. Consumer warpgroup 0 computes S for the whole
// 64-key tile and keeps the online softmax in registers; each consumer runs P V over half of the
// latent dims of every head (group 0 with P from registers, group 1 from shared memory).
#pragma once
#include "dsa_async.cuh"
#include "dsa_attend_tiles.cuh"

namespace dsa {

// The attend tiles for wgmma (dsa_async.cuh has the instructions and the descriptor): 8 x 8 core
// matrices of 16-byte rows (no swizzle): element (r, c) of a tile with C columns at (r/8)(C/8)64 +
// (c/8)64 + (r%8)8 + c%8 (bf16 units), so one tile serves Q K^T (K-major, row groups SBO = C/8 x 128
// bytes apart, column groups LBO = 128) and P V (V N-major: the same key tile read with LBO and SBO
// swapped).

// D += A B, m64 x N x k16, A and B by descriptor; TransA = 1: A M-major (dsa_wgmma_t.cuh's V^T read
// from the rows of a key tile), TransB = 1: B N-major. NACC = N / 2 accumulators; OPS: a, b, the
// scales, TransA and TransB (operands NACC .. NACC + 4).
#define DSA_ATTEND_WGMMA(N, NACC, PRED, OPS)                                                                 \
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, " PRED ", 0;\n\t"                                       \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " DSA_WG_REGS##NACC ", " OPS ";\n\t}" \
                 : DSA_WG_D##NACC(0)                                                                          \
                 : "l"(a), "l"(b), "r"(1), "n"(TransA), "n"(TransB))

template <int TransB, int TransA = 0> __device__ __forceinline__ void wgmma_n16(float (&d)[8], uint64_t a, uint64_t b)
{
    DSA_ATTEND_WGMMA(16, 8, "%10", "%8, %9, p, 1, 1, %11, %12");
}

template <int TransB, int TransA = 0> __device__ __forceinline__ void wgmma_n32(float (&d)[16], uint64_t a, uint64_t b)
{
    DSA_ATTEND_WGMMA(32, 16, "%18", "%16, %17, p, 1, 1, %19, %20");
}

template <int TransB, int TransA = 0> __device__ __forceinline__ void wgmma_n64(float (&d)[32], uint64_t a, uint64_t b)
{
    DSA_ATTEND_WGMMA(64, 32, "%34", "%32, %33, p, 1, 1, %35, %36");
}

template <int TransB, int TransA = 0> __device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t a, uint64_t b)
{
    DSA_ATTEND_WGMMA(256, 128, "%130", "%128, %129, p, 1, 1, %131, %132");
}

// D += A B, m64 x n256 x k16, A from registers (this thread's four bf16 pairs of the m64 x k16 A
// fragment: rows r0 and r0 + 8, columns 2 t4 + {0, 1} and 8 + 2 t4 + {0, 1}), B by descriptor
template <int TransB> __device__ __forceinline__ void wgmma_n256_rega(float (&d)[128], const uint32_t (&a)[4], uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " DSA_WG_REGS128
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n\t}"
                 : DSA_WG_D128(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TransB));
}

// The producer warpgroup of a warp-specialised loop (this one and dsa_wgmma_t.cuh's): per segment the
// compaction (with the consumers at a top-k of one segment, alone at several: segment_producers),
// then each tile u (counted over all segments) gathered, dequantised and written into key tile u % 2.
// Use v = u / 2 of a tile first waits (from v = 1 on) on the empty barrier's phase v - 1, then
// arrives on its full barrier once this thread's writes are done (full counts the producer's 128
// arrivals, each after its own writes and a proxy fence).
// Ahead: both halves of tile u + 1 are loaded a tile ahead (the 32-head loop, whose consumers wait
// on the producer: 128 rows 9-13% faster), else half 1 only when tile u begins
// (the 64-head loop, measured 3-4% slower with both halves ahead). With two producer warpgroups
// (16 heads, Lay::producers) warpgroup 2 + h takes half h of every tile, its loads of the next tile
// out as soon as this one is stored, and full counts both groups' 256 arrivals; deep (nvfp4 there,
// Lay::deep) holds two tiles' raw entries in two stages, the even and the odd tiles of a segment,
// each loaded with the tile after next as soon as it is stored: the same tiles, u and barriers.
// Pair (64 heads, two CTAs of a row in a cluster): the producer of cluster rank r dequantises
// (bf16: copies) half r of every tile into its own key tile and, by asynchronous stores that complete
// their bytes on the peer's full barrier, into the peer's (FlashMLA's "crossover"). Full counts the
// local producer's 128 arrivals, its thread 0's carrying the expectation of the peer's bytes; empty
// counts the local consumers' 256 arrivals and one from each of the peer's 8 consumer warps, since
// the tile it frees is written by both producers. No thread waits on a remote store or fences at
// cluster scope: a release of the peer's stores per tile (the first version) made the kernel slower.
template <class Lay, int TOPK, int ScaleOffset, int RopeOffset, bool Ahead, class SlotOf, bool Pair = false>
__device__ __forceinline__ void wgmma_producer(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache,
                                               const SlotOf &slot_of)
{
    const uint32_t full0 = sm.bars, empty0 = sm.bars + 16;
    regs_dec<Lay::producer_regs>();
    if constexpr (Pair || Lay::producers == 2) {
        // one half of every tile per producer warpgroup: warpgroup 2 + h of two, or the producer of
        // cluster rank h of a pair, which also stores its half into the peer's tile
        const int half = Pair ? (int)cluster_rank() : th.warp / 4 - 2;
        uint32_t peer_full0 = 0, peer_k0 = 0;
        if constexpr (Pair) {
            const uint32_t peer = (uint32_t)half ^ 1u;
            peer_full0 = cluster_addr(full0, peer), peer_k0 = cluster_addr(smem_addr(sm.k_s), peer);
        }
        int u = 0;
        if constexpr (Lay::deep && !Pair) {
            // two tiles' raw entries in flight: stage a holds the even tiles of a segment, b the
            // odd ones, each refilled with the tile after next as soon as it is stored
            const auto tile = [&](KeyStage<Lay, ScaleOffset, RopeOffset> &s, int t0, int n) {
                const int buf = u % 2;
                uint16_t *k = sm.k_s + Lay::key_tile_off(buf);
                if (u >= 2)
                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2);
                s.put(cache, sm.list, t0, half, n, k);
                if (t0 + 2 * Lay::KT < n)
                    s.load(cache, sm.list, t0 + 2 * Lay::KT, half, n);
                s.landed();
                fence_proxy_async();
                mbar_arrive(full0 + 8 * buf);
                u++;
            };
            for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
                const CtaThread ts = segment_thread<(TOPK > kAttendSegment)>(th);
                KeyStage<Lay, ScaleOffset, RopeOffset> a(ts.warp % 4, ts.lane), b(ts.warp % 4, ts.lane);
                const int n = segment_producers<Lay, TOPK>(ts, sm, seg0, slot_of);
                if (n > 0)
                    a.load(cache, sm.list, 0, half, n);
                if (n > Lay::KT)
                    b.load(cache, sm.list, Lay::KT, half, n);
                for (int t0 = 0; t0 < n; t0 += 2 * Lay::KT) {
                    tile(a, t0, n);
                    if (t0 + Lay::KT < n)
                        tile(b, t0 + Lay::KT, n);
                }
            }
            return;
        }
        for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
            const CtaThread ts = segment_thread<(TOPK > kAttendSegment)>(th);
            KeyStage<Lay, ScaleOffset, RopeOffset, Lay::format != kBf16 || Pair> a(ts.warp % 4, ts.lane);
            const int n = segment_producers<Lay, TOPK>(ts, sm, seg0, slot_of);
            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (Pair && seg0 == 0)
                cluster_wait(); // the peer's barriers are initialised (sparse_mla)
            for (int t0 = 0; t0 < n; t0 += Lay::KT, u++) {
                const int buf = u % 2;
                uint16_t *k = sm.k_s + Lay::key_tile_off(buf);
                if (u >= 2)
                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it
                if constexpr (Pair)
                    a.put_pair(half, k, peer_k0 + 2u * (uint32_t)Lay::key_tile_off(buf), peer_full0 + 8 * buf);
                else
                    a.put(cache, sm.list, t0, half, n, k);
                if (t0 + Lay::KT < n)
                    a.load(cache, sm.list, t0 + Lay::KT, half, n);
                a.landed();
                fence_proxy_async(); // this thread's local writes, read by the tensor cores
                if (Pair && th.tid == 256) // the peer's half of this use of the tile, expected here
                    mbar_arrive_expect(full0 + 8 * buf, decltype(a)::pair_bytes);
                else
                    mbar_arrive(full0 + 8 * buf);
            }
        }
        return;
    }
    int u = 0;
    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
        const CtaThread ts = segment_thread<(TOPK > kAttendSegment)>(th);
        KeyStage<Lay, ScaleOffset, RopeOffset> a(ts.warp - 8, ts.lane), b(ts.warp - 8, ts.lane); // halves 0 and 1
        const int n = segment_producers<Lay, TOPK>(ts, sm, seg0, slot_of);
        if (n > 0) {
            a.load(cache, sm.list, 0, 0, n);
            if constexpr (Ahead)
                b.load(cache, sm.list, 0, 1, n);
        }
        // Ahead: both halves of this tile are in a and b, loaded during the previous tile (its
        // wait for a free key tile included), and each half's loads of the next tile go out as soon
        // as the half is stored; else half 0 is in a and half 1 is loaded as the tile begins, in
        // flight while half 0 is converted and stored
        for (int t0 = 0; t0 < n; t0 += Lay::KT, u++) {
            const int buf = u % 2;
            const bool more = t0 + Lay::KT < n;
            uint16_t *k = sm.k_s + Lay::key_tile_off(buf);
            if constexpr (!Ahead)
                b.load(cache, sm.list, t0, 1, n);
            if (u >= 2)
                mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // the consumers are done with use u / 2 - 1
            a.put(cache, sm.list, t0, 0, n, k);
            if (more)
                a.load(cache, sm.list, t0 + Lay::KT, 0, n);
            b.put(cache, sm.list, t0, 1, n, k);
            if (Ahead && more)
                b.load(cache, sm.list, t0 + Lay::KT, 1, n);
            a.landed(); // bf16: both halves' cp.async
            fence_proxy_async(); // this thread's writes of the tile are read by the tensor cores
            mbar_arrive(full0 + 8 * buf);
        }
    }
}

// The 64-head consumers, FlashMLA's way: warpgroup 0 computes S for all 64 keys of a tile (an
// m64n64 product: Q is read once a tile, not once per group), keeps the softmax in its registers,
// multiplies P from registers by the lower half of V's latent dims, and hands P and the rows'
// corrections to warpgroup 1 through shared memory (P in the tile's rope columns, named barrier
// 4 + buf: group 0 arrives, group 1 waits), which multiplies it by the upper half. Group 1 holds no
// softmax state: m and l are group 0's. Group 0 takes 192 registers (O 128, S 32), group 1 176,
// the producer 136.
constexpr int kConsumerGroup0Regs = 192, kConsumerGroup1Regs = 176; // with the producer's 136: 504, the CTA's 3 x 168
template <class Lay, int TOPK, bool Pair, class SlotOf, class Store, class FormQ>
__device__ __forceinline__ void wgmma_consumers(const CtaThread &th, const AttendSmem<Lay> &sm, float softmax_scale,
                                                const SlotOf &slot_of, const Store &store, const FormQ &form_q,
                                                uint32_t peer_empty0)
{
    constexpr int HB = Lay::heads, KT = Lay::KT, KSTEPS = Lay::KSTEPS, LAT = Lay::lat;
    constexpr int NC = 2 * 128;
    static_assert(HB == 64 && KT == 64 && Lay::DW == 256 && Lay::STATS >= 4, "64 heads, 64-key tiles");
    static_assert(Lay::producers == 1 && Lay::producer_regs + kConsumerGroup0Regs + kConsumerGroup1Regs <=
                                             3 * (65536 / Lay::threads / 8 * 8),
                  "setmaxnreg: the producer's and the two groups' registers within the CTA's");
    const int wg = th.warp / 4, wl = th.warp % 4, g = th.g, t4 = th.t4;
    const int r0 = 16 * wl + g;
    const uint32_t full0 = sm.bars, empty0 = sm.bars + 16;
    constexpr uint32_t SBO = Lay::QK_SBO;
    float *xch = sm.m_s;            // [2][HB]: at the end each group's l (group 1's is 0)
    float *corr = sm.m_s + 2 * HB;  // [2][HB]: the rows' corrections of the tile in buffer b
    float oacc[Lay::ACC]; // O: (row, dim wg 256 + 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1} (row r0), + {2, 3} (r0 + 8)
#pragma unroll
    for (int i = 0; i < Lay::ACC; i++)
        oacc[i] = 0.0f;
    // m: the rows' references, of the unscaled scores, moved lazily (smx.reference)
    float m_lo = neg_inf(), m_hi = neg_inf(), l_lo = 0.0f, l_hi = 0.0f;
    const OnlineSoftmax<true> smx(softmax_scale);
    // each group's loop (and end) is its own code, so that ptxas allocates group 0's within its 192
    // registers (code shared by both would be compiled within group 1's 176)
    const auto tile_done = [&](int buf) {
        wgmma_commit();
        wgmma_wait();
        wg_pin(oacc);
        mbar_arrive(empty0 + 8 * buf); // this thread's reads of the tile are done
        if constexpr (Pair) {
            __syncwarp();
            if (th.lane == 0)
                mbar_arrive_remote(peer_empty0 + 8 * buf);
        }
    };
    // O's rows by their corrections, skipped where both are 1 (the reference stayed: smx.reference)
    const auto rescale = [&](float c_lo, float c_hi) {
        if (c_lo != 1.0f || c_hi != 1.0f) {
#pragma unroll
            for (int j = 0; j < Lay::ACC / 4; j++) {
                oacc[4 * j] *= c_lo, oacc[4 * j + 1] *= c_lo;
                oacc[4 * j + 2] *= c_hi, oacc[4 * j + 3] *= c_hi;
            }
        }
        wg_pin(oacc);
        wgmma_fence();
    };
    // the end, in each group's code (so within its registers): barrier 1 from two places, so unaligned
    const auto finish = [&] {
        // O / l: l is group 0's (group 1's sums are 0)
        if (t4 == 0) {
            xch[wg * HB + r0] = l_lo;
            xch[wg * HB + r0 + 8] = l_hi;
        }
        named_barrier_unaligned_n<1, NC>(); // both groups' l; both groups' last wgmma on the key tiles completed
        const float lt_lo = xch[r0] + xch[HB + r0], lt_hi = xch[r0 + 8] + xch[HB + r0 + 8];
        // the empty head (OnlineSoftmax::lse): no kept key (l = 0) or a score not a number (l NaN): 0
        const bool ok_lo = lt_lo > 0.0f, ok_hi = lt_hi > 0.0f;
        const float inv_lo = ok_lo ? 1.0f / lt_lo : 0.0f, inv_hi = ok_hi ? 1.0f / lt_hi : 0.0f;
        float *const obuf = reinterpret_cast<float *>(sm.k_s);
#pragma unroll
        for (int j = 0; j < Lay::ACC / 4; j++) {
            const int d = wg * Lay::DW + 8 * j + 2 * t4;
            *reinterpret_cast<float2 *>(obuf + r0 * Lay::OP + d) =
                ok_lo ? make_float2(oacc[4 * j] * inv_lo, oacc[4 * j + 1] * inv_lo) : make_float2(0.0f, 0.0f);
            *reinterpret_cast<float2 *>(obuf + (r0 + 8) * Lay::OP + d) =
                ok_hi ? make_float2(oacc[4 * j + 2] * inv_hi, oacc[4 * j + 3] * inv_hi) : make_float2(0.0f, 0.0f);
        }
        if (wg == 0 && t4 == 0) { // d = -1: the LSE (natural log; -inf for a head with no kept key)
            store(r0, -1, smx.lse(m_lo, lt_lo), 0.0f);
            store(r0 + 8, -1, smx.lse(m_hi, lt_hi), 0.0f);
        }
        named_barrier_unaligned_n<1, NC>(); // O of every head
#pragma unroll 1
        for (int i = th.tid; i < HB * (LAT / 4); i += NC) {
            const int head = i / (LAT / 4), d = 4 * (i % (LAT / 4));
            const float4 o = *reinterpret_cast<const float4 *>(obuf + head * Lay::OP + d);
            store(head, d, o.x, o.y);
            store(head, d + 2, o.z, o.w);
        }
    };
    int u = 0;
    if (wg == 0) {
        regs_inc<kConsumerGroup0Regs>();
        // the first segment's count and Q before the loop (formed inside it, at a top-k of several
        // segments, the query's registers stayed live through every segment)
        const int n0 = segment_consumers<Lay, TOPK>(th, sm, 0, slot_of);
        form_q(); // Q in q_s, while the producer's first loads are in flight (sparse_mla)
        if constexpr (Pair)
            cluster_wait(); // the peer's barriers are initialised (sparse_mla)
        for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
            const int n = seg0 == 0 ? n0 : count_from_producers(sm, seg0);
            // the segment's own t4 and r0 (hiding the function's): at several segments formed anew
            // in each (segment_thread), so that what the tile loop derives from them is not held
            // through the loop over segments
            const CtaThread ts = segment_thread<(TOPK > kAttendSegment)>(th);
            const int t4 = ts.t4, r0 = 16 * (ts.warp % 4) + ts.g;
            for (int t0 = 0; t0 < n; t0 += KT, u++) {
                const int buf = u % 2, nk = n - t0 < KT ? n - t0 : KT;
                const uint32_t kt = smem_addr(sm.k_s + Lay::key_tile_off(buf));
                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                // S = Q K^T over the tile's 64 keys: (row, key 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1}
                // (row r0), + {2, 3} (r0 + 8)
                float sacc[32];
#pragma unroll
                for (int i = 0; i < 32; i++)
                    sacc[i] = 0.0f;
                wg_pin(sacc);
                wgmma_fence();
                const uint32_t qa = smem_addr(sm.q_s);
#pragma unroll
                for (int ks = 0; ks < KSTEPS; ks++)
                    wgmma_n64<0>(sacc, wg_desc(qa + 256u * ks, 128u, SBO), wg_desc(kt + 256u * ks, 128u, SBO));
                wgmma_commit();
                wgmma_wait();
                wg_pin(sacc);
                float mx_lo = neg_inf(), mx_hi = neg_inf();
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const bool in = 8 * j + 2 * t4 + e < nk;
                        sacc[4 * j + e] = in ? smx.score(sacc[4 * j + e]) : neg_inf();
                        sacc[4 * j + 2 + e] = in ? smx.score(sacc[4 * j + 2 + e]) : neg_inf();
                        mx_lo = fmaxf(mx_lo, sacc[4 * j + e]);
                        mx_hi = fmaxf(mx_hi, sacc[4 * j + 2 + e]);
                    }
                mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
                mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
                mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
                mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
                const float mn_lo = smx.reference(m_lo, mx_lo), mn_hi = smx.reference(m_hi, mx_hi);
                // exactly 1 where the reference stayed (rescale skips those rows)
                const float c_lo = mn_lo == m_lo ? 1.0f : smx.correction(m_lo, mn_lo);
                const float c_hi = mn_hi == m_hi ? 1.0f : smx.correction(m_hi, mn_hi);
                const float b_lo = smx.bias(mn_lo), b_hi = smx.bias(mn_hi);
                m_lo = mn_lo, m_hi = mn_hi;
                // P as bf16 pairs: at once the A fragments of P V (k-step kk: keys 16 kk ..) and, in
                // the tile's rope columns, group 1's A
                uint32_t pa[4][4];
                float sum_lo = 0.0f, sum_hi = 0.0f;
                uint16_t *pt = sm.k_s + Lay::key_tile_off(buf); // P (row, key k) at the tile's (row, LAT + k)
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int k = 8 * j + 2 * t4;
                    const float p0 = smx.p(sacc[4 * j], b_lo), p1 = smx.p(sacc[4 * j + 1], b_lo);
                    const float p2 = smx.p(sacc[4 * j + 2], b_hi), p3 = smx.p(sacc[4 * j + 3], b_hi);
                    sum_lo += p0 + p1;
                    sum_hi += p2 + p3;
                    const uint32_t lo = bf16x2(p0, p1), hi = bf16x2(p2, p3);
                    pa[j / 2][2 * (j % 2)] = lo;     // row r0, keys 16 kk + 8 (j % 2) + 2 t4
                    pa[j / 2][2 * (j % 2) + 1] = hi; // row r0 + 8
                    *reinterpret_cast<uint32_t *>(pt + Lay::qk_at(r0, LAT + k)) = lo;
                    *reinterpret_cast<uint32_t *>(pt + Lay::qk_at(r0 + 8, LAT + k)) = hi;
                }
                sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, 1);
                sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, 1);
                sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, 2);
                sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, 2);
                l_lo = l_lo * c_lo + sum_lo;
                l_hi = l_hi * c_hi + sum_hi;
                if (t4 == 0) {
                    corr[buf * HB + r0] = c_lo;
                    corr[buf * HB + r0 + 8] = c_hi;
                }
                fence_proxy_async(); // P is read by group 1's tensor cores
                if (buf == 0) // the id in the instruction, never in a register
                    named_barrier_arrive_n<4, NC>();
                else
                    named_barrier_arrive_n<5, NC>();
                rescale(c_lo, c_hi);
                // B = V, latent columns [0, 256) read N-major: 8-key groups SBO apart, 8-dim groups 128 bytes
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++)
                    wgmma_n256_rega<1>(oacc, pa[kk], wg_desc(kt + 2u * SBO * kk, SBO, 128u));
                tile_done(buf);
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++)
                    wg_pin(pa[kk]); // the products read pa until the wait in tile_done: not reused before it
            }
        }
        finish();
    } else {
        regs_inc<kConsumerGroup1Regs>();
        // the first segment's count and Q before the loop (formed inside it, at a top-k of several
        // segments, the query's registers stayed live through every segment)
        const int n0 = segment_consumers<Lay, TOPK>(th, sm, 0, slot_of);
        form_q(); // Q in q_s, while the producer's first loads are in flight (sparse_mla)
        if constexpr (Pair)
            cluster_wait(); // the peer's barriers are initialised (sparse_mla)
        for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
            const int n = seg0 == 0 ? n0 : count_from_producers(sm, seg0);
            // the segment's own r0 (hiding the function's), as group 0's
            const CtaThread ts = segment_thread<(TOPK > kAttendSegment)>(th);
            const int r0 = 16 * (ts.warp % 4) + ts.g;
            for (int t0 = 0; t0 < n; t0 += KT, u++) {
                const int buf = u % 2;
                const uint32_t kt = smem_addr(sm.k_s + Lay::key_tile_off(buf));
                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                if (buf == 0) // group 0's P and corrections of this tile
                    named_barrier_unaligned_n<4, NC>();
                else
                    named_barrier_unaligned_n<5, NC>();
                rescale(corr[buf * HB + r0], corr[buf * HB + r0 + 8]);
                // A = P (K-major, in the rope columns); B = V, latent columns [256, 512)
                const uint32_t pa = kt + (uint32_t)(LAT / 8 * 128), vb = kt + (uint32_t)(Lay::DW / 8 * 128);
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++)
                    wgmma_n256<1>(oacc, wg_desc(pa + 256u * kk, 128u, SBO), wg_desc(vb + 2u * SBO * kk, SBO, 128u));
                tile_done(buf);
            }
        }
        finish();
    }
}

// The whole key loop of one CTA, warp-specialised; also stores O / l and the LSE (store, d = -1).
// Tile u (counted over all segments) goes to key tile u % 2 (wgmma_producer); use v = u / 2 of a
// tile waits on its full barrier's phase v (parity v % 2); empty counts the consumers' 256 arrivals
// (each after its last wgmma on the tile completed).
// All roles meet on named barrier 3 (384 threads) in each segment's compaction (at a top-k of
// several segments once a segment, after the producer's compaction: compact_by_producers); the
// consumers on named barrier 6 once (Q formed, after the first compaction), on 4 and 5 (a tile's
// P, group 0 arriving, group 1 waiting) and on 1 at the end.
template <class Lay, int TOPK, int ScaleOffset, int RopeOffset, bool Pair, class SlotOf, class Store, class FormQ>
__device__ __forceinline__ void wgmma_main_loop(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache,
                                                float softmax_scale, const SlotOf &slot_of, const Store &store,
                                                const FormQ &form_q)
{
    static_assert(Lay::threads == 3 * 128, "two consumer warpgroups and a producer warpgroup");
    // the generator pairs no CTAs there (gen/spec.c, attend_cluster: the pair's kernels kept a few
    // bytes in local memory beside the loop over segments)
    static_assert(!Pair || TOPK <= kAttendSegment, "pairs: a top-k of one segment");
    if (th.warp / 4 == 2) {
        wgmma_producer<Lay, TOPK, ScaleOffset, RopeOffset, false, SlotOf, Pair>(th, sm, cache, slot_of);
        return;
    }
    // Pair: the peer's empty barriers (its producer writes this CTA's tiles too)
    const uint32_t peer_empty0 = Pair ? cluster_addr(sm.bars + 16, cluster_rank() ^ 1u) : 0u;
    wgmma_consumers<Lay, TOPK, Pair>(th, sm, softmax_scale, slot_of, store, form_q, peer_empty0);
}

} // namespace dsa
