# throwaway: stamps of every score CTA (row 0) and split top-k CTA (row 0), printed by the next call's query kernel
import re
from instrument_patch import patch
G = '''namespace dsa {
__device__ __forceinline__ unsigned long long xg_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ unsigned long long xs_beg[1200], xs_end[1200], xt_beg[128], xt_end[128], xq0, xcalls;
__device__ unsigned int xs_sm[1200];
__device__ __forceinline__ unsigned int xg_smid() { unsigned int r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }
'''
patch('kernels/dsa_launch.cuh', [('namespace dsa {\n', G)])
s = open('kernels/dsa_index_wgmma.cuh').read()
i = s.index('__device__ __forceinline__ void score_rows_wgmma(')
j = s.index('{', s.index(')\n{', i)) + 1
s = s[:j] + '\n    const unsigned long long xbeg = xg_now();' + s[j:]
k = s.index('\n// B.2 on wgmma for row blockIdx.x alone')
end = s.rindex('}', 0, k)
s = s[:end] + '    if (threadIdx.x == 0 && t0 == 0) { xs_beg[blockIdx.y] = xbeg; xs_end[blockIdx.y] = xg_now(); xs_sm[blockIdx.y] = xg_smid(); }\n' + s[end:]
open('kernels/dsa_index_wgmma.cuh', 'w').write(s)
patch('kernels/dsa_index.cuh', [
 ('''    index_topk_split_row''' if False else '''    const int t = blockIdx.x;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    uint32_t *state = p.split_state''', '''    const unsigned long long xtb = xg_now();
    const int t = blockIdx.x;
    const int64_t last = row_last(p.positions, p.req_of_token, p.seq_lens, p.num_requests, t);
    const int64_t n = last < 0 ? 0 : owned_count<W, I>(last, p.rank);
    const uint32_t *keys = p.keys + (int64_t)t * p.key_stride;
    uint32_t *state = p.split_state'''),
 ('''            [&](int j) { CandidateSink<W, K>(p, t).put(j, 0u, 0xffffffffu); }, state, hist, red, cand_s);
    }
}''', '''            [&](int j) { CandidateSink<W, K>(p, t).put(j, 0u, 0xffffffffu); }, state, hist, red, cand_s);
    }
    if (threadIdx.x == 0 && t == 0 && blockIdx.y < 128) { xt_beg[blockIdx.y] = xtb; xt_end[blockIdx.y] = xg_now(); }
}'''),
 ('''    static_assert(C::idx_q_threads == 256, "a warp per head, 8 heads per CTA");''', '''    static_assert(C::idx_q_threads == 256, "a warp per head, 8 heads per CTA");
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
        const unsigned long long now = xg_now(), q0 = xq0;
        xcalls++;
        if (q0 && xcalls % 16 == 0) {
            unsigned long long sb0 = ~0ull, sb1 = 0, se0 = ~0ull, se1 = 0, tb0 = ~0ull, tb1 = 0, te1 = 0; int ns = 0, nt = 0;
            unsigned long long hist[8] = {0};
            for (int i = 0; i < 1200; i++) if (xs_end[i]) { ns++; unsigned long long b = xs_beg[i] - q0, e = xs_end[i] - q0;
                sb0 = b < sb0 ? b : sb0; sb1 = b > sb1 ? b : sb1; se0 = e < se0 ? e : se0; se1 = e > se1 ? e : se1; }
            for (int i = 0; i < 1200; i++) if (xs_end[i]) { unsigned long long e = xs_end[i] - q0; int k = se1 > se0 ? (int)((e - se0) * 8 / (se1 - se0 + 1)) : 0; hist[k]++; }
            for (int i = 0; i < 128; i++) if (xt_end[i]) { nt++; unsigned long long b = xt_beg[i] - q0, e = xt_end[i] - q0;
                tb0 = b < tb0 ? b : tb0; tb1 = b > tb1 ? b : tb1; te1 = e > te1 ? e : te1; }
            printf("XTAIL call %llu score CTAs %d: start %llu..%llu, end %llu..%llu (ends in 8 bins: %llu %llu %llu %llu %llu %llu %llu %llu); topk CTAs %d: start %llu..%llu, end %llu; next query at %llu\\n",
                   xcalls, ns, sb0, sb1, se0, se1, hist[0], hist[1], hist[2], hist[3], hist[4], hist[5], hist[6], hist[7], nt, tb0, tb1, te1, now - q0);
            // the k-th CTA to start on its SM: mean and max start, over the SMs
            unsigned long long sum[6] = {0}, mx[6] = {0}; int cnt[6] = {0};
            for (int sm = 0; sm < 132; sm++) {
                unsigned long long v[8]; int m = 0;
                for (int i = 0; i < 1200 && m < 8; i++) if (xs_end[i] && xs_sm[i] == (unsigned)sm) v[m++] = xs_beg[i] - q0;
                for (int a2 = 0; a2 < m; a2++) for (int b2 = a2 + 1; b2 < m; b2++) if (v[b2] < v[a2]) { unsigned long long tt = v[a2]; v[a2] = v[b2]; v[b2] = tt; }
                for (int k = 0; k < m && k < 6; k++) { sum[k] += v[k]; mx[k] = v[k] > mx[k] ? v[k] : mx[k]; cnt[k]++; }
            }
            printf("XSM call %llu: k-th CTA on its SM, mean/max start: %llu/%llu (%d) %llu/%llu (%d) %llu/%llu (%d) %llu/%llu (%d) %llu/%llu (%d)\\n", xcalls,
                   cnt[0] ? sum[0] / cnt[0] : 0, mx[0], cnt[0], cnt[1] ? sum[1] / cnt[1] : 0, mx[1], cnt[1], cnt[2] ? sum[2] / cnt[2] : 0, mx[2], cnt[2],
                   cnt[3] ? sum[3] / cnt[3] : 0, mx[3], cnt[3], cnt[4] ? sum[4] / cnt[4] : 0, mx[4], cnt[4]);
        }
        for (int i = 0; i < 1200; i++) xs_end[i] = 0;
        for (int i = 0; i < 128; i++) xt_end[i] = 0;
        xq0 = now;
    }''')])
