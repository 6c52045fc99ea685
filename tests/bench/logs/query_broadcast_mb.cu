// Measurement only (issue 14): how long CTAs take to read one row's indexer query (B bytes, just
// written by an earlier kernel, so in L2) when A of them read the same bytes at once, as the score
// kernel's CTAs of one decode row do, against A CTAs reading distinct rows; and the same through one
// bulk copy a CTA. Each CTA of 128 threads stamps the global timer as it starts and once its bytes
// are in shared memory; the line gives the span (latest end - earliest start) and the mean CTA's.
// nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/qb tests/bench/logs/query_broadcast_mb.cu && /tmp/qb
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

__device__ __forceinline__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

__global__ void fill(uint4 *buf, size_t n, uint32_t salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        buf[i] = make_uint4((uint32_t)i ^ salt, salt, (uint32_t)i, 1u);
}

// the query kernel's way: a warp per 128 bytes, each lane two 2-byte stores (the first store of
// every warp writes half of each 4-byte word, the second the other half)
__global__ void fill_halves(uint8_t *buf, size_t bytes, uint32_t salt)
{
    const size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    for (size_t w = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; w < bytes / 128; w += warps) {
        uint8_t *row = buf + w * 128 + lane * 4;
        *reinterpret_cast<uint16_t *>(row) = (uint16_t)(salt + lane);
        *reinterpret_cast<uint16_t *>(row + 2) = (uint16_t)(salt ^ lane);
    }
}

// mode 0: 16-byte loads, every thread B / 16 / 128 of them, all issued before any is stored
// mode 1: one cp.async.bulk of B bytes by thread 0, completing on an mbarrier
template <int B>
__global__ void __launch_bounds__(128) readq(const uint8_t *src, int distinct, int mode, unsigned long long *stamps, uint32_t *sink)
{
    __shared__ __align__(128) uint8_t sm[B];
    __shared__ __align__(8) uint64_t bar;
    const unsigned long long t0 = now();
    const uint8_t *row = src + (distinct ? (size_t)blockIdx.x * B : 0);
    if (mode == 0) {
        constexpr int PER = B / 16 / 128;
        uint4 v[PER];
#pragma unroll
        for (int u = 0; u < PER; u++)
            v[u] = reinterpret_cast<const uint4 *>(row)[u * 128 + threadIdx.x];
#pragma unroll
        for (int u = 0; u < PER; u++)
            reinterpret_cast<uint4 *>(sm)[u * 128 + threadIdx.x] = v[u];
    } else {
        const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar), d = (uint32_t)__cvta_generic_to_shared(sm);
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(B) : "memory");
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                         "l"(row), "r"(B), "r"(b)
                         : "memory");
        }
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done)
                         : "r"(b)
                         : "memory");
    }
    __syncthreads();
    const unsigned long long t1 = now();
    if (threadIdx.x == 0) {
        stamps[2 * blockIdx.x] = t0;
        stamps[2 * blockIdx.x + 1] = t1;
    }
    if (sm[threadIdx.x * 7 % B] == 0xAB && threadIdx.x == 999)
        sink[0] = 1; // keeps the stores
}

int main()
{
    const int maxc = 528;
    uint8_t *buf;
    unsigned long long *st;
    uint32_t *sink;
    cudaMalloc(&buf, (size_t)maxc * 8192);
    cudaMalloc(&st, 2 * maxc * sizeof(unsigned long long));
    cudaMalloc(&sink, 4);
    std::vector<unsigned long long> h(2 * maxc);
    printf("QB bytes ctas distinct mode span_ns mean_cta_ns (median of 5); QH: written in 2-byte halves\n");
    for (int halves : {1})
        for (int ctas : {1, 64, 128}) {
            std::vector<double> spans;
            for (int rep = 0; rep < 6; rep++) {
                fill_halves<<<264, 256>>>(buf, (size_t)maxc * 8192, (uint32_t)rep + halves);
                readq<8192><<<ctas, 128>>>(buf, 0, 0, st, sink);
                cudaMemcpy(h.data(), st, 2 * ctas * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
                unsigned long long a = ~0ull, z = 0;
                for (int c = 0; c < ctas; c++)
                    a = std::min(a, h[2 * c]), z = std::max(z, h[2 * c + 1]);
                if (rep > 0)
                    spans.push_back((double)(z - a));
            }
            std::sort(spans.begin(), spans.end());
            printf("QH 8192 %d 0 0 %.0f\n", ctas, spans[2]);
        }
    for (int bytes : {4096, 8192})
        for (int mode : {0, 1})
            for (int distinct : {0, 1})
                for (int ctas : {1, 32, 64, 128}) {
                    std::vector<double> spans, means;
                    for (int rep = 0; rep < 6; rep++) {
                        fill<<<264, 256>>>(reinterpret_cast<uint4 *>(buf), (size_t)maxc * 8192 / 16, (uint32_t)rep);
                        if (bytes == 4096)
                            readq<4096><<<ctas, 128>>>(buf, distinct, mode, st, sink);
                        else
                            readq<8192><<<ctas, 128>>>(buf, distinct, mode, st, sink);
                        cudaMemcpy(h.data(), st, 2 * ctas * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
                        unsigned long long a = ~0ull, z = 0;
                        double m = 0;
                        for (int c = 0; c < ctas; c++) {
                            a = std::min(a, h[2 * c]);
                            z = std::max(z, h[2 * c + 1]);
                            m += (double)(h[2 * c + 1] - h[2 * c]);
                        }
                        if (rep > 0) {
                            spans.push_back((double)(z - a));
                            means.push_back(m / ctas);
                        }
                    }
                    std::sort(spans.begin(), spans.end());
                    std::sort(means.begin(), means.end());
                    printf("QB %d %d %d %d %.0f %.0f\n", bytes, ctas, distinct, mode, spans[2], means[2]);
                }
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", e == cudaSuccess ? "done" : cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
