// Throughput of the instructions a register-direct 16-head attend loop would lean on, per SM and
// clock, on the machine it runs on: e4m3x2 -> f16x2, f16 -> f32, f32 pair -> bf16x2, FMUL, LOP3,
// PRMT, movmatrix, mma.sync m16n8k16 bf16 (fp32 accumulators), ex2.approx. Each thread runs 8
// independent chains; one wave of 132 x 4 CTAs of 256 threads; cycles from clock64 of each CTA.
// nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/reg_ops_mb tests/bench/logs/reg_ops_mb.cu
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int ITERS = 4096, CH = 8, CTAS_PER_SM = 4, THREADS = 256;

template <int OP> __device__ __forceinline__ void step(uint32_t (&x)[CH], float (&f)[CH], float (&acc)[CH][4])
{
#pragma unroll
    for (int c = 0; c < CH; c++) {
        if constexpr (OP == 0) { // e4m3x2 -> f16x2
            uint32_t y;
            asm volatile("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(y) : "h"((uint16_t)x[c]));
            x[c] = y;
        } else if constexpr (OP == 1) { // f16 -> f32
            float y;
            asm volatile("cvt.f32.f16 %0, %1;" : "=f"(y) : "h"((uint16_t)x[c]));
            f[c] += y;
        } else if constexpr (OP == 2) { // two f32 -> bf16x2
            uint32_t y;
            asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(f[c]), "f"(__uint_as_float(x[c])));
            x[c] = y;
        } else if constexpr (OP == 3) {
            asm volatile("mul.f32 %0, %0, %1;" : "+f"(f[c]) : "f"(1.0001f));
        } else if constexpr (OP == 4) {
            asm volatile("lop3.b32 %0, %0, 0x7f7f7f7f, 0x80808080, 0xea;" : "+r"(x[c]));
        } else if constexpr (OP == 5) {
            asm volatile("prmt.b32 %0, %0, %0, 0x1032;" : "+r"(x[c]));
        } else if constexpr (OP == 6) {
            asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %0;" : "+r"(x[c]));
        } else if constexpr (OP == 7) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                         "{%0,%1,%2,%3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]));
        } else if constexpr (OP == 8) {
            asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f[c]));
        } else if constexpr (OP == 9) { // mma.sync m16n8k16 f16 inputs, f32 accumulators
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                         "{%0,%1,%2,%3};"
                         : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                         : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(x[4]), "r"(x[5]));
        }
    }
}

template <int OP> __global__ void __launch_bounds__(THREADS) bench(uint32_t seed, uint32_t *out, long long *cycles)
{
    uint32_t x[CH];
    float f[CH], acc[CH][4];
    for (int c = 0; c < CH; c++) {
        x[c] = seed * (threadIdx.x + 1) + c * 0x01010101u;
        f[c] = 1.0f + c;
        for (int j = 0; j < 4; j++)
            acc[c][j] = 0.0f;
    }
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll 1
    for (int i = 0; i < ITERS; i++)
        step<OP>(x, f, acc);
    __syncthreads();
    const long long t1 = clock64();
    uint32_t s = 0;
    for (int c = 0; c < CH; c++)
        s += x[c] + __float_as_uint(f[c]) + __float_as_uint(acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3]);
    if (s == 0x12345678u)
        out[threadIdx.x] = s;
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = t1 - t0;
}

template <int OP> void run(const char *name, int sms, uint32_t *out, long long *cyc)
{
    const int ctas = sms * CTAS_PER_SM;
    bench<OP><<<ctas, THREADS>>>(7u, out, cyc); // warm-up
    bench<OP><<<ctas, THREADS>>>(11u, out, cyc);
    cudaDeviceSynchronize();
    static long long h[4096];
    cudaMemcpy(h, cyc, ctas * sizeof(long long), cudaMemcpyDeviceToHost);
    long long mx = 0;
    for (int i = 0; i < ctas; i++)
        mx = h[i] > mx ? h[i] : mx;
    // warp instructions per SM: CTAS_PER_SM x 8 warps x ITERS x CH
    const double wi = (double)CTAS_PER_SM * (THREADS / 32) * ITERS * CH;
    printf("%-28s %7.2f warp instructions / clock / SM (%6.1f lanes), %lld cycles\n", name, wi / mx, 32 * wi / mx, mx);
}

int main()
{
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    const int sms = p.multiProcessorCount;
    printf("%s, %d SMs\n", p.name, sms);
    uint32_t *out;
    long long *cyc;
    cudaMalloc(&out, 4096);
    cudaMalloc(&cyc, 4096 * sizeof(long long));
    run<0>("cvt f16x2.e4m3x2", sms, out, cyc);
    run<1>("cvt f32.f16 (+ fadd)", sms, out, cyc);
    run<2>("cvt bf16x2.f32", sms, out, cyc);
    run<3>("fmul", sms, out, cyc);
    run<4>("lop3", sms, out, cyc);
    run<5>("prmt", sms, out, cyc);
    run<6>("movmatrix.trans", sms, out, cyc);
    run<7>("mma m16n8k16 bf16", sms, out, cyc);
    run<9>("mma m16n8k16 f16", sms, out, cyc);
    run<8>("ex2.approx", sms, out, cyc);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        printf("error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    return 0;
}
