// Microbenchmark (throwaway instrument, not part of the product): the rate at which an H200 gathers
// the sparse MLA's random cache entries, the access pattern of bench_attend.py (each of 128 rows its
// own 2048 distinct tokens of its own 16384-token request, 64-token blocks of a random block table,
// entries of E bytes), against a plain device copy of as many bytes. Each CTA takes rows' entries,
// each warp whole entries in 16-byte loads (uint4 per lane), U entries in flight per warp. L2 is
// flushed (a 256 MiB write) before each timed call; median of 20.
// nvcc -O3 -arch=sm_90a -o /tmp/gmb gather_bound_mb.cu && /tmp/gmb [mlp]
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>
#include <cuda_runtime.h>
#include "mb_timing.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

template <int E, int U>
__global__ void gather(const uint8_t *cache, const int64_t *slots, int n, uint4 *sink)
{
    constexpr int C = E / 16; // chunks per entry
    const int lane = threadIdx.x % 32;
    const int wid = (blockIdx.x * blockDim.x + threadIdx.x) / 32, nw = gridDim.x * blockDim.x / 32;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int i0 = wid * U; i0 < n; i0 += nw * U) {
        uint4 v[U][(C + 31) / 32];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int i = i0 + u;
            const uint8_t *e = cache + (i < n ? slots[i] : 0) * E;
#pragma unroll
            for (int c = 0; c < (C + 31) / 32; c++) {
                const int ch = lane + 32 * c;
                v[u][c] = (i < n && ch < C) ? __ldcg(reinterpret_cast<const uint4 *>(e) + ch) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int c = 0; c < (C + 31) / 32; c++)
                acc.x ^= v[u][c].x, acc.y ^= v[u][c].y, acc.z ^= v[u][c].z, acc.w ^= v[u][c].w;
    }
    if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u)
        sink[0] = acc;
}

// The mlp mode's gather, as the attend kernel's producers spread a tile: a warp's U entries are U C
// chunks, lane l loading chunks l, l + 32, ... (N a lane), all issued before any is used (weak loads,
// which ptxas hoists given the registers: launch bounds of one 512-thread CTA an SM; -Xptxas -v's
// registers say whether all are held: 4 N and a few)
template <int E, int U>
__global__ void __launch_bounds__(512, 1) gather_spread(const uint8_t *cache, const int64_t *slots, int n, uint4 *sink)
{
    constexpr int C = E / 16, N = (U * C + 31) / 32;
    const int lane = threadIdx.x % 32;
    const int wid = (blockIdx.x * blockDim.x + threadIdx.x) / 32, nw = gridDim.x * blockDim.x / 32;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int i0 = wid * U; i0 < n; i0 += nw * U) {
        uint4 v[N];
#pragma unroll
        for (int j = 0; j < N; j++) {
            const int ch = lane + 32 * j, i = i0 + ch / C;
            v[j] = ch < U * C && i < n ? reinterpret_cast<const uint4 *>(cache + slots[i] * E)[ch % C] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < N; j++)
            acc.x ^= v[j].x, acc.y ^= v[j].y, acc.z ^= v[j].z, acc.w ^= v[j].w;
    }
    if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u)
        sink[0] = acc;
}

template <int E, int U, bool Spread = false>
int run(const char *name, int rows, int threads, int ctas, int sorted = 0)
{
    const int SEQ = 16384, K = 2048;
    const std::vector<int64_t> slots = bench_slots(rows, K, sorted);
    uint8_t *cache;
    int64_t *ds;
    uint4 *sink, *fl;
    const size_t cb = (size_t)rows * SEQ * E, fln = (256u << 20) / 16;
    CK(cudaMalloc(&cache, cb));
    CK(cudaMemset(cache, 1, cb));
    CK(cudaMalloc(&ds, slots.size() * 8));
    CK(cudaMemcpy(ds, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&sink, 16));
    CK(cudaMalloc(&fl, fln * 16));
    const int n = (int)slots.size();
    const double bytes = (double)n * E;
    float us = timed([&] {
        if constexpr (Spread)
            gather_spread<E, U><<<ctas, threads>>>(cache, ds, n, sink);
        else
            gather<E, U><<<ctas, threads>>>(cache, ds, n, sink);
    }, fl, fln);
    uint8_t *dst;
    CK(cudaMalloc(&dst, (size_t)bytes));
    float cus = timed([&] { cudaMemcpyAsync(dst, cache, (size_t)bytes, cudaMemcpyDeviceToDevice); }, fl, fln);
    CK(cudaGetLastError());
    printf("%s%s%s E=%d U=%d rows=%d ctas=%d x %d: gather %.1f us %.0f GB/s | copy of the same bytes %.1f us %.0f GB/s (read+write %.0f GB/s) | gather/copy-read %.2f\n",
           name, Spread ? " spread" : "", sorted == 1 ? " slot-sorted" : sorted == 2 ? " position-sorted" : "", E, U, rows, ctas, threads, us, bytes / us * 1e-3, cus, bytes / cus * 1e-3, 2 * bytes / cus * 1e-3,
           (bytes / us) / (2 * bytes / cus));
    cudaFree(cache), cudaFree(ds), cudaFree(sink), cudaFree(fl), cudaFree(dst);
    return 0;
}

int main(int argc, char **argv)
{
    int r = 0;
    if (argc > 1 && std::string(argv[1]) == "mlp") {
        // (prepared in the fifty-third session) how many entries an SM must keep in flight: one CTA
        // an SM, as the 16-head kernel runs at 128 rows, with 16 warps (the CTA's) or 8 (its
        // producers), U entries a warp; 8 warps x 8 entries is one 64-key tile, x 16 two
        r |= run<656, 2>("fp8", 128, 512, 132);
        r |= run<656, 2, true>("fp8", 128, 512, 132);
        r |= run<656, 4, true>("fp8", 128, 512, 132);
        r |= run<656, 8, true>("fp8", 128, 512, 132);
        r |= run<656, 4, true>("fp8", 128, 256, 132);
        r |= run<656, 8, true>("fp8", 128, 256, 132);
        r |= run<656, 16, true>("fp8", 128, 256, 132);
        r |= run<656, 8, true>("fp8", 64, 256, 132);
        r |= run<656, 2>("fp8", 128, 256, 132 * 8); // the bound, many CTAs
        return r;
    }
    { // the benches' copy bandwidth: a 2 GiB copy, read + write
        uint8_t *x, *y;
        uint4 *fl;
        const size_t n = 1ull << 31, fln = (256u << 20) / 16;
        CK(cudaMalloc(&x, n));
        CK(cudaMalloc(&y, n));
        CK(cudaMalloc(&fl, fln * 16));
        float us = timed([&] { cudaMemcpyAsync(y, x, n, cudaMemcpyDeviceToDevice); }, fl, fln);
        printf("2 GiB copy: %.1f us, %.0f GB/s read + write\n", us, 2.0 * n / us * 1e-3);
        cudaFree(x), cudaFree(y), cudaFree(fl);
    }
    r |= run<656, 1>("fp8", 128, 256, 132 * 8);
    r |= run<656, 2>("fp8", 128, 256, 132 * 8);
    r |= run<656, 4>("fp8", 128, 256, 132 * 4);
    r |= run<656, 2>("fp8", 64, 256, 132 * 8);
    r |= run<656, 1>("fp8", 128, 512, 132);     // one CTA an SM, 16 warps: an entry a warp in flight
    r |= run<656, 2>("fp8", 128, 512, 132);
    r |= run<352, 2>("nvfp4", 128, 256, 132 * 8);
    r |= run<1152, 2>("bf16", 128, 256, 132 * 8);
    // the same rows with each row's slots sorted (prepared in the twenty-seventh session, not yet run)
    // (1: by slot; 2: by position, what a top-k emitted in position order gives)
    for (int m = 1; m <= 2; m++) {
        r |= run<656, 2>("fp8", 128, 256, 132 * 8, m);
        r |= run<656, 2>("fp8", 64, 256, 132 * 8, m);
        r |= run<656, 2>("fp8", 128, 512, 132, m);
        r |= run<352, 2>("nvfp4", 128, 256, 132 * 8, m);
    }
    return r;
}
