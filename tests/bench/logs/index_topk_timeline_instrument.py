# Debug timeline of the split top-k (never to land): run from the repository root on a throwaway
# copy of the kernels (the device's working copy), then `ninja gpu` and
#   python3 tests/bench/bench_index.py --calls CONFIG ROWS CONTEXT | grep '^XT'
# Thread 0 of three CTAs of row 0 (the first, middle and last part) stamps %globaltimer at each
# phase of select_topk_split into a __device__ array; the next call's query kernel prints them in
# ns from the first CTA's start, one line a CTA, and clears them. Stamps (XT: 0 start, 1 count pass
# 0 done, 2 its atomics done, 3 barrier 0 passed, 4 find_bin done, 5 gather done, 6 barrier LAST
# passed, 7 candidates read, 8 passes over them done, 9 counts and bits done, 10 emit done, 11 end
# (after the last CTA's zeroing); -1: not reached (e.g. the non-gathered path).
import sys
p = 'kernels/dsa_index_select.cuh'
s = open(p).read()
s = s.replace('namespace dsa {\n', '''namespace dsa {
__device__ __forceinline__ unsigned long long xg_time() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ unsigned long long xdbg[40];
#define XT(i) do { if (xsel >= 0 && threadIdx.x == 0) xdbg[xsel * 12 + (i)] = xg_time(); } while (0)
''', 1)
a = s.index('__device__ void select_topk_split(')
def after(anchor, text, start=None, nth=1):
    global s
    i = start if start is not None else a
    for _ in range(nth):
        i = s.index(anchor, i) + len(anchor)
    s = s[:i] + text + s[i:]
def before(anchor, text, nth=1):
    global s
    i = a
    for _ in range(nth):
        i = s.index(anchor, i + 1)
    s = s[:i] + text + s[i:]
after('uint32_t *hist, uint32_t *red, uint32_t *cand_s)\n{\n',
      '    const int xsel = blockIdx.x != 0 ? -1 : blockIdx.y == 0 ? 0 : blockIdx.y == gridDim.y / 2 ? 1 : blockIdx.y == gridDim.y - 1 ? 2 : -1;\n    XT(0);\n')
after('count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);\n', '        if (pass == 0) XT(1);\n')
before('        group_sync(state + pass, S);', '        if (pass == 0) XT(2);\n')
after('        group_sync(state + pass, S);\n', '        if (pass == 0) XT(3);\n')
after('find_bin<Threads, BINS, true>(g, remaining, red, &bin, &before, &in_bin);\n', '        if (pass == 0) XT(4);\n')
before('        group_sync(state + St::LAST, S);', '        XT(5);\n')
after('        group_sync(state + St::LAST, S);\n', '        XT(6);\n')
before('        // the passes left, over the candidates', '        XT(7);\n')
before('        kth = prefix;', '        XT(8);\n')
before('    uint32_t left = 0u;', '    XT(9);\n')
before('    const int written = (int)(total < (uint32_t)K ? total : (uint32_t)K);', '    XT(10);\n')
i = s.index('state[i] = 0u;', a)
j = s.index('\n', i)
s = s[:j + 1] + '    XT(11);\n' + s[j + 1:]
open(p, 'w').write(s)

p = 'kernels/dsa_index.cuh'
s = open(p).read()
a = s.index('template <class C> __device__ __forceinline__ void index_query(const dsa_index_q_params &p)')
b = s.index('{', a)
s = s[:b + 1] + '''
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
        const unsigned long long b0 = xdbg[0];
        for (int c = 0; c < 3; c++) {
            printf("XT%d", c);
            for (int i = 0; i < 12; i++)
                printf(" %lld", xdbg[12 * c + i] ? (long long)(xdbg[12 * c + i] - b0) : -1ll);
            printf("\\n");
        }
        for (int i = 0; i < 36; i++)
            xdbg[i] = 0;
    }
''' + s[b + 1:]
open(p, 'w').write(s)
print("instrumented", file=sys.stderr)
