# Throwaway (issue 15; never to land): %globaltimer stamps of every tile of two unsplit 16- or 32-head
# sparse MLA CTAs (rows 0 and 77, head group 0, a launch of one split a row: 128 rows), to see where
# a call's fixed part goes (tests/bench/RESULTS.md, fifty-fourth session: 12 us back to back, 18-19
# flushed, beside 2.3-2.4 us a tile). Stamps, in ns from the CTA's entry past its programmatic wait:
# the first compaction and Q formed (consumer thread 0); per producer half (its warpgroup's thread 0)
# the first loads issued, and per tile u its wait for a free key tile over (ew) and its put done, the
# next tile's loads issued right after (pt); per tile u the consumer group's full wait over (f), S^T
# done (s), P^T written (p), O^T done (o); the end: the groups' rows written and met (e0), and
# consumer thread 0's end (end), with k1 (before the compaction), e1 (the factors formed and met) and
# e2 (O stored) added; then s1 / s2 (sparse_mla's Q loads issued: before / after), ri (the consumers'
# registers raised) and l1 (the first iteration of the O store loop done); the producers' entry
# (their registers lowered) and their first compaction's start, per half. The split merge kernel's CTA (0, 0) prints the stamps of the last
# unsplit call (the driver runs an 8-row call after each). Run in the tree root of a copy (the device's working copy; it patches kernels/, which libdsa
# embeds), then `ninja gpu` and `python3 tests/bench/logs/attend_row_timeline_run.py`.
from instrument_patch import patch

G = '''namespace dsa {
__device__ __forceinline__ unsigned long long xr_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ unsigned long long xr_k0[2], xr_k1[2], xr_cmp[2], xr_q[2], xr_e0[2], xr_e1[2], xr_e2[2], xr_end[2], xr_ld[2][2], xr_s1[2], xr_s2[2], xr_ri[2], xr_l1[2], xr_pe[2][2], xr_pk1[2][2];
__device__ unsigned long long xr_ew[2][64][2], xr_pt[2][64][2], xr_f[2][64], xr_s[2][64], xr_p[2][64], xr_o[2][64];
__device__ unsigned int xr_calls[2];
__device__ __forceinline__ int xr_slot()
{
    if (gridDim.z != 1 || blockIdx.y != 0)
        return -1;
    return blockIdx.x == 0 ? 0 : blockIdx.x == 77 ? 1 : -1;
}
'''
patch('kernels/dsa_numerics.cuh', [('namespace dsa {\n', G)])

patch('kernels/dsa_attend.cuh', [
('''    const int t = blockIdx.x, hg0 = blockIdx.y * HB, split = blockIdx.z;
''', '''    const int t = blockIdx.x, hg0 = blockIdx.y * HB, split = blockIdx.z;
    if (threadIdx.x == 0 && xr_slot() >= 0)
        xr_k0[xr_slot()] = xr_now();
'''),
])

patch('kernels/dsa_attend.cuh', [
('''        if (tid < kAttendThreads)
            q_load();
''', '''        if (tid == 0 && xr_slot() >= 0)
            xr_s1[xr_slot()] = xr_now();
        if (tid < kAttendThreads)
            q_load();
        if (tid == 0 && xr_slot() >= 0)
            xr_s2[xr_slot()] = xr_now();
'''),
])

patch('kernels/dsa_wgmma.cuh', [
('''        int u = 0;
        if constexpr (Lay::deep && !Pair) {''', '''        int u = 0;
        const int xs = xr_slot();
        const bool xp = xs >= 0 && th.tid % 128 == 0;
        if (xp)
            xr_pe[xs][th.warp / 4 - 2 < 2 ? th.warp / 4 - 2 : 0] = xr_now();
        if constexpr (Lay::deep && !Pair) {'''),
('''            const int n = segment_producers<Lay, TOPK>(ts, sm, seg0, slot_of);
            if (n > 0)
                a.load(cache, sm.list, 0, half, n);''', '''            if (xp && seg0 == 0)
                xr_pk1[xs][half] = xr_now();
            const int n = segment_producers<Lay, TOPK>(ts, sm, seg0, slot_of);
            if (n > 0)
                a.load(cache, sm.list, 0, half, n);'''),
('''            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (Pair && seg0 == 0)''', '''            if (xp && seg0 == 0)
                xr_ld[xs][half] = xr_now();
            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (Pair && seg0 == 0)'''),
('''                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it
''', '''                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it
                if (xp && u < 64)
                    xr_ew[xs][u][half] = xr_now();
'''),
('''                if (t0 + Lay::KT < n)
                    a.load(cache, sm.list, t0 + Lay::KT, half, n);
                a.landed();''', '''                if (xp && u < 64)
                    xr_pt[xs][u][half] = xr_now();
                if (t0 + Lay::KT < n)
                    a.load(cache, sm.list, t0 + Lay::KT, half, n);
                a.landed();'''),
])

patch('kernels/dsa_wgmma_t.cuh', [
('''    regs_inc<Lay::consumer_regs>();
''', '''    regs_inc<Lay::consumer_regs>();
    const int xs = xr_slot();
    const bool xc = xs >= 0 && gt == 0;
    if (xc && wg == 0)
        xr_ri[xs] = xr_now();
'''),
('''    const int n0 = segment_consumers<Lay, TOPK>(th, sm, 0, slot_of);
    form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
''', '''    if (xc && wg == 0)
        xr_k1[xs] = xr_now();
    const int n0 = segment_consumers<Lay, TOPK>(th, sm, 0, slot_of);
    if (xc && wg == 0)
        xr_cmp[xs] = xr_now();
    form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
    if (xc && wg == 0)
        xr_q[xs] = xr_now();
'''),
('''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
''', '''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            if (xc && u < 64)
                xr_f[xs][u] = xr_now();
'''),
('''            wgmma_commit();
            wgmma_wait();
            wg_pin(sacc);
''', '''            wgmma_commit();
            wgmma_wait();
            wg_pin(sacc);
            if (xc && u < 64)
                xr_s[xs][u] = xr_now();
'''),
('''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
''', '''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
            if (xc && u < 64)
                xr_p[xs][u] = xr_now();
'''),
('''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
''', '''            if (xc && u < 64)
                xr_o[xs][u] = xr_now();
            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
'''),
('''    mbar_arrive(done);
    mbar_wait(done, 0);
''', '''    mbar_arrive(done);
    mbar_wait(done, 0);
    if (xc && wg == 0)
        xr_e0[xs] = xr_now();
'''),
('''    mbar_arrive(done);
    mbar_wait(done, 1);
''', '''    mbar_arrive(done);
    mbar_wait(done, 1);
    if (xc && wg == 0)
        xr_e1[xs] = xr_now();
'''),
('''    if constexpr (Store::cluster_merges)
        if (clustered)
            cluster_merge<HB, LAT, OP>(smem_addr(obuf0), nsplit, wg * NG + gt, store);
}''', '''    if (xc && wg == 0)
        xr_e2[xs] = xr_now();
    if constexpr (Store::cluster_merges)
        if (clustered)
            cluster_merge<HB, LAT, OP>(smem_addr(obuf0), nsplit, wg * NG + gt, store);
    if (xc && wg == 0) {
        xr_end[xs] = xr_now();
        xr_calls[xs] = (unsigned)u; // the tiles of the call stamped last
    }
}'''),
])

# the print: the split merge kernel's CTA (0, 0) thread 0, at every call (the driver runs one split call
# of 8 rows after each stamped call: printf in the attend kernel made ptxas serialize its warpgroup MMAs)
patch('kernels/dsa_merge.cuh', [
('''    const float total = lse_merge<L, G>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
}''', '''    const float total = lse_merge<L, G>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        for (int xs = 0; xs < 2; xs++) {
            const unsigned long long o = xr_k0[xs];
            const auto d = [o](unsigned long long x) { return x >= o ? (long long)(x - o) : -1ll; };
            const int u = (int)xr_calls[xs];
            printf("XR cta %d s1 %lld s2 %lld ri %lld l1 %lld | producers entered %lld %lld, compaction begun %lld %lld\\n", xs,
                   d(xr_s1[xs]), d(xr_s2[xs]), d(xr_ri[xs]), d(xr_l1[xs]), d(xr_pe[xs][0]), d(xr_pe[xs][1]),
                   d(xr_pk1[xs][0]), d(xr_pk1[xs][1]));
            printf("XR cta %d tiles %d: k1 %lld cmp %lld q %lld loads %lld %lld e0 %lld e1 %lld e2 %lld end %lld\\n", xs, u,
                   d(xr_k1[xs]), d(xr_cmp[xs]), d(xr_q[xs]), d(xr_ld[xs][0]), d(xr_ld[xs][1]), d(xr_e0[xs]),
                   d(xr_e1[xs]), d(xr_e2[xs]), d(xr_end[xs]));
            for (int v = 0; v < u && v < 64; v++)
                printf("XR cta %d u %d: ew %lld %lld pt %lld %lld | f %lld s %lld p %lld o %lld\\n", xs, v,
                       v >= 2 ? d(xr_ew[xs][v][0]) : 0ll, v >= 2 ? d(xr_ew[xs][v][1]) : 0ll, d(xr_pt[xs][v][0]),
                       d(xr_pt[xs][v][1]), d(xr_f[xs][v]), d(xr_s[xs][v]), d(xr_p[xs][v]), d(xr_o[xs][v]));
        }
}'''),
])

# l1 (the first item of the O store loop done), where the loop takes one item an iteration (the
# two-item loop of attend_end_two_items_f2a7c5b.patch has no such point: l1 then prints -1)
if """            store(head, d + 2, o.z, o.w);
        }
    }
""" in open('kernels/dsa_wgmma_t.cuh').read():
    patch('kernels/dsa_wgmma_t.cuh', [
('''            store(head, d + 2, o.z, o.w);
        }
    }
''', '''            store(head, d + 2, o.z, o.w);
        }
        if (xc && wg == 0 && i == 0)
            xr_l1[xs] = xr_now();
    }
'''),
    ])

# the deep producer's stamps (nvfp4 at 16 heads; fp8 with attend_deep_fp8_*.patch): its wait for a
# free key tile (ew) and its put done (pt), and its first loads, where the deep branch is compiled
_w = open('kernels/dsa_wgmma.cuh').read()
_deep = [
('''                if (u >= 2)
                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2);
                s.put(cache, sm.list, t0, half, n, k);
''', '''                if (u >= 2)
                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2);
                if (xp && u < 64)
                    xr_ew[xs][u][half] = xr_now();
                s.put(cache, sm.list, t0, half, n, k);
                if (xp && u < 64)
                    xr_pt[xs][u][half] = xr_now();
'''),
('''                if (n > 0)
                    a.load(cache, sm.list, 0, half, n);
                if (n > Lay::KT)''', '''                if (xp && seg0 == 0)
                    xr_ld[xs][half] = xr_now();
                if (n > 0)
                    a.load(cache, sm.list, 0, half, n);
                if (n > Lay::KT)'''),
]
if all(a in _w for a, _ in _deep):
    patch('kernels/dsa_wgmma.cuh', _deep)
