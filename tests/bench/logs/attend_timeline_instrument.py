# throwaway (run in the tree root of a copy, e.g. on the device before `ninja gpu`; it patches
# kernels/ only, which libdsa embeds, so the carried .bench-out needs no new render): %globaltimer
# stamps of row 0's sparse MLA CTAs at 16 heads per CTA (every split z: its start after the wait for
# the kernel ahead, Q formed, first compaction, first full tile, each tile's end per consumer group,
# the producers' first loads and each tile's arrival, the end) and of the split merge's CTA (0, 0);
# that merge CTA prints them every 32nd call, in ns from the earliest CTA start.
# Then: python3 tests/bench/bench_attend.py --line X | grep XA   (16h x1 lines say "rows 1").
def patch(p, pairs):
    s = open(p).read()
    for a, b in pairs:
        assert s.count(a) == 1, (p, a)
        s = s.replace(a, b)
    open(p, 'w').write(s)

G = '''namespace dsa {
__device__ __forceinline__ unsigned long long xa_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// [split]: start (after the wait), q formed, first compaction (group 0), first full (group 0), end
__device__ unsigned long long xa_wait[64], xa_q[64], xa_cmp[64], xa_full0[64], xa_end[64];
// [split][tile < 4]: a consumer group's tile end; [split][tile < 4][producer half]: the producers' full arrival
__device__ unsigned long long xa_tile[64][4], xa_put[64][4][2], xa_pld[64][2];
__device__ unsigned long long xa_calls;
__device__ __forceinline__ bool xa_on(int hb) { return hb == 16 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z < 64; }
'''
patch('kernels/dsa_numerics.cuh', [('namespace dsa {\n', G)])

patch('kernels/dsa_merge.cuh', [
('''    const float total = lse_merge<L>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
}''',
'''    const unsigned long long xw = xa_now();
    const float total = lse_merge<L>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
    if (C::attend_heads_per_cta == 16 && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        const unsigned long long xe = xa_now();
        if (++xa_calls % 32 == 0) {
            unsigned long long o = ~0ull;
            for (int z = 0; z < p.splits && z < 64; z++) o = xa_wait[z] && xa_wait[z] < o ? xa_wait[z] : o;
            const auto rng = [&](const unsigned long long *v, int stride, unsigned long long &lo, unsigned long long &hi) {
                lo = ~0ull, hi = 0;
                for (int z = 0; z < p.splits && z < 64; z++) { const unsigned long long x = v[z * stride]; if (x) { lo = x - o < lo ? x - o : lo; hi = x - o > hi ? x - o : hi; } }
                if (lo == ~0ull) lo = 0;
            };
            unsigned long long b0, b1, c0, c1, d0, d1, e0, e1, f0, f1, g0, g1, h0, h1, t0[4], t1[4], u0[4], u1[4];
            rng(xa_wait, 1, b0, b1); rng(xa_q, 1, c0, c1); rng(xa_cmp, 1, d0, d1);
            rng(xa_full0, 1, e0, e1); rng(xa_end, 1, f0, f1); rng(&xa_pld[0][0], 2, g0, g1); rng(&xa_pld[0][1], 2, h0, h1);
            for (int k = 0; k < 4; k++) { rng(&xa_tile[0][k], 4, t0[k], t1[k]); rng(&xa_put[0][k][0], 8, u0[k], u1[k]); }
            printf("XA call %llu rows %d splits %d (ns from the first CTA start, min..max over splits): start %llu..%llu q %llu..%llu "
                   "compacted %llu..%llu full0 %llu..%llu loads issued %llu..%llu / %llu..%llu | put t0 %llu..%llu t1 %llu..%llu t2 %llu..%llu t3 %llu..%llu | "
                   "tile end t0 %llu..%llu t1 %llu..%llu t2 %llu..%llu t3 %llu..%llu | CTA end %llu..%llu | merge CTA (0, 0) start %llu end %llu\\n",
                   xa_calls, p.num_tokens, p.splits, b0, b1, c0, c1, d0, d1, e0, e1, g0, g1, h0, h1, u0[0], u1[0], u0[1], u1[1], u0[2], u1[2], u0[3], u1[3],
                   t0[0], t1[0], t0[1], t1[1], t0[2], t1[2], t0[3], t1[3], f0, f1, xw - o, xe - o);
        }
        for (int z = 0; z < 64; z++) {
            xa_wait[z] = xa_q[z] = xa_cmp[z] = xa_full0[z] = xa_end[z] = 0;
            for (int k = 0; k < 4; k++) xa_tile[z][k] = xa_put[z][k][0] = xa_put[z][k][1] = 0;
            xa_pld[z][0] = xa_pld[z][1] = 0;
        }
    }
}'''),
])

patch('kernels/dsa_attend.cuh', [
('''template <class C> __device__ __forceinline__ void attend(const dsa_attend_params &p)
{
    constexpr int HB = C::attend_heads_per_cta;''', '''template <class C> __device__ __forceinline__ void attend(const dsa_attend_params &p)
{
    constexpr int HB = C::attend_heads_per_cta;
    if (xa_on(HB) && threadIdx.x == 0)
        xa_wait[blockIdx.z] = xa_now();'''),
('''    if constexpr (Lay::WG) {
        constexpr bool Pair = Cluster == 2;''',
'''    if (xa_on(HB) && tid == 0)
        xa_q[blockIdx.z] = xa_now();
    if constexpr (Lay::WG) {
        constexpr bool Pair = Cluster == 2;'''),
])

patch('kernels/dsa_wgmma_t.cuh', [
('''        const int n = compact_segment<Lay, TOPK, Lay::threads, true>(th, sm, seg0, slot_of);
        for (int t0 = 0; t0 < n; t0 += KT, u++) {''',
'''        const int n = compact_segment<Lay, TOPK, Lay::threads, true>(th, sm, seg0, slot_of);
        if (xa_on(HB) && th.tid == 0 && seg0 == 0)
            xa_cmp[blockIdx.z] = xa_now();
        for (int t0 = 0; t0 < n; t0 += KT, u++) {'''),
('''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            // the tile's and Q's addresses''',
'''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            if (xa_on(HB) && th.tid == 0 && u == 0)
                xa_full0[blockIdx.z] = xa_now();
            // the tile's and Q's addresses'''),
('''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it''',
'''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
            if (xa_on(HB) && gt == 0 && u < 4)
                xa_tile[blockIdx.z][u] = xa_now();'''),
('''        store(head, d, o.x, o.y);
        store(head, d + 2, o.z, o.w);
    }
}''',
'''        store(head, d, o.x, o.y);
        store(head, d + 2, o.z, o.w);
    }
    if (xa_on(HB) && th.tid == 0)
        xa_end[blockIdx.z] = xa_now();
}'''),
])

patch('kernels/dsa_wgmma.cuh', [
('''            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (Pair && seg0 == 0)''',
'''            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (xa_on(Lay::heads) && th.tid % 128 == 0 && seg0 == 0)
                xa_pld[blockIdx.z][half] = xa_now();
            if (Pair && seg0 == 0)'''),
('''                else
                    mbar_arrive(full0 + 8 * buf);
            }
        }
        return;''',
'''                else
                    mbar_arrive(full0 + 8 * buf);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && u < 4)
                    xa_put[blockIdx.z][u][half] = xa_now();
            }
        }
        return;'''),
])
print("attend timeline instrument applied")
