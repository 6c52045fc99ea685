# Throwaway (never to land; end-phase stamps added in the thirty-second session): %globaltimer stamps of one row's 16-head sparse MLA CTAs on the path
# that merges a split row in its cluster (twenty-eighth session on), for the one-row target. Run in
# the tree root of a copy (the device's working copy): it patches kernels/ (which libdsa embeds) and
# the carried .bench-out/grid_tp8_dcp1_i1_*/attend.cu (the kernel's first instruction, before its
# wait for the grid ahead), then `ninja gpu` and
#   python3 tests/bench/logs/attend_cluster_timeline_run.py
# Row 0's CTAs (every split z < 64) of a call launched in clusters stamp: kernel entry, past the
# programmatic wait, first compaction, Q formed, the producers' first loads issued and each of the
# first 16 tiles put (per half), the consumer group's full wait over / S^T done / P^T written / O^T
# done for tiles u < 16 (4 before the fortieth session, which added them for the 64-row point), the end's phase 0 and 1, the groups' sum, the cluster barrier passed, the
# merged rows stored, and the CTA's end. A call whose CTAs are not clustered stamps nothing; its
# split merge kernel's CTA (0, 0) prints the stamps of the clustered call before it, in ns from the
# earliest kernel entry (min..max over the splits), and clears them. The driver alternates the two.
from instrument_patch import patch

G = '''namespace dsa {
__device__ __forceinline__ unsigned long long xa_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// [split]: kernel entry, past the wait, compaction, Q formed, end phases 0 and 1, sum, cluster
// barrier passed, merged rows stored, CTA end; [split][half]: the producers' first loads issued
__device__ unsigned long long xa_k0[64], xa_wait[64], xa_cmp[64], xa_q[64], xa_d0[64], xa_d1[64], xa_sum[64],
    xa_cb[64], xa_ms[64], xa_end[64], xa_pld[64][2];
// [split][group]: the end's steps inside (the thirty-second session's additions): the group reaches
// the end, its l and O rows written to shared memory (raw, before the groups meet, since the
// forty-sixth session), the factors formed (one thread a head); and the cluster merge's peer reads
// returned (its LSEs combined)
__device__ unsigned long long xa_ge[64][2], xa_gl[64][2], xa_go[64][2], xa_cr[64];
// [split][tile < 16]: consumer stamps; [split][tile][half]: the producers' put done (full arrival)
__device__ unsigned long long xa_f[64][16], xa_s[64][16], xa_p[64][16], xa_e[64][16], xa_put[64][16][2];
__device__ __forceinline__ bool xa_on(int hb)
{
    unsigned int n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return hb == 16 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z < 64 && n > 1;
}
'''
patch('kernels/dsa_numerics.cuh', [('namespace dsa {\n', G)])

patch('kernels/dsa_merge.cuh', [
('''    const float total = lse_merge<L, G>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
}''',
'''    const float total = lse_merge<L, G>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
    if (C::attend_heads_per_cta == 16 && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        unsigned long long o = ~0ull;
        for (int z = 0; z < 64; z++) o = xa_k0[z] && xa_k0[z] < o ? xa_k0[z] : o;
        if (o != ~0ull) {
            const auto rng = [&](const unsigned long long *v, int stride, long long &lo, long long &hi) {
                lo = -1, hi = -1;
                for (int z = 0; z < 64; z++) {
                    const unsigned long long x = v[z * stride];
                    if (x < o || x - o > 100000000ull) continue;
                    const long long d = (long long)(x - o);
                    lo = lo < 0 || d < lo ? d : lo;
                    hi = d > hi ? d : hi;
                }
            };
            int n = 0;
            for (int z = 0; z < 64; z++) n += xa_k0[z] != 0;
            long long a0, a1;
            printf("XC %d clustered CTAs of row 0 (ns from the first entry; min..max over them; -1: none)\\n", n);
            rng(xa_k0, 1, a0, a1); printf("XC   entry %lld..%lld", a0, a1);
            rng(xa_wait, 1, a0, a1); printf(" | past the wait %lld..%lld", a0, a1);
            rng(xa_cmp, 1, a0, a1); printf(" | compacted %lld..%lld", a0, a1);
            rng(&xa_pld[0][0], 2, a0, a1); printf(" | loads issued h0 %lld..%lld", a0, a1);
            rng(&xa_pld[0][1], 2, a0, a1); printf(" h1 %lld..%lld", a0, a1);
            rng(xa_q, 1, a0, a1); printf(" | Q formed %lld..%lld\\n", a0, a1);
            for (int k = 0; k < 16; k++) {
                printf("XC   tile %d:", k);
                rng(&xa_put[0][k][0], 32, a0, a1); printf(" put h0 %lld..%lld", a0, a1);
                rng(&xa_put[0][k][1], 32, a0, a1); printf(" h1 %lld..%lld", a0, a1);
                rng(&xa_f[0][k], 16, a0, a1); printf(" | full seen %lld..%lld", a0, a1);
                rng(&xa_s[0][k], 16, a0, a1); printf(" | S done %lld..%lld", a0, a1);
                rng(&xa_p[0][k], 16, a0, a1); printf(" | P written %lld..%lld", a0, a1);
                rng(&xa_e[0][k], 16, a0, a1); printf(" | O done %lld..%lld\\n", a0, a1);
            }
            rng(&xa_ge[0][0], 2, a0, a1); printf("XC   end in: g0 %lld..%lld", a0, a1);
            rng(&xa_ge[0][1], 2, a0, a1); printf(" g1 %lld..%lld", a0, a1);
            rng(&xa_gl[0][0], 2, a0, a1); printf(" | l and O rows written g0 %lld..%lld", a0, a1);
            rng(&xa_gl[0][1], 2, a0, a1); printf(" g1 %lld..%lld", a0, a1);
            rng(&xa_go[0][0], 2, a0, a1); printf(" | factors formed g0 %lld..%lld", a0, a1);
            rng(&xa_go[0][1], 2, a0, a1); printf(" g1 %lld..%lld", a0, a1);
            rng(xa_cr, 1, a0, a1); printf(" | peers read %lld..%lld\\n", a0, a1);
            rng(xa_d0, 1, a0, a1); printf("XC   end: phase 0 %lld..%lld", a0, a1);
            rng(xa_d1, 1, a0, a1); printf(" | phase 1 %lld..%lld", a0, a1);
            rng(xa_sum, 1, a0, a1); printf(" | sum %lld..%lld", a0, a1);
            rng(xa_cb, 1, a0, a1); printf(" | cluster barrier %lld..%lld", a0, a1);
            rng(xa_ms, 1, a0, a1); printf(" | merged stored %lld..%lld", a0, a1);
            rng(xa_end, 1, a0, a1); printf(" | CTA end %lld..%lld\\n", a0, a1);
        }
        for (int z = 0; z < 64; z++) {
            xa_k0[z] = xa_wait[z] = xa_cmp[z] = xa_q[z] = xa_d0[z] = xa_d1[z] = xa_sum[z] = xa_cb[z] = xa_ms[z] = xa_end[z] = 0;
            xa_pld[z][0] = xa_pld[z][1] = 0;
            xa_ge[z][0] = xa_ge[z][1] = xa_gl[z][0] = xa_gl[z][1] = xa_go[z][0] = xa_go[z][1] = xa_cr[z] = 0;
            for (int k = 0; k < 16; k++) xa_f[z][k] = xa_s[z][k] = xa_p[z][k] = xa_e[z][k] = xa_put[z][k][0] = xa_put[z][k][1] = 0;
        }
    }
}'''),
])

patch('kernels/dsa_attend.cuh', [
('''    constexpr int HB = C::attend_heads_per_cta;
    extern __shared__ __align__(16) uint8_t smem[];''', '''    constexpr int HB = C::attend_heads_per_cta;
    extern __shared__ __align__(16) uint8_t smem[];
    if (xa_on(HB) && threadIdx.x == 0)
        xa_wait[blockIdx.z] = xa_now();'''),
])

patch('kernels/dsa_wgmma_t.cuh', [
('''    form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
''', '''    if (xa_on(HB) && th.tid == 0)
        xa_cmp[blockIdx.z] = xa_now();
    form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
    if (xa_on(HB) && th.tid == 0)
        xa_q[blockIdx.z] = xa_now();
'''),
('''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
''', '''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            if (xa_on(HB) && gt == 0 && u < 16)
                xa_f[blockIdx.z][u] = xa_now();
'''),
('''            wgmma_wait();
            wg_pin(sacc);
''', '''            wgmma_wait();
            wg_pin(sacc);
            if (xa_on(HB) && gt == 0 && u < 16)
                xa_s[blockIdx.z][u] = xa_now();
'''),
('''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
''', '''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
            if (xa_on(HB) && gt == 0 && u < 16)
                xa_p[blockIdx.z][u] = xa_now();
'''),
('''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
''', '''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
            if (xa_on(HB) && gt == 0 && u < 16)
                xa_e[blockIdx.z][u] = xa_now();
'''),
('''    mbar_arrive(done);
    mbar_wait(done, 0);
''', '''    if (xa_on(HB) && gt == 0)
        xa_gl[blockIdx.z][wg] = xa_now();
    mbar_arrive(done);
    mbar_wait(done, 0);
    if (xa_on(HB) && th.tid == 0)
        xa_d0[blockIdx.z] = xa_now();
'''),
('''    float l[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {
        l[h] = lsh[h * NG];''', '''    if (xa_on(HB) && gt == 0)
        xa_ge[blockIdx.z][wg] = xa_now();
    float l[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {
        l[h] = lsh[h * NG];'''),
('''    mbar_arrive(done);
    mbar_wait(done, 1);
''', '''    if (xa_on(HB) && gt == 0)
        xa_go[blockIdx.z][wg] = xa_now();
    mbar_arrive(done);
    mbar_wait(done, 1);
    if (xa_on(HB) && th.tid == 0)
        xa_d1[blockIdx.z] = xa_now();
'''),
('''    if constexpr (Store::cluster_merges)
        if (clustered)
            cluster_merge<HB, LAT, OP>(smem_addr(obuf0), nsplit, wg * NG + gt, store);
}''', '''    if (xa_on(HB) && th.tid == 0)
        xa_sum[blockIdx.z] = xa_now();
    if constexpr (Store::cluster_merges)
        if (clustered)
            cluster_merge<HB, LAT, OP>(smem_addr(obuf0), nsplit, wg * NG + gt, store);
    if (xa_on(HB) && th.tid == 0)
        xa_end[blockIdx.z] = xa_now();
}'''),
('''    const bool on = tt < LAT / 4;
    cluster_sync();
''', '''    const bool on = tt < LAT / 4;
    cluster_sync();
    if (xa_on(HB) && ct == 0)
        xa_cb[blockIdx.z] = xa_now();
'''),
('''    const float total = merge_lse_total<S>(S, [&](int r) { return lw[r]; });
    uint32_t live = 0;''', '''    const float total = merge_lse_total<S>(S, [&](int r) { return lw[r]; });
    if (xa_on(HB) && ct == 0) {
        float xs = total;
#pragma unroll
        for (int r = 0; r < S; r++)
#pragma unroll
            for (int it = 0; it < IT; it++)
                xs += x[r][it].x; // every peer read returned
        if (xs != 12345.0f)
            xa_cr[blockIdx.z] = xa_now();
    }
    uint32_t live = 0;'''),
('''    if (tt == 0)
        store.merged(head, -1, total, 0.0f);
    cluster_sync();
}''', '''    if (tt == 0)
        store.merged(head, -1, total, 0.0f);
    if (xa_on(HB) && ct == 0)
        xa_ms[blockIdx.z] = xa_now();
    cluster_sync();
}'''),
])

patch('kernels/dsa_wgmma.cuh', [
('''            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (Pair && seg0 == 0)''', '''            if (n > 0)
                a.load(cache, sm.list, 0, half, n);
            if (xa_on(Lay::heads) && th.tid % 128 == 0 && seg0 == 0)
                xa_pld[blockIdx.z][half] = xa_now();
            if (Pair && seg0 == 0)'''),
('''                else
                    mbar_arrive(full0 + 8 * buf);
            }
        }
        return;''', '''                else
                    mbar_arrive(full0 + 8 * buf);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && u < 16)
                    xa_put[blockIdx.z][u][half] = xa_now();
            }
        }
        return;'''),
])

# the kernel's first instruction: the generated entry of the benchmark's 16-head configurations
import glob
for f in glob.glob('.bench-out/grid_tp8_dcp1_i1_*/attend.cu'):
    patch(f, [('''{
    dsa::after_prior_grid();
    dsa::attend<C>(p);
}''', '''{
    if (dsa::xa_on(C::attend_heads_per_cta) && threadIdx.x == 0)
        dsa::xa_k0[blockIdx.z] = dsa::xa_now();
    dsa::after_prior_grid();
    dsa::attend<C>(p);
}''')])
    # the plan records each source's SHA-256 (plan format 4): give it the patched file's
    import hashlib, os, re
    plan = os.path.join(os.path.dirname(f), 'plan.txt')
    digest = hashlib.sha256(open(f, 'rb').read()).hexdigest()
    text = open(plan).read()
    text = re.sub(r'(?m)^source attend\.cu [0-9a-f]{64}$', 'source attend.cu ' + digest, text)
    text = re.sub(r'(?m)^plan-sha256 [0-9a-f]{64}\n', '', text)  # and the plan's seal, over the rest
    open(plan, 'w').write(text + 'plan-sha256 ' + hashlib.sha256(text.encode()).hexdigest() + '\n')
print("attend cluster timeline instrument applied")
