// Sparse MLA key tiles: the cp.async loads of a tile of kept keys, and its arrival as bf16 keys.
// Shared by the wgmma and the mma.sync main loops.
#pragma once
#include "dsa_attend_dequant.cuh"

namespace dsa {

// The key pipeline: a ring of Lay::RING slots (dsa_attend_layout.cuh), tile j of a segment (kept keys
// [j KT, j KT + KT)) in slot j % RING, AHEAD = Lay::AHEAD tiles issued ahead of the one computed.
// Per segment with n kept keys, every thread of the CTA runs, in this order and unconditionally:
//   ring_start (tiles 0 .. AHEAD - 1), then per tile it = 0, 1, ... while it KT < n:
//   land_tile(it), ring_next(it) (tile it + AHEAD), then the MMAs of tile it.
// Invariants, each true by construction:
//   - one cp.async group per tile index, committed in index order by every thread (empty for a tile
//     at or past n), so before land_tile(it) each thread has committed exactly AHEAD + it groups of
//     the segment, and wait_group(AHEAD - 1) leaves at most tiles it + 1 .. it + AHEAD - 1 pending:
//     this thread's copies of tile it have landed, and land_tile's barrier makes every thread's
//     visible. Groups of an earlier segment are older, so complete too (and empty by then: the
//     segment's last real tile was waited for).
//   - ring_next(it) writes slot (it + AHEAD) % RING only when nothing will read it again: raw formats
//     (AHEAD = RING): the slot of tile it, whose only reader, the dequantisation in land_tile(it), ends
//     on a barrier before ring_next(it); bf16 (AHEAD = RING - 1): the slot of tile it - 1, the key tile
//     of its S and P V, which every warp has finished at land_tile(it)'s first barrier.
//   - a segment starts after the compaction's barriers: every warp is past the last P V and the last
//     dequantisation of the previous segment before ring_start writes a slot again.

// Issues the cp.async of tile j (kept keys t0 = j KT ..) into its ring slot and commits them as one
// group: the raw cache entries, or for bf16 the key rows straight into the slot's key tile. Keys past
// n are zero rows; a tile wholly past n copies nothing and commits an empty group (the group count
// per tile is what the waits rely on).
template <class Lay>
__device__ __forceinline__ void issue_tile(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache, int j, int n)
{
    constexpr int KT = Lay::KT, EntryBytes = Lay::entry_bytes;
    constexpr int CPK = EntryBytes / 16; // 16-byte chunks per cache entry
    const int warp = th.warp, lane = th.lane, t0 = j * KT, slot = Lay::slot_of_tile(j);
    if (t0 < n) {
        uint16_t *const kt = sm.k_s + Lay::key_tile_off(j);
        uint8_t *const raw = sm.raw_s + slot * Lay::STAGE;
        for (int r = warp; r < KT; r += kAttendThreads / 32) {
            const bool ok = t0 + r < n;
            const uint8_t *e = cache + (ok ? (int64_t)sm.list[t0 + r] * EntryBytes : 0);
#pragma unroll
            for (int c = lane; c < CPK; c += 32)
                cp_async16(Lay::format == 0 ? smem_addr(kt + Lay::qk_at(r, 8 * c)) : smem_addr(raw + r * EntryBytes + 16 * c),
                           e + 16 * c, ok ? 16 : 0);
        }
    }
    cp_async_commit();
}

// The segment's first AHEAD tiles (slots 0 .. AHEAD - 1).
template <class Lay>
__device__ __forceinline__ void ring_start(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache, int n)
{
#pragma unroll
    for (int j = 0; j < Lay::AHEAD; j++)
        issue_tile(th, sm, cache, j, n);
}

// After land_tile(it): tile it + AHEAD, into the slot nothing reads any more (see above).
template <class Lay>
__device__ __forceinline__ void ring_next(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache, int it, int n)
{
    issue_tile(th, sm, cache, it + Lay::AHEAD, n);
}

// Waits for tile it and makes it the bf16 key tile every warp may read (k_s + key_tile_off(it)):
// dequantised from its raw slot (fp8_ds_mla, nvfp4_ds_mla), or already in place (bf16). Ends on a
// barrier, which also means every warp is done with the previous tile.
template <class Lay, int ScaleOffset, int RopeOffset>
__device__ __forceinline__ void land_tile(const AttendSmem<Lay> &sm, int it)
{
    cp_async_wait<Lay::AHEAD - 1>();
    if constexpr (Lay::WG && Lay::format == 0)
        fence_proxy_async(); // key rows written by this thread's copies, read by the tensor cores
    __syncthreads(); // tile it has landed; the previous tile's P V is done
    if constexpr (Lay::format != 0) {
        dequant_tile<Lay, ScaleOffset, RopeOffset>(sm.raw_s + Lay::slot_of_tile(it) * Lay::STAGE, sm.k_s);
        if constexpr (Lay::WG)
            fence_proxy_async(); // read by the tensor cores
        __syncthreads(); // the key tile is written; the raw slot is free
    }
}

} // namespace dsa
