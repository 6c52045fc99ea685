# debug timeline instrumentation (never landed): globaltimer stamps into a __device__ array, printed by the next call's query kernel
p='kernels/dsa_index_select.cuh'
s=open(p).read()
s=s.replace('''namespace dsa {
''','''namespace dsa {
__device__ __forceinline__ unsigned long long xg_time() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ unsigned long long xdbg[64];
#define XT(base, i) do { if (xsel >= 0 && threadIdx.x == 0) xdbg[(base) + xsel * ((base) == 2 ? 4 : 12) + (i)] = xg_time(); } while (0)
''',1)
a=s.index('__device__ void select_topk_split(')
body_start=s.index('{',a)
s=s[:body_start+1]+'\n    const int xsel = blockIdx.x != 0 ? -1 : blockIdx.y == 0 ? 0 : blockIdx.y == gridDim.y / 2 ? 1 : blockIdx.y == gridDim.y - 1 ? 2 : -1;\n    XT(16, 0);'+s[body_start+1:]
def rep(old,new):
    global s
    i=s.index(old,a)
    s=s[:i]+new+s[i+len(old):]
rep('''        count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
        uint32_t *g = state + St::HIST + pass * BINS;''','''        count_pass<Threads, BINS, 1>(keys, lo, hi, prefix, mask, shift, digits, hist);
        if (pass == 0) XT(16, 1);
        uint32_t *g = state + St::HIST + pass * BINS;''')
rep('''        group_sync(state + pass, S);
        uint32_t bin, before;''','''        if (pass == 0) XT(16, 2);
        group_sync(state + pass, S);
        if (pass == 0) XT(16, 3);
        uint32_t bin, before;''')
rep('''        uint32_t s = 0u;
        if (pass == 0) {''','''        uint32_t s = 0u;
        if (pass == 0) XT(16, 4);
        if (pass == 0) {''')
rep('''        group_sync(state + St::LAST, S);''','''        XT(16, 5);
        group_sync(state + St::LAST, S);
        XT(16, 6);''')
rep('''        __syncthreads();
        // the passes left, over the candidates''','''        __syncthreads();
        XT(16, 7);
        // the passes left, over the candidates''')
rep('''        kth = prefix;
        ties = (uint32_t)K - larger;''','''        XT(16, 8);
        kth = prefix;
        ties = (uint32_t)K - larger;''')
rep('''    emit_range<Threads, 1>(keys, lo, hi, kth, ties, above0, tie0, emit, red);''','''    XT(16, 9);
    emit_range<Threads, 1>(keys, lo, hi, kth, ties, above0, tie0, emit, red);
    XT(16, 10);''')
i=s.index('state[i] = 0u;', s.index('XT(16, 10)'))
j=s.index('\n', s.index('}', i))
s=s[:j+1]+'    XT(16, 11);\n'+s[j+1:]
open(p,'w').write(s)

p='kernels/dsa_index_wgmma.cuh'
s=open(p).read()
a=s.index('__device__ __forceinline__ void score_rows_wgmma(')
b=s.index('{',a)
s=s[:b+1]+'\n    const int xsel = blockIdx.x != 0 ? -1 : blockIdx.y == 0 ? 0 : blockIdx.y == gridDim.y / 2 ? 1 : blockIdx.y == gridDim.y - 1 ? 2 : -1;\n    XT(2, 0);'+s[b+1:]
i=s.index('    __syncthreads(); // the barriers\' initialization, the queries and weights')
s=s[:i]+'    XT(2, 1);\n'+s[i:]
i=s.index('    fetch(0, 0u, u, ksc, have); // the CTA has a tile')
j=s.index('\n',i)
s=s[:j+1]+'    XT(2, 2);\n'+s[j+1:]
k=s.index('// B.2 on wgmma for row blockIdx.x alone')
k2=s.rindex('}',0,k)
s=s[:k2]+'    XT(2, 3);\n'+s[k2:]
open(p,'w').write(s)

p='kernels/dsa_index.cuh'
s=open(p).read()
a=s.index('template <class C> __device__ __forceinline__ void index_query(const dsa_index_q_params &p)')
b=s.index('{',a)
s=s[:b+1]+'''
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
        unsigned long long b0 = xdbg[0];
        printf("XQ %lld\\n", (long long)(xdbg[1] - b0));
        for (int c = 0; c < 3; c++)
            printf("XS%d %lld %lld %lld %lld\\n", c, (long long)(xdbg[2+4*c] - b0), (long long)(xdbg[3+4*c] - b0), (long long)(xdbg[4+4*c] - b0), (long long)(xdbg[5+4*c] - b0));
        for (int c = 0; c < 3; c++) {
            printf("XT%d", c);
            for (int i = 0; i < 12; i++) printf(" %lld", (long long)(xdbg[16+12*c+i] - b0));
            printf("\\n");
        }
        xdbg[0] = xg_time();
    }
'''+s[b+1:]
k=s.index('// B.2 on mma.sync (targets without wgmma)')
k2=s.rindex('}',0,k)
s=s[:k2]+'''    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) xdbg[1] = xg_time();
'''+s[k2:]
open(p,'w').write(s)
