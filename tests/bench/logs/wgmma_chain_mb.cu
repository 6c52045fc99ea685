// throwaway (issue 15, 16 heads): what a chain of m64nNk16 bf16 wgmmas costs (both operands from shared
// memory, no swizzle, the attend tiles' descriptors) when 1 or 2 warpgroups of a CTA issue them at
// once, on one SM and on all: the 16-head consumer runs 36 m64n16k16 for S^T and 32 for O^T a tile and
// takes ~2.1 us a tile (RESULTS, eleventh session), ~7x the tile's tensor work at the peak rate.
// Whether n16 costs what n64 does, and whether two groups overlap, decides the next design.
// Build and run on the H200 from the tree root (nvcc 13.0 there; no libdsa needed):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels -o /tmp/wgmma_mb \
//        tests/bench/logs/wgmma_chain_mb.cu && /tmp/wgmma_mb
#include <cstdio>
#include <cstdint>
#include "dsa_wgmma.cuh"
using namespace dsa;
// TA: A read M-major (transposed), as O^T = V^T P^T reads V^T from the key tile
template <int N, int TA> __device__ __forceinline__ void mma(float (&d)[N / 2], uint64_t a, uint64_t b)
{
    if constexpr (N == 16) wgmma_n16<0, TA>(d, a, b);
    else if constexpr (N == 32) wgmma_n32<0, TA>(d, a, b);
    else wgmma_n64<0, TA>(d, a, b);
}
// TWO: the k-steps alternate between two accumulator sets (two independent chains, added at the end)
template <int N, int CHAIN, bool SPLITWAIT, bool TWO = false, int TA = 0>
__global__ void __launch_bounds__(256) chain(int groups, int reps, long long *out, float *sink)
{
    extern __shared__ __align__(128) uint8_t smem[];
    const int wg = threadIdx.x / 128;
    for (int i = threadIdx.x; i < (64 + 64) * 576 * 2 / 16; i += blockDim.x)
        reinterpret_cast<uint4 *>(smem)[i] = make_uint4(0, 0, 0, 0);
    fence_proxy_async();
    __syncthreads();
    if (wg >= groups)
        return;
    constexpr uint32_t SBO = 576 / 8 * 128;
    const uint32_t ka = smem_addr(smem), qb = smem_addr(smem + 64 * 576 * 2);
    float acc[N / 2], acc1[N / 2];
    for (int i = 0; i < N / 2; i++) acc[i] = 0.f, acc1[i] = 0.f;
    const long long t0 = clock64();
    for (int r = 0; r < reps; r++) {
        wgmma_fence();
        const uint64_t a = wg_desc(ka, 128u, SBO), b = wg_desc(qb, 128u, SBO);
#pragma unroll
        for (int ks = 0; ks < CHAIN; ks++) {
            if (TWO && ks % 2)
                mma<N, TA>(acc1, a + 16u * ks, b + 16u * ks);
            else
                mma<N, TA>(acc, a + 16u * ks, b + 16u * ks);
            if (SPLITWAIT && ks == CHAIN / 2 - 1) { wgmma_commit(); wgmma_wait(); wgmma_fence(); }
        }
        wgmma_commit();
        wgmma_wait();
    }
    const long long t1 = clock64();
    float s = 0.f;
    for (int i = 0; i < N / 2; i++) s += acc[i] + acc1[i];
    if (s != 0.f) sink[threadIdx.x] = s;
    if (threadIdx.x % 128 == 0) out[blockIdx.x * 2 + wg] = t1 - t0;
}
template <int N, int CHAIN, bool SW, bool TWO = false, int TA = 0> void run(int groups, int blocks)
{
    long long *out; float *sink;
    cudaMalloc(&out, sizeof(long long) * 2 * blocks); cudaMalloc(&sink, 4 * 256);
    const int smem = (64 + 64) * 576 * 2, reps = 200;
    cudaFuncSetAttribute(chain<N, CHAIN, SW, TWO, TA>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    chain<N, CHAIN, SW, TWO, TA><<<blocks, 256, smem>>>(groups, 2, out, sink);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    cudaEventRecord(e0);
    chain<N, CHAIN, SW, TWO, TA><<<blocks, 256, smem>>>(groups, reps, out, sink);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    long long h[2]; cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    const double per = (double)h[0] / reps / CHAIN;
    printf("n%-3d chain %2d%s%s%s groups %d blocks %3d: %.1f cycles a wgmma (%.0f a chain of %d, wait included), "
           "%.2f us a chain; %.0f TFLOP/s over the grid; err %s\n",
           N, CHAIN, SW ? " (wait mid-chain)" : "", TWO ? " (two accumulator sets)" : "", TA ? " (A transposed)" : "", groups, blocks, per, per * CHAIN, CHAIN, ms * 1e3 / reps,
           2.0 * 64 * N * 16 * CHAIN * reps * groups * blocks / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
    cudaFree(out); cudaFree(sink);
}
int main()
{
    run<16, 36, false>(1, 1); run<16, 36, false>(2, 1); run<16, 36, false>(1, 132); run<16, 36, false>(2, 132);
    run<16, 8, false>(1, 1); run<16, 72, false>(1, 1);
    run<32, 36, false>(1, 1); run<32, 36, false>(2, 1); run<32, 36, false>(2, 132);
    run<64, 36, false>(1, 1); run<64, 36, false>(2, 1); run<64, 36, false>(2, 132);
    run<16, 68, true>(1, 1); run<16, 68, true>(2, 1);
    run<16, 36, false, true>(1, 1); run<16, 36, false, true>(2, 1); run<16, 36, false, true>(2, 132);
    run<16, 32, false, false, 1>(1, 1); run<16, 32, false, false, 1>(2, 1); run<16, 32, false, false, 1>(2, 132);
    return 0;
}
