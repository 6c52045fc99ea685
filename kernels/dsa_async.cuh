// Hopper's asynchronous units as the kernels use them: shared-memory addresses and the proxy fence,
// mbarriers, bulk copies (cp.async.bulk, sm_90) and warpgroup MMA (wgmma, sm_90a). Shared by the
// sparse MLA kernel and the indexer's score kernel.
#pragma once
#include "dsa_numerics.cuh"

// Warpgroup MMA inline asm (dsa_wgmma.cuh, dsa_index_wgmma.cuh): DSA_WG_D<n>(i), the operands of n
// fp32 accumulators d[i .. i + n); DSA_WG_REGS<n>, their registers %0 .. %(n - 1) in the instruction.
#define DSA_WG_D4(i) "+f"(d[i]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3])
#define DSA_WG_D8(i) DSA_WG_D4(i), DSA_WG_D4((i) + 4)
#define DSA_WG_D16(i) DSA_WG_D8(i), DSA_WG_D8((i) + 8)
#define DSA_WG_D32(i) DSA_WG_D16(i), DSA_WG_D16((i) + 16)
#define DSA_WG_D64(i) DSA_WG_D32(i), DSA_WG_D32((i) + 32)
#define DSA_WG_D128(i) DSA_WG_D64(i), DSA_WG_D64((i) + 64)
#define DSA_WG_REGS4 "{%0,%1,%2,%3}"
#define DSA_WG_REGS8 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define DSA_WG_REGS16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define DSA_WG_REGS32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define DSA_WG_REGS64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define DSA_WG_REGS128 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"

namespace dsa {

// warpgroup MMA exists on sm_90a only: other targets take the mma.sync paths
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kHasWgmma = true;
#else
constexpr bool kHasWgmma = false;
#endif

// sm_100 and later (compiled for, never timed here: register caps that ptxas there needs differently)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr bool kSm100 = true;
#else
constexpr bool kSm100 = false;
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
// Named barrier Id (1..15; 0 is __syncthreads) over the first Count threads that reach it (a
// multiple of 32): the warp-specialised attend loops synchronise some of their warpgroups alone.
// Id and Count are immediates: a loop whose groups each sync on their own barrier names it in the
// instruction (a uniform branch per group), never in a register
template <int Id, int Count> __device__ __forceinline__ void named_barrier_n()
{
    asm volatile("bar.sync %0, %1;" ::"n"(Id), "n"(Count) : "memory");
}
// The same where the participating warps reach the barrier from different instructions (the
// roles of a warp-specialised CTA, each in its own code): barrier.sync without .aligned, since
// bar.sync promises that every warp of a generation executes the same barrier instruction
// (compute-sanitizer's synccheck reports a break of that promise as a divergent barrier); the id
// and count immediates too (racecheck misreads a barrier id held in a register). And its arrival
// half: this warp counts toward the barrier's Count and goes on (a producer of data that the
// waiting warps read after their barrier.sync)
template <int Id, int Count> __device__ __forceinline__ void named_barrier_unaligned_n()
{
    asm volatile("barrier.sync %0, %1;" ::"n"(Id), "n"(Count) : "memory");
}
// (compiled with DSA_SANITIZE_BARRIERS, the runtime's switch for compute-sanitizer, a full
// barrier.sync: racecheck misreads barrier.arrive and reports the accesses that later barriers of
// the same warps order as races; with barrier.sync it reports none)
template <int Id, int Count> __device__ __forceinline__ void named_barrier_arrive_n()
{
#ifdef DSA_SANITIZE_BARRIERS
    asm volatile("barrier.sync %0, %1;" ::"n"(Id), "n"(Count) : "memory");
#else
    asm volatile("barrier.arrive %0, %1;" ::"n"(Id), "n"(Count) : "memory");
#endif
}
// setmaxnreg (sm_90a): this warpgroup gives back registers down to, or takes them up to, N per
// thread (a multiple of 8, 24..256). It takes effect only under a register cap at entry
// (__launch_bounds__(threads, 1)); inc waits until other warpgroups' dec have freed enough.
template <int N> __device__ __forceinline__ void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> __device__ __forceinline__ void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
// Clusters (sm_90): this CTA's rank in its cluster; the address in CTA `rank`'s shared memory
// (shared::cluster) of the variable at shared address addr of this CTA; a 16-byte asynchronous store
// there that completes its 16 bytes on an mbarrier there (st.async: no fence, no wait; the peer's
// wait on that barrier sees the bytes); an arrival on an mbarrier there; and the cluster's barrier,
// reached by every thread of both CTAs.
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t cluster_addr(uint32_t addr, uint32_t rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void st_async16(uint32_t addr, uint4 v, uint32_t bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
                 : "memory");
}
// the CTAs in this CTA's cluster; loads of 4 and 16 bytes at a shared::cluster address (cluster_addr),
// the latter 16-byte aligned
__device__ __forceinline__ uint32_t cluster_size()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr)
{
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr));
    return v;
}
__device__ __forceinline__ float4 ld_cluster_f32x4(uint32_t addr)
{
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
    return v;
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
// the cluster's barrier in two halves: this thread's arrival (its mbarrier inits published by
// fence.mbarrier_init), then, where it first needs the peer's, the wait for every thread's
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;" ::: "memory"); }

// bytes (a multiple of 16; both addresses 16-byte aligned) global -> shared by the copy engine,
// completing on bar's current phase
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// An L2 cache policy (createpolicy) for all of an access's bytes: lines read once go first when L2
// needs room (evict_first), lines read again soon go last (evict_last)
__device__ __forceinline__ uint64_t l2_evict_first()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t l2_evict_last()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}

// bulk_copy with its source's lines under an L2 policy
__device__ __forceinline__ void bulk_copy_hint(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar,
                                               uint64_t policy)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                 : "memory");
}

// A 32-bit store with its line under an L2 policy
__device__ __forceinline__ void store_hint(uint32_t *p, uint32_t v, uint64_t policy)
{
    asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" ::"l"(p), "r"(v), "l"(policy) : "memory");
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
