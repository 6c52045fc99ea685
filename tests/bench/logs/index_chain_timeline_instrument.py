"""Measurement only (issue 14; its anchors are ed15a8e's): stamps one short index call's chain of
three kernels with the GPU's global timer (ns), and the score grid's size (grid), to see where one row's ~10-12 us goes. Patches kernels/ in place (git checkout
kernels/ to undo); then `ninja gpu` and `python3 tests/bench/bench_index.py --calls CONFIG 1 8192`
print one line `XI ...` a call (the top-k's CTA 0 prints and resets the stamps).

With DSA_TL_LIGHT=1 only thread 0 of each kernel's first CTA stamps (plain stores; x, n and 0
variants then name the same thread), but for s2x: the last score CTA's
thread 0 past its tiles (one atomic a CTA): the atomics of every CTA's warps to one line queue other
accesses behind them (at 8 rows they took the call from 13.8 to 20 us).

Stamps (earliest over the CTAs that stamp it, or latest where marked max), relative to the query
kernel's first CTA past its wait:
 q0 query past its wait (min)          q1 query's last warp done (max)
 s0 score CTA entered (min; s0x max)   s1 score past its wait (min; s1x max)   s2 score's last warp done (max)
 pre score's thread 0 at its wait, its first copies issued (max)   w score's weights loaded (max)   qv its first query piece loaded (max)
 ld score's queries and weights in shared memory, warps 1-3 (max; ld0 warp 0's, max; ldn the earliest warp's)
 sq score's queries and weights in shared memory (max)   sf score's first key tile read (max)
 se score's first warp done (min)
 k0 top-k past its wait                k1 keys loaded, row length known
 p0 p1 p2 after each radix pass (-1: the passes ended before it)   e emit placed   k2 row written
Only thread 0 of the top-k's CTA 0 stamps the top-k; its passes end at block barriers, so they are
the CTA's.
"""
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..')


def patch(path, pairs):
    p = os.path.join(root, path)
    s = open(p).read()
    for old, new in pairs:
        if s.count(old) != 1:
            sys.exit(f'{path}: anchor found {s.count(old)} times: {old[:70]!r}')
        s = s.replace(old, new)
    open(p, 'w').write(s)


LIGHT = os.environ.get('DSA_TL_LIGHT') == '1'
TL = '''
#define DSA_TL_LIGHT ''' + ('1' if LIGHT else '0') + '''
// ---- measurement only: the chain timeline (tests/bench/logs/index_chain_timeline_instrument.py)
__device__ unsigned long long dsa_tl[25] = {~0ull, 0, ~0ull, ~0ull, 0, ~0ull, ~0ull, 0, ~0ull, ~0ull, ~0ull, ~0ull, ~0ull, 0, ~0ull, 0, 0, 0, 0, 0, 0, 0, 0, ~0ull, 0};
__device__ __forceinline__ unsigned long long tl_now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}
#if DSA_TL_LIGHT // one CTA's thread 0 stamps, with plain stores: no atomics for the stamps to queue behind
__device__ __forceinline__ void tl_min(int i) { if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) dsa_tl[i] = tl_now(); }
__device__ __forceinline__ void tl_max(int i) { if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) dsa_tl[i] = tl_now(); }
#else
__device__ __forceinline__ void tl_min(int i) { atomicMin(&dsa_tl[i], tl_now()); }
__device__ __forceinline__ void tl_max(int i) { atomicMax(&dsa_tl[i], tl_now()); }
#endif
__device__ __forceinline__ void tl_set(int i) { dsa_tl[i] = tl_now(); }
'''

patch('kernels/dsa_index_select.cuh', [
    ('namespace dsa {\n', 'namespace dsa {\n' + TL),
    ('''        __syncthreads();
        if (total <= (uint32_t)K) // every key > 0 is in: no K-th (the same in every thread)
            break;''', '''        __syncthreads();
        if (threadIdx.x == 0 && blockIdx.x == 0)
            tl_set(8 + pass);
        if (total <= (uint32_t)K) // every key > 0 is in: no K-th (the same in every thread)
            break;'''),
])
patch('kernels/dsa_index.cuh', [
    ('''    indexer_store_e4m3<D>(x, scale, p.q8 + ((int64_t)t * H + h) * D, lane);
    if (lane == 0)
        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));''',
     '''    indexer_store_e4m3<D>(x, scale, p.q8 + ((int64_t)t * H + h) * D, lane);
    if (lane == 0)
        p.wq[(int64_t)t * H + h] = __fmul_rn(__fmul_rn(__fmul_rn(w, scale), 1.0f / sqrtf((float)D)),
                                             1.0f / sqrtf((float)H));
    if (lane == 0)
        tl_max(1);'''),
    ('''    const int t = blockIdx.x, h = blockIdx.y * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (h >= H)''', '''    const int t = blockIdx.x, h = blockIdx.y * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0)
        tl_min(0);
    if (h >= H)'''),
    ('''    if constexpr (kHasWgmma && C::idx_heads <= 64) {
        // thread 0's first block-table entries first''', '''    if (threadIdx.x == 0) {
        tl_min(2);
        tl_max(15);
        if (blockIdx.x == 0 && blockIdx.y == 0)
            dsa_tl[19] = gridDim.y;
    }
    if constexpr (kHasWgmma && C::idx_heads <= 64) {
        // thread 0's first block-table entries first'''),
    ('''        index_score_wgmma<C>(p, last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank), first);''',
     '''        index_score_wgmma<C>(p, last < 0 ? 0 : owned_count<C::dcp, C::interleave>(last, p.rank), first);
        if (threadIdx.x % 32 == 0) {
            tl_max(4);
            tl_min(14);
        }
#if DSA_TL_LIGHT
        if (threadIdx.x == 0)
            atomicMax(&dsa_tl[24], tl_now()); // every CTA's thread 0: the score grid's last
#endif'''),
    ('''    uint32_t v[RS];
    load_keys<Threads, RS>(keys, n, v);
    const int rank = p.rank;''', '''    if (threadIdx.x == 0 && t == 0)
        tl_set(5);
    uint32_t v[RS];
    load_keys<Threads, RS>(keys, n, v);
    if (threadIdx.x == 0 && t == 0 && (v[0] != 0xdeadbeefu))
        tl_set(6);
    const int rank = p.rank;'''),
    ('''            for (int j = threadIdx.x; j < K; j += Threads)
                out[j] = j < written ? (int32_t)stage[j] : -1;''', '''            if (threadIdx.x == 0 && t == 0)
                tl_set(11);
            for (int j = threadIdx.x; j < K; j += Threads)
                out[j] = j < written ? (int32_t)stage[j] : -1;
            __syncthreads();
            if (threadIdx.x == 0 && t == 0) {
                tl_set(12);
                const unsigned long long *s = dsa_tl, z = s[0];
                const auto d = [&](int i) { return s[i] == ~0ull ? -1ll : (long long)(s[i] - z); };
                printf("XI q0 0 q1 %lld s0 %lld s0x %lld pre %lld s1 %lld s1x %lld w %lld qv %lld ldn %lld ld0 %lld ld %lld sq %lld sf %lld se %lld s2 %lld s2x %lld k0 %lld k1 %lld p0 %lld p1 %lld p2 %lld e %lld k2 %lld grid %llu\\n",
                       d(1), d(2), d(15), d(17), d(3), d(16), d(21), d(22), d(23), d(20), d(18), d(7), d(13), d(14), d(4), DSA_TL_LIGHT ? d(24) : -1ll, d(5), d(6), d(8), d(9), d(10), d(11), d(12), s[19]);
                dsa_tl[0] = dsa_tl[2] = dsa_tl[3] = dsa_tl[14] = ~0ull;
                dsa_tl[1] = dsa_tl[4] = dsa_tl[7] = dsa_tl[13] = 0ull;
                dsa_tl[15] = dsa_tl[16] = dsa_tl[17] = dsa_tl[18] = dsa_tl[20] = dsa_tl[21] = dsa_tl[22] = dsa_tl[24] = 0ull;
                dsa_tl[23] = ~0ull;
                dsa_tl[8] = dsa_tl[9] = dsa_tl[10] = ~0ull;
            }'''),
])
patch('kernels/dsa_index_wgmma.cuh', [
    ('''    // The queries and weights below are its output.
    after_prior_grid();''', '''    // The queries and weights below are its output.
    if (threadIdx.x == 0)
        tl_max(17);
    after_prior_grid();
    if (threadIdx.x == 0) {
        tl_min(3);
        tl_max(16);
    }'''),
    ('''        wv[u] = q.i < R * N1 && q.j < rows && q.h < H ? p.wq[(int64_t)(t0 + q.j) * H + q.h] : 0.0f;
    }
''', '''        wv[u] = q.i < R * N1 && q.j < rows && q.h < H ? p.wq[(int64_t)(t0 + q.j) * H + q.h] : 0.0f;
    }
    if (threadIdx.x % 32 == 0 && (__float_as_uint(wv[0]) != 0xdeadbeefu))
        tl_max(21);
'''),
    ('''#pragma unroll
            for (int u = 0; u < BATCH; u++)
                v[u] = piece(i0 + u * Threads + tid);
''', '''#pragma unroll
            for (int u = 0; u < BATCH; u++)
                v[u] = piece(i0 + u * Threads + tid);
            if (threadIdx.x % 32 == 0 && v[0].x != 0xdeadbeefu)
                tl_max(22);
'''),
    ('''    fence_proxy_async(); // the queries are read by the tensor cores
''', '''    if (threadIdx.x % 32 == 0) {
        tl_max(threadIdx.x == 0 ? 20 : 18);
        tl_min(23);
    }
    fence_proxy_async(); // the queries are read by the tensor cores
'''),
    ('''    __syncthreads(); // the barriers' initialization, the queries and weights
''', '''    __syncthreads(); // the barriers' initialization, the queries and weights
    if (threadIdx.x == 0)
        tl_max(7);
'''),
    ('''    fetch(0, 0u, u, ksc, have); // the CTA has a tile (it returned above otherwise)
''', '''    fetch(0, 0u, u, ksc, have); // the CTA has a tile (it returned above otherwise)
    if (threadIdx.x == 0 && (u[0][0] != 0xdeadbeefu))
        tl_max(13);
'''),
])
print('patched kernels/ for the chain timeline' + (' (light: the first CTA of each kernel, thread 0, plain stores)' if LIGHT else ''))
