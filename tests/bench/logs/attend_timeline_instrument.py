# throwaway (run in the tree root of a copy, e.g. on the device before `ninja gpu`; it patches
# kernels/ only, which libdsa embeds, so the carried .bench-out needs no new render). Patch points of
# 471d8be and later (the keys first). %globaltimer stamps of row 0's sparse MLA CTAs at 16 heads per
# CTA, every split z: the CTA's start, the first compaction and Q formed (consumer thread 0), the
# producers' first loads issued and each tile's full arrival (per producer half), and per tile u < 4
# of the consumer group that takes it: its full wait over, S^T done, P^T written (the softmax), and
# its empty arrival (O^T done); the end's two phases (consumer thread 0), its first and last partial
# store and the CTA's end; and the split merge CTA (0, 0)'s start, LSE barrier and end. The
# merge CTA prints them at the 8th call of each row count (past the warm-up), in ns from the earliest
# CTA start, min..max over the splits; a stamp outside [that start, + 100 ms] is another call's and
# is not counted (the first version's garbage). All stamps are cleared at every merge.
# Then: python3 tests/bench/bench_attend.py --line X | grep XA   (rows 1, 8, 64; 128 rows run no split
# and print nothing).
from instrument_patch import patch

G = '''namespace dsa {
__device__ __forceinline__ unsigned long long xa_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// [split]: start, first compaction, Q formed, end; [split][half]: producers' first loads issued
__device__ unsigned long long xa_wait[64], xa_cmp[64], xa_q[64], xa_end[64], xa_pld[64][2];
// [split]: the end's two phases over (consumer thread 0: done phase 0, done phase 1), its first and
// last partial store issued; the merge CTA's LSE barrier passed
__device__ unsigned long long xa_d0[64], xa_d1[64], xa_st0[64], xa_st1[64], xa_mlse;
// [split][tile < 4]: consumer stamps; [split][tile][half]: the producers' full arrival
__device__ unsigned long long xa_f[64][4], xa_s[64][4], xa_p[64][4], xa_e[64][4], xa_put[64][4][2];
__device__ int xa_seen[1025];
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
        const int nt = p.num_tokens < 1024 ? p.num_tokens : 1024;
        if (++xa_seen[nt] == 8) {
            const int zs = p.splits < 64 ? p.splits : 64;
            unsigned long long o = ~0ull;
            for (int z = 0; z < zs; z++) o = xa_wait[z] && xa_wait[z] < o ? xa_wait[z] : o;
            // min..max of v[z * stride] - o over the splits, stamps of this call only
            const auto rng = [&](const unsigned long long *v, int stride, long long &lo, long long &hi) {
                lo = -1, hi = -1;
                for (int z = 0; z < zs; z++) {
                    const unsigned long long x = v[z * stride];
                    if (x < o || x - o > 100000000ull) continue;
                    const long long d = (long long)(x - o);
                    lo = lo < 0 || d < lo ? d : lo;
                    hi = d > hi ? d : hi;
                }
            };
            long long a0, a1;
            printf("XA rows %d splits %d (ns from the first CTA start; min..max over splits; -1: none)\\n", p.num_tokens, p.splits);
            if (o == ~0ull) printf("XA   no attend stamps\\n");
            rng(xa_wait, 1, a0, a1); printf("XA   start %lld..%lld", a0, a1);
            rng(xa_cmp, 1, a0, a1); printf(" | compacted %lld..%lld", a0, a1);
            rng(&xa_pld[0][0], 2, a0, a1); printf(" | loads issued h0 %lld..%lld", a0, a1);
            rng(&xa_pld[0][1], 2, a0, a1); printf(" h1 %lld..%lld", a0, a1);
            rng(xa_q, 1, a0, a1); printf(" | Q formed %lld..%lld", a0, a1);
            rng(xa_d0, 1, a0, a1); printf(" | end: phase 0 %lld..%lld", a0, a1);
            rng(xa_d1, 1, a0, a1); printf(" phase 1 %lld..%lld", a0, a1);
            rng(xa_st0, 1, a0, a1); printf(" first store %lld..%lld", a0, a1);
            rng(xa_st1, 1, a0, a1); printf(" last store %lld..%lld", a0, a1);
            rng(xa_end, 1, a0, a1); printf(" | CTA end %lld..%lld", a0, a1);
            printf(" | merge CTA (0, 0) %lld..%lld, its LSE barrier %lld\\n", o == ~0ull ? -1ll : (long long)(xw - o), o == ~0ull ? -1ll : (long long)(xe - o),
                   o == ~0ull || xa_mlse < o ? -1ll : (long long)(xa_mlse - o));
            for (int k = 0; k < 4; k++) {
                printf("XA   tile %d:", k);
                rng(&xa_put[0][k][0], 8, a0, a1); printf(" put h0 %lld..%lld", a0, a1);
                rng(&xa_put[0][k][1], 8, a0, a1); printf(" h1 %lld..%lld", a0, a1);
                rng(&xa_f[0][k], 4, a0, a1); printf(" | full seen %lld..%lld", a0, a1);
                rng(&xa_s[0][k], 4, a0, a1); printf(" | S done %lld..%lld", a0, a1);
                rng(&xa_p[0][k], 4, a0, a1); printf(" | P written %lld..%lld", a0, a1);
                rng(&xa_e[0][k], 4, a0, a1); printf(" | O done %lld..%lld\\n", a0, a1);
            }
        }
        for (int z = 0; z < 64; z++) {
            xa_wait[z] = xa_cmp[z] = xa_q[z] = xa_end[z] = xa_pld[z][0] = xa_pld[z][1] = 0;
            xa_d0[z] = xa_d1[z] = xa_st0[z] = xa_st1[z] = 0;
            for (int k = 0; k < 4; k++) xa_f[z][k] = xa_s[z][k] = xa_p[z][k] = xa_e[z][k] = xa_put[z][k][0] = xa_put[z][k][1] = 0;
        }
    }
}'''),
])

patch('kernels/dsa_merge.cuh', [
('''        lse_s[tid] = (x != x || x == -neg_inf()) ? neg_inf() : x;
    }
    __syncthreads();
''', '''        lse_s[tid] = (x != x || x == -neg_inf()) ? neg_inf() : x;
    }
    __syncthreads();
    if (blockIdx.x == 0 && blockIdx.y == 0 && tid == 0)
        xa_mlse = xa_now();
'''),
])

patch('kernels/dsa_attend.cuh', [
('''template <class C> __device__ __forceinline__ void attend(const dsa_attend_params &p)
{
    constexpr int HB = C::attend_heads_per_cta;''', '''template <class C> __device__ __forceinline__ void attend(const dsa_attend_params &p)
{
    constexpr int HB = C::attend_heads_per_cta;
    if (xa_on(HB) && threadIdx.x == 0)
        xa_wait[blockIdx.z] = xa_now();'''),
])

patch('kernels/dsa_wgmma_t.cuh', [
('''        if (seg0 == 0)
            form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
''', '''        if (xa_on(HB) && th.tid == 0 && seg0 == 0)
            xa_cmp[blockIdx.z] = xa_now();
        if (seg0 == 0)
            form_q(); // Q in q_s, while the producers' first loads are in flight (sparse_mla)
        if (xa_on(HB) && th.tid == 0 && seg0 == 0)
            xa_q[blockIdx.z] = xa_now();
'''),
('''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
''', '''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            if (xa_on(HB) && gt == 0 && u < 4)
                xa_f[blockIdx.z][u] = xa_now();
'''),
('''            wgmma_wait();
            wg_pin(sacc);
''', '''            wgmma_wait();
            wg_pin(sacc);
            if (xa_on(HB) && gt == 0 && u < 4)
                xa_s[blockIdx.z][u] = xa_now();
'''),
('''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
''', '''            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
            if (xa_on(HB) && gt == 0 && u < 4)
                xa_p[blockIdx.z][u] = xa_now();
'''),
('''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
''', '''            mbar_arrive(empty0 + 8 * wg); // this thread's reads of the tile are done: the producer may refill it
            if (xa_on(HB) && gt == 0 && u < 4)
                xa_e[blockIdx.z][u] = xa_now();
'''),
('''    mbar_arrive(done);
    mbar_wait(done, 0);
''', '''    mbar_arrive(done);
    mbar_wait(done, 0);
    if (xa_on(HB) && th.tid == 0)
        xa_d0[blockIdx.z] = xa_now();
'''),
('''    mbar_arrive(done);
    mbar_wait(done, 1);
#pragma unroll 1
''', '''    mbar_arrive(done);
    mbar_wait(done, 1);
    if (xa_on(HB) && th.tid == 0)
        xa_d1[blockIdx.z] = xa_now();
#pragma unroll 1
'''),
('''        store(head, d, o.x, o.y);
        store(head, d + 2, o.z, o.w);
    }
}''', '''        if (xa_on(HB) && th.tid == 0 && i == 0)
            xa_st0[blockIdx.z] = xa_now();
        store(head, d, o.x, o.y);
        store(head, d + 2, o.z, o.w);
    }
    if (xa_on(HB) && th.tid == 0)
        xa_st1[blockIdx.z] = xa_end[blockIdx.z] = xa_now();
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
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && u < 4)
                    xa_put[blockIdx.z][u][half] = xa_now();
            }
        }
        return;'''),
])
print("attend timeline instrument applied")
