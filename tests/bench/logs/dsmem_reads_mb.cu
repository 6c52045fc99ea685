// Microbenchmark (throwaway instrument, not part of the product; issue 15): the read step of the
// 16-head cluster merge (dsa_wgmma_t.cuh, cluster_merge_of) alone. One row's S = 16 split CTAs in a
// cluster, 256 consumer threads each, every CTA holding 16 heads x OP = 516 floats in shared memory
// (its partial O / l and, at float 512 of a head's row, the head's LSE), as the kernel leaves them.
// After a cluster barrier, CTA r reads head r's row from all 16 CTAs (ld.shared::cluster), then uses
// what it read (a sum written to global memory, so that no load is dropped), then meets the others at
// a second barrier. Modes, the remote requests a CTA issues in brackets:
//   0 today's: every thread its head's 16 LSEs, threads 0-127 also 16 float4s of the row, then
//     the merge's arithmetic (dsa_merge.cuh's functions, as cluster_merge_of calls them) (6,144)
//   1 the prepared patch (logs/attend_cluster_merge_lse_once_f0727e0.patch): one LSE load a lane of
//     16 lanes a warp, shuffled; the float4s and the arithmetic as in 0 (2,176)
//   2 the float4s alone, the LSEs read from the CTA's own shared memory, the same arithmetic (2,048)
//   3 the LSEs alone, every thread (4,096)
//   4 as 2 over all 256 threads, 8 splits' float4s each (2,048, half the loads a thread)
// and three pushes instead of reads: every CTA sends head k's row to CTA k's receive area (a second
// 16 x OP floats), completing on an mbarrier there; the receiver waits on it and merges from its own
// shared memory, so neither barrier is needed (the second is kept here for the stamps):
//   5 bulk copies (cp.async.bulk shared::cta -> shared::cluster), one a head: 16 a CTA
//   6 st.async of 16 bytes from registers, 128 threads x 16 heads, and 16 LSEs (2,064 stores)
//   7 st.async of 8 bytes from registers, 256 threads x 16 heads (the wgmma accumulator holds
//     pairs of columns), and 16 LSEs (4,112 stores)
// Each CTA's thread 0 stamps %globaltimer after the first barrier, after its reads are used (its
// threads past a CTA barrier) and after the second barrier. Printed per mode: the medians over 50
// launches of the slowest CTA's read span and of the first barrier to the last CTA's second
// barrier, ns. One cluster (one row) a launch, and 8 clusters at once (8 rows, as many clusters of
// 16 as an H100 holds at a time) to see whether the clusters share what limits the reads.
// nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I kernels -o /tmp/dsmb tests/bench/logs/dsmem_reads_mb.cu && /tmp/dsmb
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>
#include "dsa_async.cuh" // cluster_rank, cluster_addr, ld_cluster_f32(x4), cluster_sync, smem_addr
#include "dsa_merge.cuh" // merge_lse_in, merge_lse_total, merge_weight, merge_add

constexpr int S = 16, HB = 16, LAT = 512, OP = LAT + 4, THREADS = 256;

__device__ __forceinline__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

// stamps[cluster][cta][3]: after the first barrier, after the reads are used, after the second
template <int MODE> __global__ void __cluster_dims__(S, 1, 1) __launch_bounds__(THREADS) reads(float *sink, unsigned long long *stamps)
{
    extern __shared__ __align__(16) float obuf[];
    const int tid = threadIdx.x, lane = tid % 32;
    const uint32_t r = dsa::cluster_rank();
    float *recv = obuf + HB * OP; // mode 5-7: the peers' rows of head r
    __shared__ __align__(8) unsigned long long bar_mem;
    const uint32_t bar = dsa::smem_addr(&bar_mem);
    for (int i = tid; i < HB * OP; i += THREADS)
        obuf[i] = (float)(i % 97) * 0.01f + (float)r; // a partial and its LSEs, finite
    dsa::fence_proxy_async(); // mode 5's bulk copies read obuf
    if (MODE >= 5 && tid == 0) {
        dsa::mbar_init(bar, 1);
        dsa::mbar_init_fence();
        dsa::mbar_arrive_expect(bar, MODE == 5 ? S * OP * 4 : S * (LAT * 4 + 4));
    }
    __syncthreads();
    // mode 6 and 7: the partials in registers, as the consumers hold them after the last tile
    // (read after the CTA barrier: other threads wrote them)
    float4 p4[MODE == 6 ? S : 1];
    float2 p2[MODE == 7 ? S : 1];
    if constexpr (MODE == 6) {
#pragma unroll
        for (int k = 0; k < S; k++)
            p4[k] = tid < LAT / 4 ? *(const float4 *)&obuf[k * OP + 4 * tid] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    if constexpr (MODE == 7) {
#pragma unroll
        for (int k = 0; k < S; k++)
            p2[k] = *(const float2 *)&obuf[k * OP + 2 * tid];
    }
    dsa::cluster_sync();
    unsigned long long *st = stamps + ((size_t)(blockIdx.x / S) * S + r) * 3;
    if (tid == 0)
        st[0] = now();
    const uint32_t row = dsa::smem_addr(obuf) + 4u * (uint32_t)(r * OP); // head r's row
    float acc = 0.0f;
    const bool on = tid < LAT / 4;
    if constexpr (MODE >= 5) {
        if constexpr (MODE == 5) {
            if (tid < S)
                asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                                 dsa::cluster_addr(dsa::smem_addr(recv + r * OP), (uint32_t)tid)),
                             "r"(dsa::smem_addr(obuf + tid * OP)), "r"(OP * 4), "r"(dsa::cluster_addr(bar, (uint32_t)tid))
                             : "memory");
        } else {
#pragma unroll
            for (int k = 0; k < S; k++) {
                const uint32_t kb = dsa::cluster_addr(bar, (uint32_t)k);
                if constexpr (MODE == 6) {
                    if (tid < LAT / 4)
                        dsa::st_async16(dsa::cluster_addr(dsa::smem_addr(recv + r * OP + 4 * tid), (uint32_t)k),
                                        make_uint4(__float_as_uint(p4[k].x), __float_as_uint(p4[k].y),
                                                   __float_as_uint(p4[k].z), __float_as_uint(p4[k].w)),
                                        kb);
                } else {
                    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(
                                     dsa::cluster_addr(dsa::smem_addr(recv + r * OP + 2 * tid), (uint32_t)k)),
                                 "r"(__float_as_uint(p2[k].x)), "r"(__float_as_uint(p2[k].y)), "r"(kb)
                                 : "memory");
                }
            }
            if (tid < S)
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(
                                 dsa::cluster_addr(dsa::smem_addr(recv + r * OP + LAT), (uint32_t)tid)),
                             "r"(__float_as_uint(obuf[tid * OP + LAT])), "r"(dsa::cluster_addr(bar, (uint32_t)tid))
                             : "memory");
        }
        dsa::mbar_wait(bar, 0);
        float lw[S];
        float4 x[S];
#pragma unroll
        for (int k = 0; k < S; k++) {
            lw[k] = dsa::merge_lse_in(recv[k * OP + LAT]);
            x[k] = on ? *(const float4 *)&recv[k * OP + 4 * tid] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        const float total = dsa::merge_lse_total<S>(S, [&](int k) { return lw[k]; });
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < S; k++)
            dsa::merge_add(v, dsa::merge_weight(lw[k], total), x[k]);
        acc = v.x + v.y + v.z + v.w + total;
    } else if constexpr (MODE <= 1) {
        // cluster_merge_of's reads and arithmetic (dsa_merge.cuh's functions), in its order
        float lw[S];
        float4 x[S];
        float mine = 0.0f;
        if constexpr (MODE == 1) // lane j < S reads CTA j's LSE (a warp is one head's here)
            mine = lane < S ? dsa::ld_cluster_f32(dsa::cluster_addr(row + 4u * LAT, (uint32_t)lane)) : 0.0f;
#pragma unroll
        for (int k = 0; k < S; k++) {
            if constexpr (MODE == 0)
                lw[k] = dsa::ld_cluster_f32(dsa::cluster_addr(row + 4u * LAT, (uint32_t)k));
            x[k] = on ? dsa::ld_cluster_f32x4(dsa::cluster_addr(row + 16u * (uint32_t)tid, (uint32_t)k))
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < S; k++)
            lw[k] = dsa::merge_lse_in(MODE == 0 ? lw[k] : __shfl_sync(0xffffffffu, mine, k));
        const float total = dsa::merge_lse_total<S>(S, [&](int k) { return lw[k]; });
#pragma unroll
        for (int k = 0; k < S; k++)
            lw[k] = dsa::merge_weight(lw[k], total);
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < S; k++)
            dsa::merge_add(v, lw[k], x[k]);
        acc = v.x + v.y + v.z + v.w + total;
    } else if constexpr (MODE == 3) {
        float lw[S];
#pragma unroll
        for (int k = 0; k < S; k++)
            lw[k] = dsa::ld_cluster_f32(dsa::cluster_addr(row + 4u * LAT, (uint32_t)k));
        acc = dsa::merge_lse_total<S>(S, [&](int k) { return dsa::merge_lse_in(lw[k]); });
    } else {
        // MODE 2: mode 0 with the LSEs from this CTA's own shared memory, the remote reads the
        // float4s; MODE 4: the same reads over all 256 threads, thread t dims 4 (t % 128) .. + 3 of
        // splits 8 (t / 128) .. + 7 (a merge that kept the split order would then pass one half's
        // sums to the other; only the reads are timed here)
        constexpr int N = MODE == 2 ? S : S / 2;
        const int d = tid % (LAT / 4), k0 = MODE == 2 ? 0 : tid / (LAT / 4) * (S / 2);
        const bool in = MODE == 2 ? on : true;
        float lw[S];
        float4 x[N];
#pragma unroll
        for (int k = 0; k < N; k++)
            x[k] = in ? dsa::ld_cluster_f32x4(dsa::cluster_addr(row + 16u * (uint32_t)d, (uint32_t)(k0 + k)))
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < S; k++)
            lw[k] = dsa::merge_lse_in(obuf[k * OP + LAT]);
        const float total = dsa::merge_lse_total<S>(S, [&](int k) { return lw[k]; });
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < N; k++) // static indices into lw
            dsa::merge_add(v, dsa::merge_weight(k0 == 0 ? lw[k] : lw[(k + S / 2) % S], total), x[k]);
        acc = v.x + v.y + v.z + v.w + total;
    }
    sink[(size_t)blockIdx.x * THREADS + tid] = acc;
    __syncthreads();
    if (tid == 0)
        st[1] = now();
    dsa::cluster_sync();
    if (tid == 0)
        st[2] = now();
}

// mode 0's sums, which modes 1, 5, 6 and 7 must reproduce bit for bit (the same merge of the same
// values in the same order); printed as "same sums" or the count that differ
static std::vector<float> ref;
template <int MODE> void run(const char *name, int clusters, float *sink, unsigned long long *stamps)
{
    const int smem = (MODE >= 5 ? 2 : 1) * HB * OP * 4;
    cudaFuncSetAttribute(reads<MODE>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaFuncSetAttribute(reads<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    std::vector<double> span, total;
    std::vector<unsigned long long> h((size_t)clusters * S * 3);
    for (int rep = 0; rep < 53; rep++) {
        reads<MODE><<<clusters * S, THREADS, smem>>>(sink, stamps);
        if (cudaDeviceSynchronize() != cudaSuccess) {
            printf("%s: launch failed: %s\n", name, cudaGetErrorString(cudaGetLastError()));
            return;
        }
        cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost);
        if (rep < 3)
            continue;
        double worst = 0, first = 1e30, last = 0;
        for (int c = 0; c < clusters * S; c++) {
            const unsigned long long *s = &h[(size_t)c * 3];
            worst = std::max(worst, (double)(s[1] - s[0]));
            first = std::min(first, (double)s[0]);
            last = std::max(last, (double)s[2]);
        }
        span.push_back(worst);
        total.push_back(last - first);
    }
    std::sort(span.begin(), span.end());
    std::sort(total.begin(), total.end());
    std::vector<float> got((size_t)clusters * S * THREADS);
    cudaMemcpy(got.data(), sink, got.size() * 4, cudaMemcpyDeviceToHost);
    if (MODE == 0)
        ref = got;
    int differ = 0;
    for (size_t i = 0; i < got.size(); i++)
        differ += got[i] != ref[i];
    printf("DS %-44s clusters %d: reads (slowest CTA) %6.0f ns | first barrier to last CTA's second %6.0f ns", name,
           clusters, span[span.size() / 2], total[total.size() / 2]);
    if (MODE == 1 || MODE >= 5)
        printf(differ ? " | %d sums differ from mode 0's\n" : " | same sums as mode 0\n", differ);
    else
        printf("\n");
}

int main()
{
    float *sink;
    unsigned long long *stamps;
    cudaMalloc(&sink, (size_t)8 * S * THREADS * 4);
    cudaMalloc(&stamps, (size_t)8 * S * 3 * 8);
    for (int clusters : {1, 8}) {
        run<0>("0 today's (LSEs a thread, float4s)", clusters, sink, stamps);
        run<1>("1 LSEs once a lane, shuffled; float4s", clusters, sink, stamps);
        run<2>("2 float4s alone", clusters, sink, stamps);
        run<3>("3 LSEs alone, every thread", clusters, sink, stamps);
        run<4>("4 float4s over 256 threads", clusters, sink, stamps);
        run<5>("5 push: bulk copies, a head each", clusters, sink, stamps);
        run<6>("6 push: st.async 16 B from registers", clusters, sink, stamps);
        run<7>("7 push: st.async 8 B from registers", clusters, sink, stamps);
    }
    return 0;
}
