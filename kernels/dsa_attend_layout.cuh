// The sparse MLA CTA's shape and shared-memory layout, shared by its wgmma and mma.sync main loops.
#pragma once
#include "dsa_async.cuh"
#include "dsa_cache_format.cuh"
#include "dsa_numerics.cuh"

namespace dsa {

constexpr int kAttendThreads = 256; // the mma.sync loop's threads (8 warps)
// the warp-specialised wgmma loops': two consumer warpgroups (0, 1) and P producer warpgroups (2, 3),
// each producer of two dequantising one half of every key tile (the generator's attend_producers:
// 2 at 16 heads, gen/spec.c says why)
__host__ __device__ constexpr int attend_ws_threads(int producers) { return 256 + 128 * producers; }
// warpgroup MMA exists on sm_90a only (plain sm_90 and sm_100a targets take the mma.sync path)
constexpr bool kAttendWgmma = kHasWgmma;
constexpr int kAttendSegment = DSA_ATTEND_SEGMENT; // top-k entries compacted at a time (dsa_abi.h)

// The shared-memory layout of a sparse MLA CTA (bytes), for HB heads, KV = query/key dims, LAT =
// latent dims, cache Format (0 bf16, 1 fp8_ds_mla, 2 nvfp4_ds_mla) of EntryBytes per key, launched
// with Threads threads (attend_threads<C>, dsa_attend.cuh). The runtime reads `bytes` from the compiled
// module (dsa_attend_smem_<config>), so this is the one place it is computed.
template <int HB, int KV, int LAT, int Format, int EntryBytes, int Threads> struct AttendLayout {
    static_assert(HB == 16 || HB == 32 || HB == 64, "heads per CTA");
    static_assert(KV % 16 == 0 && LAT % 64 == 0 && LAT < KV, "dims");
    static_assert(EntryBytes % 16 == 0, "cache entries in 16-byte chunks (cp.async)");
    static_assert(Threads == kAttendThreads || Threads == attend_ws_threads(1) ||
                      (Threads == attend_ws_threads(2) && HB < 64),
                  "threads per CTA: one-role, or two consumer warpgroups and one producer (two below 64 heads)");
    // the arguments again, and the counts below that the main loops add, as enumerators: NVRTC emits
    // every constant data member as a global of the module
    enum : int { heads = HB, kv = KV, lat = LAT, format = Format, entry_bytes = EntryBytes, threads = Threads };
    enum : int { KSTEPS = KV / 16 };                  // 16-dim k-steps of S = Q K^T
    // 384 threads on sm_90a: warp-specialised wgmma, tiles of core matrices; else 8 warps on
    // mma.sync, padded rows (a 384-thread CTA idles its third warpgroup). 64 heads run S = Q K^T
    // with the heads along M (dsa_wgmma.cuh); 16 and 32 the products transposed (TR: S^T = K Q^T,
    // O^T = V^T P^T, keys and latent dims along M, the heads along N: no head padded to 64;
    // dsa_wgmma_t.cuh)
    static constexpr bool WG = kAttendWgmma && Threads != kAttendThreads;
    static constexpr bool TR = WG && HB < 64;
    // wgmma: producer warpgroups, and the registers a thread of each role takes with setmaxnreg: the
    // CTA starts with 65536 / Threads each (168 or 128, rounded down to 8), the producers give some
    // back and the two consumer warpgroups take them (the consumers hold O in registers). ptxas
    // allocates each role's code within its setmaxnreg count (a 512-thread test kernel's consumers
    // used 158 registers), but checks each wgmma's operands against the launch's count: a 64-head
    // consumer's m64n256 product (128 accumulators) needs 154, more than the 128 of 512 threads
    // (ptxas C7602), so 64 heads keep one producer; the runtime checks the entry count, which
    // setmaxnreg needs
    enum : int { producers = WG ? Threads / 128 - 2 : 0 };
    // deep (nvfp4 at 16 heads): each producer thread holds two tiles' raw entries, two tiles'
    // gathers in flight (dsa_wgmma.cuh), in 128 registers, the consumers keeping 128. Measured
    // (issue 15, tests/bench/RESULTS.md): 6-7% faster than one tile for nvfp4 at 16 heads x 64-128
    // rows; for fp8 (whose put, not the loads, sets the producers' pace) 2-3% slower at 64 rows,
    // 5% at 8, one row unchanged (its second gather is not what it waits on), 2% faster at 128;
    // bf16 unchanged, one tile
    static constexpr bool deep = producers == 2 && Format == kNvfp4DsMla;
    enum : int { producer_regs = producers == 2 ? (deep ? 128 : 96) : 136 };
    enum : int { consumer_regs = producers == 2 ? 256 - producer_regs : 184 };
    static_assert(!WG || (producer_regs % 8 == 0 && consumer_regs % 8 == 0 &&
                          producers * producer_regs + 2 * consumer_regs <= (65536 / Threads / 8 * 8) * (Threads / 128)),
                  "setmaxnreg: multiples of 8 within the CTA's registers");
    // keys per tile; wgmma: 32 per consumer warpgroup, every format
    static constexpr int KT = Format == kBf16 && !WG ? 32 : 64;
    static constexpr int RS = WG ? KV : KV + 8;       // bf16 per Q/K row: padded, 16-byte chunks odd, so ldmatrix hits distinct banks
    static constexpr int WM = HB < 32 ? HB : 32;      // mma.sync: heads per warp tile
    enum : int { MB = WM / 16 };                      // mma.sync: 16-row blocks per warp tile
    static constexpr int S_TILES = (HB / WM) * (KT / 32); // mma.sync: warp tiles of S (WM x 32)
    static constexpr int SPLITS = WG ? 1 : kAttendThreads / 32 / S_TILES; // mma.sync: warps sharing S, each over part of KV
    static constexpr int SS = KT + 8;                 // fp32 per S row
    static constexpr int PS = WG ? KT : KT + 8;       // bf16 per P row
    static constexpr int RG = HB / WM;                // mma.sync P V: warp rows
    // P V: latent dims per warp (mma.sync) or consumer warpgroup (wgmma; TR: every group all of them)
    static constexpr int DW = TR ? LAT : WG ? LAT / 2 : LAT / (kAttendThreads / 32 / RG);
    enum : int { NB = DW / 8 };                       // mma.sync P V: 8-dim blocks per warp
    enum : int { OB = LAT / 64 };                     // TR: 64-dim blocks of O^T (m64 each)
    // O accumulators per thread (TR: OB blocks of m64 x HB, HB / 2 each)
    static constexpr int ACC = TR ? OB * (HB / 2) : WG ? DW / 2 : (WM / 16) * (DW / 8) * 4;
    // two key tiles where the next one is written while the tensor cores read this one: bf16 keys
    // (cp.async straight into the tile) and every wgmma tile (the producer warpgroup dequantises
    // through registers, no raw buffer); the mma.sync path dequantises fp8/nvfp4 from a raw buffer
    static constexpr int KBUF = Format == kBf16 || WG ? 2 : 1;
    static constexpr int q_off = 0;
    static constexpr int k_off = q_off + HB * RS * 2;
    static constexpr int raw_off = k_off + KBUF * KT * RS * 2;
    static constexpr int s_off = raw_off + (KBUF == 2 ? 0 : KT * EntryBytes);
    static constexpr int p_off = s_off + (SPLITS - 1) * HB * SS * 4;
    // wgmma: P (bf16, HB x KT) lives in the rope columns of its key tile, dead once both consumer
    // warpgroups have S (the columns [LAT, KV) of a tile of KT = HB rows hold HB x (KV - LAT) >= HB x KT)
    // TR: P^T (bf16, HB x KT) likewise, in the rope columns of its group's tile (below, pt_at)
    static constexpr int stat_off = p_off + (WG ? 0 : HB * PS * 2); // m, l, corr per head (wgmma: each group's l, the corrections of each key tile)
    // TR: per head, each consumer warp's column maxima of a tile [2][4][HB] (at the end its share of
    // l), each group's m at two parities [2][2][HB], each consumer thread's share of l [2][HB / 4][128]
    enum : int { STATS = TR ? 12 + 64 : WG ? 4 : 3 };
    // wgmma: bytes between 8-row groups of core matrices in a Q or K tile (KV columns) and in P (KT)
    static constexpr uint32_t QK_SBO = KV / 8 * 128, P_SBO = KT / 8 * 128;
    // bf16 offset of element (r, c) of a tile of C columns: core matrices (wgmma) or rows of Pitch
    template <int C, int Pitch> static __device__ __forceinline__ int at(int r, int c)
    {
        return WG ? (r / 8) * (C / 8) * 64 + (c / 8) * 64 + (r % 8) * 8 + c % 8 : r * Pitch + c;
    }
    static __device__ __forceinline__ int qk_at(int r, int c) { return at<KV, RS>(r, c); }
    static __device__ __forceinline__ int p_at(int r, int c) { return at<KT, PS>(r, c); }
    // TR: bf16 offset in a key tile of P^T (head h, key k), a K-major B operand (head rows of 8 keys):
    // the core matrix of heads 8(h/8).. and keys 8(k/8).. is the tile's core matrix of keys 8(k/8)..
    // and rope columns LAT + 8(h/8).., so the key groups lie QK_SBO apart and the head groups 128 bytes
    static __device__ __forceinline__ int pt_at(int h, int k)
    {
        return (k / 8) * (KV / 8) * 64 + (LAT / 8 + h / 8) * 64 + (h % 8) * 8 + k % 8;
    }
    // bf16 offset from k_off of the key tile of a segment's tile it (bf16 keys alternate between two)
    static __device__ __forceinline__ int key_tile_off(int it) { return KBUF == 2 ? (it % 2) * KT * RS : 0; }
    static constexpr int list_off = stat_off + STATS * HB * 4;
    static constexpr int scan_off = list_off + kAttendSegment * 4;
    // wgmma: the key tiles' mbarriers, full[2] then empty[2] (8 bytes each, 8-byte aligned); TR: then
    // the consumer groups' end-of-loop barrier (dsa_wgmma_t.cuh)
    static constexpr int bar_off = scan_off + 16 * 4;
    static constexpr int bytes = bar_off + (TR ? 5 * 8 : WG ? 4 * 8 : 0);
    static_assert((WG || SPLITS >= 2) && DW % 16 == 0 && bytes <= 232448, "fits an sm_90 CTA (227 KiB)");
    static_assert(!WG || TR || (DW == 256 && KT == HB && KV - LAT >= KT && KV % 32 == 0 && bar_off % 8 == 0), "wgmma shapes");
    // TR: P^T fits the rope columns; a group's scaled O (HB rows of LAT + 4 floats) fits its key
    // tile, where the final merge passes it
    // wgmma: floats per head row of O at the end (TR: a group's O in its key tile, + 4; 64 heads: the
    // CTA's O across both key tiles, + 8; either way no bank conflict)
    enum : int { OP = TR ? LAT + 4 : LAT + 8 };
    static_assert(!TR || (KT == 64 && KV - LAT >= HB && KV % 32 == 0 && bar_off % 8 == 0 && HB * OP * 4 <= KT * KV * 2),
                  "wgmma shapes, transposed");
    static_assert(!WG || TR || HB * OP * 4 <= KBUF * KT * RS * 2, "64 heads: O fits the key tiles at the end");
};

// This thread's place in the CTA: thread, warp, lane, and the lane's row (lane / 4) and column pair
// (lane % 4) in an m16n8 accumulator fragment. Computed once, at the top of the kernel.
struct CtaThread {
    int tid, warp, lane, g, t4;
    __device__ __forceinline__ CtaThread() : CtaThread((int)threadIdx.x) {}
    // thread tid of a group of whole warps (its fields counted from the group's first thread)
    __device__ __forceinline__ explicit CtaThread(int tid_)
        : tid(tid_), warp(tid / 32), lane(tid % 32), g(lane / 4), t4(lane % 4)
    {
    }
};

// th again, in a loop over segments: with Fresh (a top-k of several segments), its fields formed
// anew from the thread's index behind an empty asm, which the compiler cannot see through, so that
// what a segment derives from them (a producer's key stages, the consumers' fragment rows) is formed
// in each segment instead of held through the loop: held, they spilled at 64 heads a CTA.
template <bool Fresh> __device__ __forceinline__ CtaThread segment_thread(const CtaThread &th)
{
    if constexpr (!Fresh)
        return th;
    int tid = th.tid;
    asm volatile("" : "+r"(tid));
    return CtaThread(tid);
}

// The CTA's shared memory, cut by the layout: the query tile, the key tile(s), the raw cache entries
// of the next tile, S (and the split partials), P, per-head m, l and corr, and the segment's list of
// kept local slots with its scan (and in scan[14, 16) the segment counts where the producers compact
// alone: compact_by_producers).
template <class Lay> struct AttendSmem {
    uint16_t *q_s, *k_s, *p_s;
    uint8_t *raw_s;
    float *s_s, *m_s, *l_s, *corr_s;
    int32_t *list, *scan;
    uint32_t bars; // wgmma: the shared-memory address of full[0] (full[b] at + 8 b, empty[b] at + 16 + 8 b)
    __device__ __forceinline__ explicit AttendSmem(uint8_t *smem)
        : q_s(reinterpret_cast<uint16_t *>(smem + Lay::q_off)), k_s(reinterpret_cast<uint16_t *>(smem + Lay::k_off)),
          p_s(reinterpret_cast<uint16_t *>(smem + Lay::p_off)), raw_s(smem + Lay::raw_off),
          s_s(reinterpret_cast<float *>(smem + Lay::s_off)), m_s(reinterpret_cast<float *>(smem + Lay::stat_off)),
          l_s(m_s + Lay::heads), corr_s(l_s + Lay::heads), list(reinterpret_cast<int32_t *>(smem + Lay::list_off)),
          scan(reinterpret_cast<int32_t *>(smem + Lay::scan_off)), bars(smem_addr(smem + Lay::bar_off))
    {
    }
};

} // namespace dsa
