// Sparse MLA key tiles: the cp.async loads of a tile of kept keys, and its arrival as bf16 keys.
// Shared by the wgmma and the mma.sync main loops.
#pragma once
#include "dsa_attend_dequant.cuh"

namespace dsa {

// 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Issues the cp.async of the tile starting at kept key t0 of n: its raw cache entries, or for bf16
// the key rows straight into key buffer buf. Keys past n are zero rows.
template <class Lay>
__device__ __forceinline__ void issue_tile(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache, int t0,
                                           int buf, int n)
{
    constexpr int KT = Lay::KT, RS = Lay::RS, EntryBytes = Lay::entry_bytes;
    constexpr int CPK = EntryBytes / 16; // 16-byte chunks per cache entry
    const int warp = th.warp, lane = th.lane;
    for (int j = warp; j < KT; j += kAttendThreads / 32) {
        const bool ok = t0 + j < n;
        const uint8_t *e = cache + (ok ? (int64_t)sm.list[t0 + j] * EntryBytes : 0);
#pragma unroll
        for (int c = lane; c < CPK; c += 32)
            cp_async16(Lay::format == 0 ? smem_addr(sm.k_s + buf * KT * RS + Lay::qk_at(j, 8 * c))
                                        : smem_addr(sm.raw_s + j * EntryBytes + 16 * c),
                       e + 16 * c, ok ? 16 : 0);
    }
    cp_async_commit();
}

// Waits for the tile issued last and makes it the bf16 key tile every warp may read: dequantised
// from the raw entries (fp8_ds_mla, nvfp4_ds_mla), or already in place (bf16). Ends on a barrier,
// which also means every warp is done with the previous tile.
template <class Lay, int ScaleOffset, int RopeOffset> __device__ __forceinline__ void land_tile(const AttendSmem<Lay> &sm)
{
    cp_async_wait_all();
    if constexpr (Lay::WG && Lay::format == 0)
        fence_proxy_async(); // key rows written by this thread's copies, read by the tensor cores
    __syncthreads(); // the raw tile has landed; the previous tile's P V is done
    if constexpr (Lay::format != 0) {
        dequant_tile<Lay, ScaleOffset, RopeOffset>(sm.raw_s, sm.k_s);
        if constexpr (Lay::WG)
            fence_proxy_async(); // read by the tensor cores
        __syncthreads();
    }
}

} // namespace dsa
