// Hopper's asynchronous units as the kernels use them: shared-memory addresses and the proxy fence,
// mbarriers, bulk copies (cp.async.bulk, sm_90) and warpgroup MMA (wgmma, sm_90a). Shared by the
// sparse MLA kernel and the indexer's score kernel.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// warpgroup MMA exists on sm_90a only: other targets take the mma.sync paths
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kHasWgmma = true;
#else
constexpr bool kHasWgmma = false;
#endif

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    uint32_t a;
    asm("{\n\t.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;\n\t}" : "=r"(a) : "l"(p));
    return a;
}
// this thread's writes to shared memory become visible to the tensor cores' reads (wgmma)
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// mbarriers in shared memory (64-bit, 8-byte aligned), addressed by smem_addr. An arrive releases
// this thread's earlier shared-memory accesses; a completed wait acquires those of the arrivals and
// the bytes of the bulk copies that completed on the phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// the initialized barriers become visible to the async proxy (bulk copies completing on them)
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// an arrival that also expects `bytes` more of bulk copies on the current phase
__device__ __forceinline__ void mbar_arrive_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// until the phase of the given parity (0 for the barrier's first phase, then 1, 0, ...) completed
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}
// Named barrier id (1..15; 0 is __syncthreads) over the first `count` threads that reach it (a
// multiple of 32): the warp-specialised attend loop synchronises its consumer warpgroups alone.
__device__ __forceinline__ void named_barrier(int id, int count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// The same where the participating warps reach the barrier from different instructions (the
// roles of a warp-specialised CTA, each in its own code): barrier.sync without .aligned, since
// bar.sync promises that every warp of a generation executes the same barrier instruction
// (compute-sanitizer's synccheck reports a break of that promise as a divergent barrier).
__device__ __forceinline__ void named_barrier_unaligned(int id, int count)
{
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
// setmaxnreg (sm_90a): this warpgroup gives back registers down to, or takes them up to, N per
// thread (a multiple of 8, 24..256). It takes effect only under a register cap at entry
// (__launch_bounds__(threads, 1)); inc waits until other warpgroups' dec have freed enough.
template <int N> __device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
// bytes (a multiple of 16; both addresses 16-byte aligned) global -> shared by the copy engine,
// completing on bar's current phase
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// Warpgroup MMA (wgmma, sm_90a): 4 warps multiply a 64-row A (shared memory or registers) by B
// (shared memory), the tensor cores reading shared memory through descriptors, fp32 accumulators
// in registers (the m16n8 fragment layout per warp: warp w of the group holds rows 16w + lane/4 and
// + 8). Operands here are 8-row x 16-byte core matrices without swizzle: LBO is the byte distance
// between core matrices along K, SBO along M or N (K-major; swapped for an N-major B).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)(lbo >> 4) << 16 | (uint64_t)(sbo >> 4) << 32;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// the accumulators are (re)defined here: keeps the compiler's reads and writes of them on the right
// side of the asynchronous MMAs
template <int N> __device__ __forceinline__ void wg_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}
// the same for A fragments in registers: the tensor cores read them until the wait
template <int N> __device__ __forceinline__ void wg_pin(uint32_t (&a)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(a[i])::"memory");
}

} // namespace dsa
