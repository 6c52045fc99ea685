# Debug span of the split top-k (never to land): every CTA's start and end, not only row 0's phases.
# Run from the repository root on a throwaway copy of the kernels (the device's working copy), then
# `ninja gpu` and
#   python3 tests/bench/bench_index.py --calls CONFIG ROWS CONTEXT | grep '^XS'
# Thread 0 of each CTA of select_topk_split stamps %globaltimer on entry and at its end into a
# __device__ array (CTA blockIdx.x * gridDim.y + blockIdx.y); the next call's query kernel prints one
# line: the CTAs seen, the spread of their starts, the span from the first start to the last end,
# and each CTA's own start-to-end time (min / median / max), in ns, then clears them.
import sys
p = 'kernels/dsa_index_select.cuh'
s = open(p).read()
s = s.replace('namespace dsa {\n', '''namespace dsa {
__device__ __forceinline__ unsigned long long xs_time() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ unsigned long long xspan[2][4096];
''', 1)
a = s.index('__device__ void select_topk_split(')
anchor = 'uint32_t *hist, uint32_t *red, uint32_t *cand_s)\n{\n'
i = s.index(anchor, a) + len(anchor)
s = s[:i] + '    const int xcta = blockIdx.x * gridDim.y + blockIdx.y;\n    if (threadIdx.x == 0 && xcta < 4096) xspan[0][xcta] = xs_time();\n' + s[i:]
anchor = '        discard_lines<Threads>(keys, lo, hi);\n}'
i = s.index(anchor, a) + len(anchor) - 1
s = s[:i] + '    if (threadIdx.x == 0 && xcta < 4096) xspan[1][xcta] = xs_time();\n' + s[i:]
open(p, 'w').write(s)

p = 'kernels/dsa_index.cuh'
s = open(p).read()
a = s.index('template <class C> __device__ __forceinline__ void index_query(const dsa_index_q_params &p)')
b = s.index('{', a)
s = s[:b + 1] + '''
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
        unsigned long long s0 = ~0ull, s1 = 0, e1 = 0;
        static __shared__ unsigned long long d[4096];
        int n = 0;
        for (int i = 0; i < 4096; i++)
            if (xspan[0][i] && xspan[1][i]) {
                s0 = xspan[0][i] < s0 ? xspan[0][i] : s0;
                s1 = xspan[0][i] > s1 ? xspan[0][i] : s1;
                e1 = xspan[1][i] > e1 ? xspan[1][i] : e1;
                d[n++] = xspan[1][i] - xspan[0][i];
            }
        for (int i = 1; i < n; i++) { // insertion sort, a debug print
            const unsigned long long x = d[i];
            int j = i - 1;
            while (j >= 0 && d[j] > x) { d[j + 1] = d[j]; j--; }
            d[j + 1] = x;
        }
        if (n)
            printf("XS ctas %d starts spread %lld span %lld own min %lld median %lld max %lld\\n", n,
                   (long long)(s1 - s0), (long long)(e1 - s0), (long long)d[0], (long long)d[n / 2], (long long)d[n - 1]);
        for (int i = 0; i < 4096; i++)
            xspan[0][i] = xspan[1][i] = 0;
    }
''' + s[b + 1:]
open(p, 'w').write(s)
print("instrumented", file=sys.stderr)
