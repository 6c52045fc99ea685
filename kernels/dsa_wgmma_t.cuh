// Sparse MLA main loop on warpgroup MMA for 16 and 32 heads per CTA (sm_90a), the products
// transposed so that no head is padded to the 64 rows a warpgroup MMA has: S^T = K Q^T (the tile's
// 64 keys along M, the heads along N) and O^T += V^T P^T (latent dims along M). The producer
// warpgroup of the 64-head loop (wgmma_producer, dsa_wgmma.cuh) fills the two key tiles; the two
// consumer warpgroups take alternate tiles (tile u to group u % 2, which always finds it in key tile
// u % 2), each with its own O^T, m and l, so one group's softmax runs while the other's MMAs do;
// at the end the two are merged in a fixed order. At 16 heads two producer warpgroups, one a half of
// every tile.
#pragma once
#include "dsa_merge.cuh"
#include "dsa_wgmma.cuh"

namespace dsa {

// descriptor d with off (16-byte units) added to its address field, which cannot carry: a shared
// address stays below 2^18, so the field (address / 16, 14 bits) never passes 2^14
__device__ __forceinline__ uint64_t wg_desc_at(uint64_t d, uint32_t off)
{
    return (d & 0xffffffff00000000ull) | (uint32_t)((uint32_t)d + off);
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, uint16_t v)
{
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(addr), "h"(v) : "memory");
}

template <int HB, int TransA, int TransB>
__device__ __forceinline__ void wgmma_t(float (&d)[HB / 2], uint64_t a, uint64_t b)
{
    static_assert(HB == 16 || HB == 32, "N of the transposed products: the heads per CTA");
    if constexpr (HB == 16)
        wgmma_n16<TransB, TransA>(d, a, b);
    else
        wgmma_n32<TransB, TransA>(d, a, b);
}

// The most split CTAs of a row that merge it in their cluster, at HB heads a CTA: 16 at 16 heads,
// 8 at 32. At 32 heads a cluster of 16 (one row) was 1.2 us slower than the split merge kernel (26.0
// against 24.8 us), where 16 heads gained 0.8 (tests/bench/RESULTS.md, twenty-eighth session).
__host__ __device__ constexpr int cluster_merge_most(int heads) { return heads == 16 ? 16 : 8; }

// The merge of a row's splits by the S split CTAs of its cluster (S > 1, the cluster's rank r =
// split r), the 256 consumer threads of each (ct = 0 .. 255): each CTA holds its split's partial
// of the row's HB heads in shared memory at obuf (its rows of OP floats: O / l at dims 0 .. LAT - 1,
// the head's LSE at LAT; in the cluster's every CTA at the same address), and CTA r merges heads
// r HB / S .. (r + 1) HB / S - 1, reading every CTA's rows of them, with what the split merge
// kernel computes (dsa_merge.cuh, lse_merge: in split order, in fp32, the same bits), and stores
// them as one split would (store.merged). 256 S / HB threads a head. The cluster's barrier before
// (every partial in place) and after (no CTA leaves while another reads its shared memory).
template <int HB, int LAT, int OP, int S, class Store>
__device__ __forceinline__ void cluster_merge_of(uint32_t obuf, int ct, const Store &store)
{
    // TT threads a head, of which the first LAT / 4 hold IT groups of 4 dims each; every thread
    // issues all of its loads (S LSEs, S x IT partial dims) before it uses any
    constexpr int TT = 256 * S / HB, IT = LAT / 4 / TT > 0 ? LAT / 4 / TT : 1;
    const int head = (int)cluster_rank() * (HB / S) + ct / TT, tt = ct % TT;
    const bool on = tt < LAT / 4;
    cluster_sync();
    const uint32_t row = obuf + 4u * (uint32_t)(head * OP); // head's row, in CTA r at cluster_addr(row, r)
    float lw[S];                                            // CTA r's LSE, then its weight
    float4 x[S][IT];
#pragma unroll
    for (int r = 0; r < S; r++) {
        lw[r] = ld_cluster_f32(cluster_addr(row + 4u * LAT, (uint32_t)r));
#pragma unroll
        for (int it = 0; it < IT; it++)
            x[r][it] = on ? ld_cluster_f32x4(cluster_addr(row + 16u * (uint32_t)(tt + it * TT), (uint32_t)r))
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int r = 0; r < S; r++)
        lw[r] = merge_lse_in(lw[r]);
    const float total = merge_lse_total<S>(S, [&](int r) { return lw[r]; });
    uint32_t live = 0; // the partials of a finite LSE: the only ones added
#pragma unroll
    for (int r = 0; r < S; r++) {
        live |= (lw[r] != neg_inf() ? 1u : 0u) << r;
        lw[r] = merge_weight(lw[r], total);
    }
#pragma unroll
    for (int it = 0; it < IT; it++) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int r = 0; r < S; r++)
            if (live >> r & 1u)
                merge_add(v, lw[r], x[r][it]);
        if (on) {
            const int d = 4 * (tt + it * TT);
            store.merged(head, d, v.x, v.y);
            store.merged(head, d + 2, v.z, v.w);
        }
    }
    if (tt == 0)
        store.merged(head, -1, total, 0.0f);
    cluster_sync();
}
template <int HB, int LAT, int OP, class Store>
__device__ __forceinline__ void cluster_merge(uint32_t obuf, int S, int ct, const Store &store)
{
    constexpr int Most = cluster_merge_most(HB);
    static_assert(HB >= Most && LAT % 4 == 0, "a head or more a CTA");
    switch (S) {
    case 2: cluster_merge_of<HB, LAT, OP, 2>(obuf, ct, store); return;
    case 4: cluster_merge_of<HB, LAT, OP, 4>(obuf, ct, store); return;
    case 8: cluster_merge_of<HB, LAT, OP, 8>(obuf, ct, store); return;
    case 16:
        if constexpr (Most >= 16) {
            cluster_merge_of<HB, LAT, OP, 16>(obuf, ct, store);
            return;
        }
        break;
    }
    __trap(); // the runtime launches clusters of a power of two up to the module's attend_cluster_merge
}

// The whole key loop of one CTA of 16 or 32 heads, warp-specialised; also stores O / l and the LSE
// (store, d = -1). A consumer thread (warpgroup wg, warp wl of it, lane g * 4 + t4) holds the m64 x
// HB accumulator fragment: rows 16 wl + g and + 8, columns (heads) 8 j + 2 t4 + e at 4 j + e (first
// row) and 4 j + 2 + e (second row), j < HB / 8, e < 2; so its heads are the HB / 4 ones
// h(2 j + e) = 8 j + 2 t4 + e, and per head it keeps m (the group's, the same in all its threads)
// and its own share of l (over its rows), summed over the group's threads at the end.
// Barriers: all roles meet on named barrier 3 (every thread) in each segment's compaction (at a
// top-k of several segments once a segment, after the producers' compaction: compact_by_producers);
// the consumers on named barrier 6 (256 threads) once, Q formed after the first compaction; group wg
// meets on named barrier 1 + wg (128 threads) twice a tile (the column maxima, then P^T); both
// groups on the mbarrier done (256 arrivals) twice at the end (the merge). empty[b] counts the 128
// arrivals of group b, each after its last wgmma on the tile completed.
template <class Lay, int TOPK, int ScaleOffset, int RopeOffset, class SlotOf, class Store, class FormQ>
__device__ __forceinline__ void wgmma_t_main_loop(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache,
                                                  float softmax_scale, const SlotOf &slot_of, const Store &store,
                                                  const FormQ &form_q)
{
    constexpr int HB = Lay::heads, KT = Lay::KT, KSTEPS = Lay::KSTEPS, KV = Lay::kv, LAT = Lay::lat, OB = Lay::OB;
    constexpr int NA = HB / 2, NH = HB / 4; // accumulators per m64 x HB block, heads per thread
    constexpr int NG = 128;                 // threads per consumer group
    static_assert(Lay::TR && Lay::threads == (2 + Lay::producers) * NG, "two consumer warpgroups, then the producers");
    const int warp = th.warp, g = th.g, t4 = th.t4;
    // wg through lane 0: the same in every lane, which ptxas cannot tell from warp / 4; knowing it,
    // it forms the wgmma descriptors of the tile (kt below) in uniform registers, where without it
    // two to four R2UR moves came before each of a tile's wgmmas
    const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), wl = warp % 4, gt = th.tid % NG;
    const uint32_t full0 = sm.bars, empty0 = sm.bars + 16, done = sm.bars + 32;

    if (wg >= 2) {
        wgmma_producer<Lay, TOPK, ScaleOffset, RopeOffset, true>(th, sm, cache, slot_of);
        return;
    }

    // ---- the consumers: group wg, key rows r0 = 16 wl + g and r0 + 8 of each of its tiles ----
    regs_inc<Lay::consumer_regs>();
    // barrier 1 + wg, its id in the instruction
    const auto group_sync = [wg] {
        if (wg == 0)
            named_barrier_n<1, NG>();
        else
            named_barrier_n<2, NG>();
    };
    const int r0 = 16 * wl + g;
    const OnlineSoftmax<(HB > 16)> smx(softmax_scale);
    float *xch = sm.m_s; // [2][4][HB]: each warp's column maxima of a tile; at the end its l
    // [2][2][HB]: each group's m, in shared memory (at 32 heads the registers hold O^T and S^T with
    // little to spare): the group's v-th tile reads m at parity v % 2 and its warp 0 writes the
    // new m at the other parity (the tile's readers of that parity, two tiles back, passed a barrier)
    float *msh = sm.m_s + 2 * 4 * HB + wg * 2 * HB;
    float oacc[OB][NA]; // O^T block b: (dim 64 b + r0 (+ 8), head h(2 j + e)) at 4 j + e (+ 2)
#pragma unroll
    for (int b = 0; b < OB; b++)
#pragma unroll
        for (int i = 0; i < NA; i++)
            oacc[b][i] = 0.0f;
    // [2][NH][128]: this thread's share of l per head (its rows), in shared memory too, each thread
    // its own column (no bank conflict)
    float *lsh = sm.m_s + 12 * HB + wg * NH * NG + gt;
#pragma unroll
    for (int h = 0; h < NH; h++)
        lsh[h * NG] = 0.0f;
    for (int h = gt; h < HB; h += NG)
        msh[h] = neg_inf(); // parity 0, read after the first compaction's barriers
    constexpr uint32_t SBO = Lay::QK_SBO;
    const uint32_t kt0 = smem_addr(sm.k_s + Lay::key_tile_off(wg)), qb0 = smem_addr(sm.q_s);
    int u = 0;
    // the first segment's count and Q before the loop (formed inside it, at a top-k of several
    // segments, the query's registers stayed live through every segment)
    const int n0 = segment_consumers<Lay, TOPK>(th, sm, 0, slot_of);
    form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
        const int n = seg0 == 0 ? n0 : count_from_producers(sm, seg0);
        for (int t0 = 0; t0 < n; t0 += KT, u++) {
            if (u % 2 != wg)
                continue; // the other group's tile
            const int par = (u / 2) % 2; // this group's tile u / 2: m at parity par, the new m at 1 - par
            const int nk = n - t0 < KT ? n - t0 : KT; // keys in this tile; the rest are zero rows
            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            // the tile's address, opaque to the compiler here: derived from it once for all tiles,
            // the 100-odd descriptors and the P^T addresses would not fit the registers (Q's address
            // is left visible: made opaque too, it took a vector register, and a 32-head kernel at
            // DCP = 8, tests/gen/derive's merge_even_tp8_dcp8, spilled)
            uint32_t kt = kt0;
            asm volatile("" : "+r"(kt));
            // P^T (head 8 j + 2 t4 + e, key r0 + 8 r) at pt + 2 (64 j + 8 e + (KV / 8) 64 r): one base
            // register, the rest immediate offsets
            const uint32_t pt = kt + 2u * Lay::pt_at(2 * t4, r0);

            // 2. S^T = K Q^T over all dims: A = the key tile (keys along M, K-major: 8-key groups SBO
            // apart, 8-dim groups 128 bytes), B = Q (heads along N, K-major, the same layout)
            float sacc[NA];
#pragma unroll
            for (int i = 0; i < NA; i++)
                sacc[i] = 0.0f;
            wg_pin(sacc);
            wgmma_fence();
            // the descriptors of step ks: + 256 ks bytes (wg_desc_at, 16-byte units)
            const uint64_t ka = wg_desc(kt, 128u, SBO), qd = wg_desc(qb0, 128u, SBO);
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++)
                wgmma_t<HB, 0, 0>(sacc, wg_desc_at(ka, 16u * ks), wg_desc_at(qd, 16u * ks));
            wgmma_commit();
            wgmma_wait();
            wg_pin(sacc);

            // 3. online softmax per head (column; smx: its form): mask the keys past nk, the column
            // max over this thread's two rows, the lanes of the column (g), then the group's 4 warps.
            // One head at a time, so that at 32 heads little more than O^T, S^T, m and l is live at once
            const bool in0 = r0 < nk, in1 = r0 + 8 < nk;
#pragma unroll
            for (int j = 0; j < HB / 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    sacc[4 * j + e] = in0 ? smx.score(sacc[4 * j + e]) : neg_inf();
                    sacc[4 * j + 2 + e] = in1 ? smx.score(sacc[4 * j + 2 + e]) : neg_inf();
                    float mx = fmaxf(sacc[4 * j + e], sacc[4 * j + 2 + e]);
#pragma unroll
                    for (int o = 4; o < 32; o *= 2)
                        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
                    if (g == 0)
                        xch[(4 * wg + wl) * HB + 8 * j + 2 * t4 + e] = mx;
                }
            // barrier 1 + wg: the group's column maxima; every warp's S^T reads of the tile's rope
            // columns are done (P^T overwrites them). xch's readers of the previous tile passed
            // its second barrier.
            group_sync();
            // per head: the new m, the factor c of the old O^T and l (O^T rescaled here: the tensor
            // cores are done with it), P^T in bf16. Always rescaled: the 64-128-head loop's lazy
            // reference (skipping the rescale where c is 1; ptxas kept the wgmmas unserialized) was
            // 2% slower here at 32 heads x 128 rows (tests/bench/RESULTS.md, tenth session)
            // a head's l, its P^T (keys r0 and r0 + 8: two core matrices) and its O^T rescaled
            const auto finish_head = [&](int j, int e, float c, float p0, float p1) {
                const int h = 2 * j + e;
                lsh[h * NG] = lsh[h * NG] * c + (p0 + p1);
                const uint32_t p01 = bf16x2(p0, p1);
                st_shared_u16(pt + 2u * (64 * j + 8 * e), (uint16_t)p01);
                st_shared_u16(pt + 2u * (64 * j + 8 * e + KV / 8 * 64), (uint16_t)(p01 >> 16));
#pragma unroll
                for (int b = 0; b < OB; b++)
                    oacc[b][4 * j + e] *= c, oacc[b][4 * j + 2 + e] *= c;
            };
            // a head's new m: its old m and the 4 warps' column maxima of this tile
            const auto new_m = [&](int head, float mo) {
                float mn = mo;
#pragma unroll
                for (int w = 0; w < 4; w++)
                    mn = fmaxf(mn, xch[(4 * wg + w) * HB + head]);
                return mn;
            };
            if constexpr (HB == 16) {
                // At 16 heads one pass a head: the 32-head order below (every head's new m first)
                // and a three-pass form were 1-5 us slower at 16 heads x 128 rows on the H100
                // (tests/bench/RESULTS.md, fifty-fifth session)
#pragma unroll
                for (int j = 0; j < HB / 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int head = 8 * j + 2 * t4 + e;
                        const float mo = msh[par * HB + head];
                        const float mn = new_m(head, mo);
                        const float c = smx.correction(mo, mn);
                        if (wl == 0 && g == 0)
                            msh[(1 - par) * HB + head] = mn;
                        // the scaled form's exponentials (OnlineSoftmax says why they are here)
                        const float p0 = mn == neg_inf() ? 0.0f : __expf(sacc[4 * j + e] - mn);
                        const float p1 = mn == neg_inf() ? 0.0f : __expf(sacc[4 * j + 2 + e] - mn);
                        finish_head(j, e, c, p0, p1);
                    }
            } else {
                // First every head's new m (reads of shared memory only), then the rest: with the
                // head's stores (its m, l and P^T) before the next head's reads, each head's five
                // reads waited for the head before, a chain of latencies a head (the old m is read
                // again below: one read, where keeping it too spilled at 32 heads)
                float mx[NH];
#pragma unroll
                for (int j = 0; j < HB / 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int h = 2 * j + e, head = 8 * j + 2 * t4 + e;
                        mx[h] = new_m(head, msh[par * HB + head]);
                    }
#pragma unroll
                for (int j = 0; j < HB / 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int h = 2 * j + e, head = 8 * j + 2 * t4 + e;
                        const float mn = mx[h];
                        const float c = smx.correction(msh[par * HB + head], mn);
                        if (wl == 0 && g == 0)
                            msh[(1 - par) * HB + head] = mn;
                        const float b = smx.bias(mn);
                        const float p0 = smx.p(sacc[4 * j + e], b), p1 = smx.p(sacc[4 * j + 2 + e], b);
                        finish_head(j, e, c, p0, p1);
                    }
            }
            fence_proxy_async(); // P^T is read by the tensor cores
            group_sync(); // barrier 1 + wg, again: P^T of the whole tile

            // 4. O^T += V^T P^T
#pragma unroll
            for (int b = 0; b < OB; b++)
                wg_pin(oacc[b]);
            wgmma_fence();
            // A = V^T, dims 64 b.. of the tile's latent columns read M-major (8-dim groups 128 bytes
            // apart, 8-key groups SBO); B = P^T in the rope columns (K-major: 8-key groups SBO apart,
            // 8-head groups 128 bytes)
            const uint64_t va = wg_desc(kt, SBO, 128u), pb = wg_desc(kt + (uint32_t)(LAT / 8 * 128), SBO, 128u);
#pragma unroll
            for (int kk = 0; kk < KT / 16; kk++)
#pragma unroll
                for (int b = 0; b < OB; b++)
                    wgmma_t<HB, 1, 0>(oacc[b], wg_desc_at(va, (1024u * b + 2u * SBO * kk) / 16),
                                      wg_desc_at(pb, 2u * SBO * kk / 16));
            wgmma_commit();
            wgmma_wait();
#pragma unroll
            for (int b = 0; b < OB; b++)
                wg_pin(oacc[b]);
            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
        }
    }

    // The merge of the two groups, each head's m = max(m_0, m_1), l = l_0 c_0 + l_1 c_1 (c_i =
    // exp(scale (m_i - m)), smx.weight), O = O_0 f_0 + O_1 f_1 (f_i = c_i / l), always in this
    // order. Each group writes its O^T as it stands, as rows of heads in its own key tile (obuf_g:
    // no longer read by the tensor cores, nor written by the producer, once the group has consumed
    // every tile in it), with its l (summed over its lanes, written per warp into xch) and m (in
    // msh, at the parity after its last tile; group g took (u + 1 - g) / 2 tiles), before the
    // groups meet: the group of the earlier last tile (group 0 at an even count of tiles) writes
    // while the other computes its last, which then runs the code just fetched (at 1-2 tiles a CTA
    // the end runs once per CTA, and fetching its code is much of its cost). A group's warps first
    // meet on its barrier 1 + wg: a thread's wgmma_wait covers its own warp's part of the group's
    // last MMA, not the other warps' reads of the tile the rows overwrite. Group 1 writes nothing
    // when it took no tile (u < 2: a CTA of one tile, its m is -inf, f_1 = 0). The groups meet on
    // the mbarrier done (256 arrivals a phase, each a release; the waits acquire), not on a named
    // barrier: they arrive here having passed different numbers of barriers 1 and 2 (at one tile a
    // CTA, group 1 none), and racecheck did not take a 256-thread bar.sync as ordering group 0's
    // writes before group 1's reads. Phase 0: the rows, l and m. Then group 0's first HB threads
    // form each head's f_0, f_1 and LSE; phase 1: the factors. Then the 256 consumer threads store
    // O in items of 4 dims, two of a thread's at once, in a loop (the code it fetches is its cost;
    // the loop says why two).
    float l[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {
        l[h] = lsh[h * NG];
#pragma unroll
        for (int o = 4; o < 32; o *= 2)
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], o);
    }
    if (g == 0)
#pragma unroll
        for (int j = 0; j < HB / 8; j++)
            *reinterpret_cast<float2 *>(xch + (4 * wg + wl) * HB + 8 * j + 2 * t4) = make_float2(l[2 * j], l[2 * j + 1]);
    constexpr int OP = Lay::OP;
    static_assert(OP >= LAT + 1, "a head's row of O has room for its LSE");
    float *const obuf0 = reinterpret_cast<float *>(sm.k_s + Lay::key_tile_off(0));
    float *const obuf1 = reinterpret_cast<float *>(sm.k_s + Lay::key_tile_off(1));
    const bool both = u >= 2; // group 1 took a tile
    if (wg == 0 || both) {
        group_sync(); // every warp of the group done with its key tile (above)
        // (head 8 j + 2 t4 + e, dim 64 b + r0 + 8 r) at mine + (8 j + e) OP + 64 b + 8 r
        float *const mine = (wg == 0 ? obuf0 : obuf1) + 2 * t4 * OP + r0;
#pragma unroll
        for (int j = 0; j < HB / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++)
#pragma unroll
                for (int b = 0; b < OB; b++)
#pragma unroll
                    for (int r = 0; r < 2; r++)
                        mine[(8 * j + e) * OP + 64 * b + 8 * r] = oacc[b][4 * j + 2 * r + e];
    }
    mbar_arrive(done);
    mbar_wait(done, 0);
    // launched in clusters of the row's split CTAs (the runtime's choice, attend_cluster_merge; only
    // where the store has that path, Store::cluster_merges): they merge the row among themselves, no
    // partial leaves the cluster
    const int nsplit = Store::cluster_merges ? (int)cluster_size() : 1;
    const bool clustered = nsplit > 1;
    // [2][HB]: each head's f_0, f_1, in the l shares' place (every thread read its own into l above,
    // before its arrival)
    float *const fsh = sm.m_s + 12 * HB;
    if (th.tid < HB) {
        const int head = th.tid;
        const float m0 = sm.m_s[2 * 4 * HB + (u + 1) / 2 % 2 * HB + head];
        const float m1 = sm.m_s[2 * 4 * HB + 2 * HB + u / 2 % 2 * HB + head];
        const float mm = fmaxf(m0, m1);
        float l0 = 0.0f, l1 = 0.0f;
#pragma unroll
        for (int w = 0; w < 4; w++)
            l0 += xch[w * HB + head], l1 += xch[(4 + w) * HB + head];
        const float c0 = smx.weight(m0, mm), c1 = smx.weight(m1, mm);
        const float lt = l0 * c0 + l1 * c1;
        // f = 0: the row 0, the empty head (OnlineSoftmax::lse) included
        fsh[head] = lt > 0.0f ? c0 * (1.0f / lt) : 0.0f;
        fsh[HB + head] = lt > 0.0f ? c1 * (1.0f / lt) : 0.0f;
        // the LSE (natural log; -inf for a head with no kept key): for the cluster's merge beside
        // the head's row of O, in its padding; otherwise stored (d = -1)
        if (clustered)
            obuf0[head * OP + LAT] = smx.lse(mm, lt);
        else
            store(head, -1, smx.lse(mm, lt), 0.0f);
    }
    mbar_arrive(done);
    mbar_wait(done, 1);
    const auto scaled = [](float4 v, float f) {
        return f != 0.0f ? make_float4(v.x * f, v.y * f, v.z * f, v.w * f) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    // Items of 4 dims of a head's row, two of a thread's at once: an item's reads, products and
    // conversion are a chain of dependent latencies (~250 ns an item on an H100 with two consumer
    // warps a scheduler to hide them, 8 items a thread at 16 heads, 16 at 32: tests/bench/RESULTS.md,
    // fifty-fourth session), so each iteration keeps two chains in flight. Both items are read
    // before either is written (the cluster's path writes the rows back in place). WHOLE: every
    // thread's iterations take two items (kv_lora_rank a multiple of 128 at 16 heads, of 64 at
    // 32); else a thread's last second item may lie past the rows: it reads the first's place
    // instead, and stores nothing.
    constexpr int ITEMS = HB * (LAT / 4);
    constexpr bool WHOLE = ITEMS % (4 * NG) == 0;
    const auto item = [](int i, int &head, int &d) { head = i / (LAT / 4), d = 4 * (i % (LAT / 4)); };
#pragma unroll 1
    for (int i0 = wg * NG + gt; i0 < ITEMS; i0 += 4 * NG) {
        float4 o[2];
#pragma unroll
        for (int k = 0; k < 2; k++) {
            int head, d;
            item(WHOLE || i0 + 2 * NG * k < ITEMS ? i0 + 2 * NG * k : i0, head, d);
            o[k] = scaled(*reinterpret_cast<const float4 *>(obuf0 + head * OP + d), fsh[head]);
            if (both) {
                const float4 o1 = scaled(*reinterpret_cast<const float4 *>(obuf1 + head * OP + d), fsh[HB + head]);
                o[k].x += o1.x, o[k].y += o1.y, o[k].z += o1.z, o[k].w += o1.w;
            }
        }
#pragma unroll
        for (int k = 0; k < 2; k++) {
            if (!WHOLE && i0 + 2 * NG * k >= ITEMS)
                break;
            int head, d;
            item(i0 + 2 * NG * k, head, d);
            if (clustered) {
                *reinterpret_cast<float4 *>(obuf0 + head * OP + d) = o[k];
            } else {
                store.four(head, d, o[k]);
            }
        }
    }
    if constexpr (Store::cluster_merges)
        if (clustered)
            cluster_merge<HB, LAT, OP>(smem_addr(obuf0), nsplit, wg * NG + gt, store);
}

} // namespace dsa
