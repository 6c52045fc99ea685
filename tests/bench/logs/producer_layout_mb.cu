// Microbenchmark (throwaway instrument, not part of the product): the 16-head attend kernel's
// producers alone, one CTA an SM, to ask whether their lane layout costs. Each CTA takes one row of
// 2048 random fp8_ds_mla entries (656 bytes: 512 latent, 16 of scales at 512, 128 of rope at 528;
// the access pattern of gather_bound_mb.cu), copies its slot list into shared memory as the kernel's
// compaction leaves it, then its warps take 8 keys each a step, D steps' loads held in registers
// before any is used (D = 1: one 64-key tile in flight over 8 warps, as the kernel; D = 2: two;
// W = 16 warps of D = 1: two tiles over twice the warps).
// Layouts of a warp's 8 keys:
//   L4: the kernel's (dsa_attend_tiles.cuh, KeyStage): lane l takes key l % 8 and the 16-byte chunks
//       l / 8 + 4 i of its latent and rope, and the key's 16 scale bytes: a load instruction reads
//       64 contiguous bytes of each of 8 keys (11 loads a lane);
//   L8: lane l takes keys l / 8 and 4 + l / 8, chunks l % 8 + 8 i: 128 contiguous bytes of each of
//       4 keys an instruction (12 loads);
//   L32: the 8 keys' 328 chunks in order, lane l chunks l + 32 j: 512 contiguous bytes (11 loads).
// Sink: the xor of what was loaded, or (S) the conversion's shared-memory stores without the
// conversion: each latent 16 bytes stored twice (its 32 bf16 bytes), each rope 16 bytes once, at
// the kernel's core-matrix place (L4: a quarter warp's 8 keys, 128 contiguous bytes) or a 128-byte
// swizzle (L8: one key's row of 128 bytes, its 16-byte chunks at (c ^ key) % 8, the lanes 4-7 of a
// key storing their odd chunk first), both without bank conflicts. L2 flushed before each call.
// nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/plm producer_layout_mb.cu && /tmp/plm
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>
#include <cuda_runtime.h>
#include "mb_timing.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

constexpr int E = 656, K = 2048, SMEM = 8192 + 2 * 64 * 1152 + 1024; // list, two bf16 tiles, slack

template <int L> struct Lanes;
template <> struct Lanes<4> {
    enum { N = 11 };
    // the byte offset of load j of lane l within its key, and the key (0..7)
    __device__ static int key(int l, int) { return l % 8; }
    __device__ static int off(int l, int j) { return j < 8 ? 16 * (l / 8) + 64 * j : j < 10 ? 528 + 16 * (l / 8) + 64 * (j - 8) : 512; }
};
template <> struct Lanes<8> {
    enum { N = 12 };
    __device__ static int key(int l, int j) { return l / 8 + 4 * (j / 6); }
    __device__ static int off(int l, int j) { j %= 6; return j < 4 ? 16 * (l % 8) + 128 * j : j == 4 ? 528 + 16 * (l % 8) : 512; }
};
template <> struct Lanes<32> {
    enum { N = 11 };
    __device__ static int key(int l, int j) { return (l + 32 * j) / 41; }
    __device__ static int off(int l, int j) { return 16 * ((l + 32 * j) % 41); }
};

template <int L, bool S, int D, int W = 8, int SP = 1>
__global__ void __launch_bounds__(32 * W, 1) producer(const uint8_t *cache, const int *slots, uint4 *sink)
{
    constexpr int K = ::K / SP; // this CTA's keys: split blockIdx.x % SP of row blockIdx.x / SP
    extern __shared__ __align__(1024) uint8_t smem[];
    int *list = reinterpret_cast<int *>(smem);
    uint8_t *tile = smem + 8192;
    for (int i = threadIdx.x; i < K; i += blockDim.x)
        list[i] = slots[(size_t)blockIdx.x * K + i];
    __syncthreads();
    using Ln = Lanes<L>;
    constexpr int N = Ln::N;
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int t0 = 0; t0 < K; t0 += 8 * W * D) {
        uint4 v[D][N];
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int j = 0; j < N; j++) {
                const int k = t0 + 8 * W * d + 8 * w + Ln::key(lane, j);
                const bool ok = Ln::key(lane, j) < 8 && Ln::off(lane, j) < E;
                v[d][j] = ok ? *reinterpret_cast<const uint4 *>(cache + (size_t)list[k] * E + Ln::off(lane, j)) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
        for (int d = 0; d < D; d++)
#pragma unroll
            for (int j = 0; j < N; j++) {
                if constexpr (!S || L == 32) {
                    acc.x ^= v[d][j].x, acc.y ^= v[d][j].y, acc.z ^= v[d][j].z, acc.w ^= v[d][j].w;
                } else {
                    const int row = 8 * (w % 8) + Ln::key(lane, j), o = Ln::off(lane, j);
                    if (o == 512)
                        continue; // the scales: kept in registers by the kernel
                    uint8_t *tb = tile + ((w / 8 + d) % 2) * 64 * 1152;
                    // bf16 chunk (16 bytes) index of the first half, and how many halves
                    const int c = o < 512 ? 2 * (o / 16) : 64 + (o - 528) / 16, n = o < 512 ? 2 : 1;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        if (h >= n)
                            break;
                        int cc = c + h;
                        if constexpr (L == 8)
                            cc = c + (h ^ (n == 2 ? (lane / 4) % 2 : 0));
                        uint32_t at;
                        if constexpr (L == 4) // core matrices: (8 rows x 16 bytes), row blocks inner
                            at = (uint32_t)((cc * 8 + row / 8) * 128 + (row % 8) * 16);
                        else // 128-byte swizzle: 64-dim blocks of 64 rows x 128 bytes
                            at = (uint32_t)((cc / 8) * 8192 + row * 128 + ((cc % 8) ^ (row % 8)) * 16);
                        *reinterpret_cast<uint4 *>(tb + at) = v[d][j];
                    }
                }
            }
        if constexpr (S)
            __syncwarp();
    }
    if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u)
        sink[0] = acc;
}


// The copy engine's gather: each of the CTA's R raw-tile slots (64 entries, 41,984 bytes) filled by
// 64 bulk copies of one entry each (lanes of warps 0-1), completing on the slot's mbarrier; all
// warps wait for a slot, read it (each thread 16-byte chunks t, t + 256, ...) and xor them, meet,
// and the slot is refilled with the tile R on. R slots: R tiles in flight.
__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
template <int R>
__global__ void __launch_bounds__(256, 1) tma_gather(const uint8_t *cache, const int *slots, uint4 *sink)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    int *list = reinterpret_cast<int *>(smem);
    unsigned long long *bar = reinterpret_cast<unsigned long long *>(smem + 8192);
    uint8_t *raw = smem + 8192 + 64;
    constexpr int TB = 64 * E, T = K / 64;
    for (int i = threadIdx.x; i < K; i += blockDim.x)
        list[i] = slots[(size_t)blockIdx.x * K + i];
    if (threadIdx.x < R)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(bar + threadIdx.x)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const auto issue = [&](int u) {
        const int slot = u % R;
        if (threadIdx.x == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar + slot)), "r"(TB) : "memory");
        __syncwarp();
        if (threadIdx.x < 64)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             sa(raw + slot * TB + threadIdx.x * E)),
                         "l"(cache + (size_t)list[64 * u + threadIdx.x] * E), "r"(E), "r"(sa(bar + slot))
                         : "memory");
    };
    if (threadIdx.x < 64)
        for (int u = 0; u < R && u < T; u++)
            issue(u);
    uint4 acc = make_uint4(0, 0, 0, 0);
    for (int u = 0; u < T; u++) {
        const int slot = u % R;
        uint32_t done = 0;
        while (!done)
            asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                         : "=r"(done) : "r"(sa(bar + slot)), "r"((uint32_t)((u / R) % 2)) : "memory");
        const uint4 *t = reinterpret_cast<const uint4 *>(raw + slot * TB);
        for (int c = threadIdx.x; c < TB / 16; c += 256) {
            const uint4 v = t[c];
            acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
        }
        __syncthreads();
        if (threadIdx.x < 64 && u + R < T)
            issue(u + R);
    }
    if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u)
        sink[0] = acc;
}

// T = 0: producer<L, S, D, W, SP>, SP CTAs a row (SP = 2 with half the shared memory: two CTAs an SM);
// T = R > 0: tma_gather<R>
template <int L, bool S, int D, int W = 8, int SP = 1, int T = 0> int run(int rows)
{
    const int SEQ = 16384;
    const std::vector<int64_t> s64 = bench_slots(rows, K);
    const std::vector<int> slots(s64.begin(), s64.end()); // the kernel's list holds 32-bit slots
    uint8_t *cache;
    int *ds;
    uint4 *sink, *fl;
    const size_t cb = (size_t)rows * SEQ * E, fln = (256u << 20) / 16;
    CK(cudaMalloc(&cache, cb));
    CK(cudaMemset(cache, 1, cb));
    CK(cudaMalloc(&ds, slots.size() * 4));
    CK(cudaMemcpy(ds, slots.data(), slots.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&sink, 16));
    CK(cudaMalloc(&fl, fln * 16));
    const auto kern = T ? (void (*)(const uint8_t *, const int *, uint4 *))tma_gather<T ? T : 1> : producer<L, S, D, W, SP>;
    const int smem = T ? 8192 + 64 + T * 64 * E : SP == 2 ? 100 * 1024 : SMEM;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, kern));
    const double bytes = (double)rows * K * E;
    float us = timed([&] { kern<<<rows * SP, T ? 256 : 32 * W, smem>>>(cache, ds, sink); }, fl, fln);
    uint8_t *dst;
    CK(cudaMalloc(&dst, (size_t)bytes));
    float cus = timed([&] { cudaMemcpyAsync(dst, cache, (size_t)bytes, cudaMemcpyDeviceToDevice); }, fl, fln);
    CK(cudaGetLastError());
    if (T)
        printf("TMA R=%d     ", T);
    else
        printf("L%-2d %-6s W=%2d D=%d SP=%d ", L, S ? "stores" : "xor", W, D, SP);
    printf("rows=%3d (%3d regs, %d local): %6.1f us %5.0f GB/s | copy read+write %5.0f GB/s | share %.2f\n", rows, fa.numRegs, (int)fa.localSizeBytes, us, bytes / us * 1e-3, 2 * bytes / cus * 1e-3,
           (bytes / us) / (2 * bytes / cus));
    cudaFree(cache), cudaFree(ds), cudaFree(sink), cudaFree(fl), cudaFree(dst);
    return 0;
}

int main()
{
    int r = 0;
    for (int rows : {128}) {
        r |= run<4, false, 1>(rows);
        r |= run<8, false, 1>(rows);
        r |= run<32, false, 1>(rows);
        r |= run<4, true, 1>(rows);
        r |= run<8, true, 1>(rows);
        r |= run<4, false, 2>(rows);
        r |= run<8, false, 2>(rows);
        r |= run<4, true, 2>(rows);
        r |= run<8, true, 2>(rows);
        r |= run<4, false, 1, 16>(rows); // sixteen warps, a tile each: two tiles in flight
        r |= run<8, false, 1, 16>(rows);
        r |= run<4, true, 1, 16>(rows);
        r |= run<8, true, 1, 16>(rows);
        r |= run<4, true, 1, 8, 2>(rows); // two CTAs an SM, each half a row
        r |= run<4, false, 1, 8, 1, 1>(rows); // the copy engine, 1, 2, 3 tiles in flight
        r |= run<4, false, 1, 8, 1, 2>(rows);
        r |= run<4, false, 1, 8, 1, 3>(rows);
    }
    return r;
}
