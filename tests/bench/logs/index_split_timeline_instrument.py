"""Measurement only (issue 14): where one row's split top-k goes (rows of more than 16K keys: 1 x 32K
takes 16 CTAs of 2,048 keys). Like index_chain_timeline_instrument.py's light mode, only thread 0
of CTA (0, 0) of each kernel stamps, with plain stores of the GPU's global timer (ns), but the
top-k stamped is index_topk_split's, and the line is printed by its CTA (0, 0) at its end. Patches
kernels/ in place (git checkout kernels/ to undo); then `ninja gpu` and `python3
tests/bench/bench_index.py --calls CONFIG 1 32768` print one line `XS ...` a call.

Stamps, ns from the query kernel's CTA (0, 0) past its wait (q0):
 q1 the query's CTA (0, 0) done        s1 the score CTA (0, 0) past its wait   s2 it done
 s2x the last score CTA done (every score CTA's thread 0 an atomicMax: one atomic a CTA)
 k0 the top-k's CTA (0, 0) past its wait
 c0 c1 c2 after each radix pass's row-wide bin (its barrier), -1: the passes ended before it
 g  after the gathered path's barrier (candidates stored row-wide), -1: not that path
 cp after the passes over the candidates   lb after the last barrier (LAST)
 e  the emit done   z  CTA (0, 0)'s end
"""
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')


def patch(path, pairs):
    p = os.path.join(root, path)
    s = open(p).read()
    for old, new, count in pairs:
        if s.count(old) != count:
            sys.exit(f'{path}: anchor found {s.count(old)} times, not {count}: {old[:70]!r}')
        s = s.replace(old, new)
    open(p, 'w').write(s)


TS = '''
// ---- measurement only: the split top-k's timeline (tests/bench/logs/index_split_timeline_instrument.py)
__device__ unsigned long long dsa_ts[16] = {~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, 0ull, ~0ull, ~0ull};
__device__ __forceinline__ unsigned long long ts_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
__device__ __forceinline__ void ts_set(int i)
{
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        dsa_ts[i] = ts_now();
}
'''

patch('kernels/dsa_index_select.cuh', [
    ('namespace dsa {\n', 'namespace dsa {\n' + TS, 1),
    ('''        uint32_t s = 0u;
        if (pass == 0) {
            total = counted;''', '''        ts_set(6 + pass);
        uint32_t s = 0u;
        if (pass == 0) {
            total = counted;''', 1),
    ('''        group_sync(state + St::LAST, S);
        const uint32_t mine_n''', '''        group_sync(state + St::LAST, S);
        ts_set(9);
        const uint32_t mine_n''', 1),
    ('''        kth = prefix;
        ties = (uint32_t)K - larger;''', '''        ts_set(10);
        kth = prefix;
        ties = (uint32_t)K - larger;''', 1),
    ('''    uint32_t left = 0u;
    if (threadIdx.x == 0)
        left = add_release(state + St::LEFT, 1u);''', '''    ts_set(11);
    uint32_t left = 0u;
    if (threadIdx.x == 0)
        left = add_release(state + St::LEFT, 1u);''', 1),
    ('''    const int written = (int)(total < (uint32_t)K ? total : (uint32_t)K);
    for (int64_t j = written + (int64_t)part * Threads + threadIdx.x; j < K; j += (int64_t)S * Threads)
        pad((int)j);''', '''    ts_set(12);
    const int written = (int)(total < (uint32_t)K ? total : (uint32_t)K);
    for (int64_t j = written + (int64_t)part * Threads + threadIdx.x; j < K; j += (int64_t)S * Threads)
        pad((int)j);''', 1),
])
patch('kernels/dsa_index.cuh', [
    ('''    const int t = blockIdx.x, h = blockIdx.y * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (h >= H)''', '''    const int t = blockIdx.x, h = blockIdx.y * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    ts_set(0);
    if (h >= H)''', 1),
    ('''        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));
}''', '''        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));
    __syncthreads();
    ts_set(1);
}''', 1),
    ('''        index_score_wgmma<C>(p, last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank), first);''',
     '''        index_score_wgmma<C>(p, last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank), first);
        __syncthreads();
        ts_set(3);
        if (threadIdx.x == 0)
            atomicMax(&dsa_ts[13], ts_now()); // every score CTA's thread 0: the grid's last''', 1),
    ('''    using St = SplitState<RB, Cands, K>;
    static_assert(St::bytes(C::idx_topk_split_max) == C::idx_topk_state_bytes, "the plan's row state is the kernel's layout");''',
     '''    using St = SplitState<RB, Cands, K>;
    static_assert(St::bytes(C::idx_topk_split_max) == C::idx_topk_state_bytes, "the plan's row state is the kernel's layout");
    ts_set(5);''', 1),
    ('''            keys, n, p.bit_keys, p.hist_given, p.discard_keys != 0, [&](int j, int64_t i) { out[j] = (int32_t)i; }, [&](int j) { out[j] = -1; },
            state, hist, red, cand_s, Bins ? &given : nullptr);''', '''            keys, n, p.bit_keys, p.hist_given, p.discard_keys != 0, [&](int j, int64_t i) { out[j] = (int32_t)i; }, [&](int j) { out[j] = -1; },
            state, hist, red, cand_s, Bins ? &given : nullptr);
        __syncthreads();
        if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
            unsigned long long *s = dsa_ts;
            s[14] = ts_now();
            const unsigned long long z = s[0];
            const auto d = [&](int i) { return s[i] == ~0ull || s[i] == 0ull ? -1ll : (long long)(s[i] - z); };
            printf("XS q0 0 q1 %lld s1 %lld s2 %lld s2x %lld k0 %lld c0 %lld c1 %lld c2 %lld g %lld cp %lld lb %lld e %lld z %lld splits %u\\n",
                   d(1), d(2), d(3), d(13), d(5), d(6), d(7), d(8), d(9), d(10), d(11), d(12), d(14), gridDim.y);
            for (int i = 0; i < 16; i++)
                s[i] = i == 13 ? 0ull : ~0ull;
        }''', 1),
])
patch('kernels/dsa_index_wgmma.cuh', [
    ('''    // The queries and weights below are its output.
    after_prior_grid();''', '''    // The queries and weights below are its output.
    after_prior_grid();
    ts_set(2);''', 1),
])
print('patched kernels/ for the split top-k timeline (CTA (0, 0) of each kernel, thread 0, plain stores)')
