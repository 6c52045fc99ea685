// Sparse MLA key tiles: the cp.async loads of a tile of kept keys and its arrival as bf16 keys (the
// mma.sync main loop), and the producer warpgroup's stage of the warp-specialised wgmma loop.
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

// The end of a segment's compaction by T threads (th numbers them from 0), each holding EPT entries
// in mine (a local slot, or -1 for an entry dropped), cnt of them kept: their count scanned over the
// warp, then over the warps through scan[], and the kept ones stored into list[] in order; returns
// the segment's count. sync is the T threads' barrier; at its first call no thread reads list[] or
// scan[] of the previous segment any more.
template <class Lay, int T, int EPT, class Sync>
__device__ __forceinline__ int store_compacted(const CtaThread &th, const AttendSmem<Lay> &sm, const int32_t (&mine)[EPT],
                                               int cnt, const Sync &sync)
{
    static_assert(T / 32 <= 16, "scan[] holds 16 warps");
    const int warp = th.warp, lane = th.lane;
    int incl = cnt; // inclusive scan over the warp, then over the warps
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        incl += lane >= o ? v : 0;
    }
    sync(); // list[] and scan[] of the previous segment are no longer read
    if (lane == 31)
        sm.scan[warp] = incl;
    sync();
    int base = incl - cnt, n = 0;
    for (int w = 0; w < T / 32; w++) {
        base += w < warp ? sm.scan[w] : 0;
        n += sm.scan[w];
    }
#pragma unroll
    for (int e = 0; e < EPT; e++)
        if (mine[e] >= 0)
            sm.list[base++] = mine[e];
    sync();
    return n;
}

// Step 0 of every segment, by the T threads of the CTA that run the main loop: compact this rank's
// entries of the segment at seg0 into list[], in top-k order, and return how many there are. In the
// warp-specialised loop (Roles) every role calls it from its own code, so its barriers are the
// unaligned named barrier 3 over all T threads: __syncthreads (an aligned barrier) must be reached
// by every warp at the same instruction.
template <class Lay, int TOPK, int T, bool Roles, class SlotOf>
__device__ __forceinline__ int compact_segment(const CtaThread &th, const AttendSmem<Lay> &sm, int seg0, const SlotOf &slot_of)
{
    constexpr int SEG = TOPK < kAttendSegment ? TOPK : kAttendSegment, EPT = (SEG + T - 1) / T;
    const int tid = th.tid;
    const auto sync = [] {
        if constexpr (Roles)
            named_barrier_unaligned_n<3, T>();
        else
            __syncthreads();
    };
    int32_t mine[EPT];
    int cnt = 0;
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        const int k = seg0 + tid * EPT + e;
        const int64_t s = slot_of(k, tid * EPT + e < SEG && k < TOPK);
        mine[e] = (int32_t)s;
        cnt += s >= 0;
    }
    return store_compacted<Lay, T>(th, sm, mine, cnt, sync);
}

// compact_segment's list in two passes through list[] itself, by the T threads numbered by th,
// which meet on named barrier Bar, so that few registers are held at once: each thread looks up
// every T-th entry (the row read coalesced) and stores its slot or -1 in place; then each takes its
// EPT consecutive entries back (16-byte reads), counts, scans and stores the kept ones compacted.
template <class Lay, int TOPK, int T, int Bar, class SlotOf>
__device__ __forceinline__ int compact_segment_staged(const CtaThread &th, const AttendSmem<Lay> &sm, int seg0,
                                                      const SlotOf &slot_of)
{
    constexpr int SEG = kAttendSegment, EPT = SEG / T;
    static_assert(SEG % (4 * T) == 0 && Lay::list_off % 16 == 0, "4 consecutive entries a 16-byte read");
    const int tid = th.tid;
    const auto sync = [] { named_barrier_unaligned_n<Bar, T>(); };
    sync(); // list[] and scan[] of the previous segment are no longer read
#pragma unroll
    for (int e = 0; e < EPT; e++) {
        const int i = e * T + tid, k = seg0 + i;
        sm.list[i] = (int32_t)slot_of(k, k < TOPK);
    }
    sync();
    int32_t mine[EPT];
    int cnt = 0;
#pragma unroll
    for (int v = 0; v < EPT / 4; v++) {
        const int4 x = reinterpret_cast<const int4 *>(sm.list + tid * EPT)[v];
        mine[4 * v] = x.x, mine[4 * v + 1] = x.y, mine[4 * v + 2] = x.z, mine[4 * v + 3] = x.w;
    }
#pragma unroll
    for (int e = 0; e < EPT; e++)
        cnt += mine[e] >= 0;
    return store_compacted<Lay, T>(th, sm, mine, cnt, sync); // its first barrier: every entry read back
}

// A top-k of more than kAttendSegment entries in the warp-specialised loops: the producer warpgroups
// compact every segment alone (compact_segment_staged, named barrier 7), leave its count in
// scan[kSegmentCountSlot + the segment's parity] and meet the consumers on named barrier 3 (every
// thread; the first one also publishes the mbarriers' initialisation), after which the consumers
// read the count. Only the producers read list[]; the consumers, whose registers hold O through
// every segment, run no look-up: compacted by every role, as a top-k of one segment is, the
// look-ups beside O (and beside the producer's key stages) spilled 370-1,100 bytes at 32 and 64
// heads a CTA. Two count slots: the producers write segment s + 2's after the barrier of segment
// s + 1, which every consumer passes after reading s's.
constexpr int kSegmentCountSlot = 14;
template <class Lay, int TOPK, class SlotOf>
__device__ __forceinline__ int compact_by_producers(const CtaThread &th, const AttendSmem<Lay> &sm, int seg0,
                                                    const SlotOf &slot_of)
{
    constexpr int P = 128 * Lay::producers, C = Lay::threads - P; // the consumers come first
    static_assert(TOPK > kAttendSegment && P / 32 <= kSegmentCountSlot, "several segments; scan[] below the counts");
    const CtaThread pt(th.tid - C);
    const int n = compact_segment_staged<Lay, TOPK, P, 7>(pt, sm, seg0, slot_of);
    if (pt.tid == 0)
        sm.scan[kSegmentCountSlot + seg0 / kAttendSegment % 2] = n;
    named_barrier_unaligned_n<3, Lay::threads>();
    return n;
}

template <class Lay> __device__ __forceinline__ int count_from_producers(const AttendSmem<Lay> &sm, int seg0)
{
    named_barrier_unaligned_n<3, Lay::threads>();
    return sm.scan[kSegmentCountSlot + seg0 / kAttendSegment % 2];
}

// The count of the segment at seg0 for a producer or a consumer thread, its list compacted by every
// role (a top-k of one segment) or by the producers (several)
template <class Lay, int TOPK, class SlotOf>
__device__ __forceinline__ int segment_producers(const CtaThread &th, const AttendSmem<Lay> &sm, int seg0,
                                                 const SlotOf &slot_of)
{
    if constexpr (TOPK > kAttendSegment)
        return compact_by_producers<Lay, TOPK>(th, sm, seg0, slot_of);
    else
        return compact_segment<Lay, TOPK, Lay::threads, true>(th, sm, seg0, slot_of);
}

template <class Lay, int TOPK, class SlotOf>
__device__ __forceinline__ int segment_consumers(const CtaThread &th, const AttendSmem<Lay> &sm, int seg0,
                                                 const SlotOf &slot_of)
{
    if constexpr (TOPK > kAttendSegment)
        return count_from_producers(sm, seg0);
    else
        return compact_segment<Lay, TOPK, Lay::threads, true>(th, sm, seg0, slot_of);
}

// The producer warpgroup's half tiles (wgmma loop: KT = 64 keys, bf16 tiles of core matrices), staged
// through registers: load(t0, half) fetches the raw entries of kept keys t0 + 32 half + [0, 32) into
// registers, put(t0, half, k) writes them as rows 32 half + [0, 32) of bf16 key tile k (the caller
// has waited until the tile is free), landed() completes this thread's writes; the caller then
// fences (the tensor cores read k) and arrives on the tile's full barrier. bf16 entries need no
// conversion: put issues their cp.async straight into k and landed waits for it; load does
// nothing. Unless Staged (a pair's producer, put_pair: its half of every tile goes to both CTAs'
// tiles, so it passes through registers like the quantised entries, the row's 16-byte chunks
// stored as they came). Keys past n are zero rows (never NaN: P V reads them with P = 0).
//
// Thread (producer warp w, lane l) takes key 8w + l % 8 of the half and 16-byte chunks l / 8 + 4i of
// each part of its entry: a quarter warp writes the 8 rows of one core matrix (128 contiguous
// bytes, no bank conflict), and a warp reads 64 contiguous bytes of each of 8 entries (whole sectors).
template <class Lay, int ScaleOffset, int RopeOffset, bool Staged = Lay::format != kBf16> struct KeyStage {
    enum : int { KV = Lay::kv, LAT = Lay::lat, R = KV - LAT, Format = Lay::format, EntryBytes = Lay::entry_bytes };
    static_assert(Staged || Format == kBf16, "quantised entries are converted in registers");
    static_assert(Lay::WG && Lay::KT == 64, "two halves of 32 keys, 4 producer warps of 8 keys");
    static_assert(RopeOffset % 16 == 0 && ScaleOffset % 4 == 0, "16-byte rope chunks");
    // 16-byte latent and rope chunks per entry, and per thread (a quarter of them); staged bf16: the
    // whole row's chunks as latent ones
    enum : int {
        CL = Format == kFp8DsMla ? LAT / 16 : Format == kNvfp4DsMla ? LAT / 32 : Staged ? KV / 8 : 0,
        CR = Format == kFp8DsMla ? R / 8 : Format == kNvfp4DsMla ? R / 16 : 0,
        NL = CL / 4 > 0 ? CL / 4 : 1,
        NR = CR / 4 > 0 ? CR / 4 : 1,
        NS = Format == kFp8DsMla ? LAT / 128 : Format == kNvfp4DsMla ? 2 * NL : 1 // scales per thread
    };
    static_assert(CL % 4 == 0 && CR % 4 == 0, "chunks per quarter warp");
    static_assert(Format != kFp8DsMla || (LAT % 128 == 0 && ScaleOffset % 16 == 0 && NS % 4 == 0), "fp8_ds_mla scales");
    static_assert(Format != kBf16 || KV % 32 == 0, "bf16 rows in 16-byte chunks, 4 per quarter warp");
    const int j, q; // this thread's key in a half tile, its quarter
    uint4 lat[NL], rope[NR];
    uint32_t sc[NS]; // fp8_ds_mla: fp32 scales as bits; nvfp4_ds_mla: e4m3 codes

    __device__ __forceinline__ KeyStage(int pwarp, int lane) : j(8 * pwarp + lane % 8), q(lane / 8) {}

    __device__ __forceinline__ void load(const uint8_t *cache, const int32_t *list, int t0, int half, int n)
    {
        if constexpr (Staged) {
            const int key = t0 + 32 * half + j;
            const bool ok = key < n;
            const uint8_t *e = cache + (ok ? (int64_t)list[key] * EntryBytes : 0);
            // the quarter's first chunk, then constant offsets (load immediates: no offset held in
            // a register across the tiles)
            const uint8_t *eq = e + 16 * q;
#pragma unroll
            for (int i = 0; i < NL; i++)
                lat[i] = ok ? load16(eq + 64 * i) : make_uint4(0u, 0u, 0u, 0u);
            if constexpr (Format != kBf16) {
#pragma unroll
                for (int i = 0; i < NR; i++)
                    rope[i] = ok ? load16(eq + RopeOffset + 64 * i) : make_uint4(0u, 0u, 0u, 0u);
            }
            if constexpr (Format == kFp8DsMla) {
#pragma unroll
                for (int i = 0; i < NS / 4; i++) {
                    const uint4 v = ok ? load16(e + ScaleOffset + 16 * i) : make_uint4(0u, 0u, 0u, 0u);
                    sc[4 * i] = v.x, sc[4 * i + 1] = v.y, sc[4 * i + 2] = v.z, sc[4 * i + 3] = v.w;
                }
            } else if constexpr (Format == kNvfp4DsMla) {
                // scale blocks 2c and 2c + 1 of chunk c = q + 4i, 4 interleaved rows:
                // block b = 2c + h (h = s % 2) lies at nvfp4_scale_at(b); with c = q + 4i
                // that is the quarter's place for 2q + h, then 2i further (constant offsets, as above)
                const uint8_t *es[2];
#pragma unroll
                for (int h = 0; h < 2; h++)
                    // nvfp4_scale_at<LAT>(2 q + h), its two terms added to the pointer one by one:
                    // as one sum, ptxas made the nvfp4 loop 256 bytes longer
                    es[h] = e + ScaleOffset + (LAT / 64) * ((2 * q + h) & 3) + ((2 * q + h) >> 2);
#pragma unroll
                for (int s = 0; s < NS; s++)
                    sc[s] = ok ? es[s % 2][2 * (s / 2)] : 0u;
            }
        }
    }

    // put() for a pair of CTAs sharing key tiles (staged entries): every 16 bytes also to the
    // peer's tile at shared::cluster address peer_k, asynchronously, completing on the peer's barrier
    // peer_full (pair_bytes in all from a producer, whatever n: rows past it are zeros)
    enum : uint32_t { pair_bytes = 32u * KV * 2u };
    __device__ __forceinline__ void put_pair(int half, uint16_t *k, uint32_t peer_k, uint32_t peer_full) const
    {
        static_assert(Staged, "a pair's entries pass through registers");
        convert(32 * half + j, [&](int off, uint4 v) {
            store16(k + off, v);
            st_async16(peer_k + 2u * (uint32_t)off, v, peer_full);
        });
    }

    __device__ __forceinline__ void put(const uint8_t *cache, const int32_t *list, int t0, int half, int n, uint16_t *k) const
    {
        int row = 32 * half + j;
        // the transposed loop (16 and 32 heads): opaque here, so that the compiler derives each
        // store's offset from one register per call instead of keeping all of them across the
        // tiles (it spilled them at 32 heads)
        if constexpr (Lay::TR)
            asm volatile("" : "+r"(row));
        if constexpr (!Staged) {
            const int key = t0 + row;
            const bool ok = key < n;
            const uint8_t *e = cache + (ok ? (int64_t)list[key] * EntryBytes : 0);
#pragma unroll
            for (int i = 0; i < KV / 32; i++) {
                const int c = q + 4 * i;
                cp_async16(smem_addr(k + Lay::qk_at(row, 8 * c)), e + 16 * c, ok ? 16 : 0);
            }
            cp_async_commit();
        } else {
            convert(row, [&](int off, uint4 v) { store16(k + off, v); });
        }
    }

    // The quantised entry in registers as bf16 row `row` of a key tile: st(offset, 16 bytes) takes
    // each 16 bytes at its bf16 offset in the tile (Lay::qk_at). fp8_ds_mla: e4m3 latent x fp32
    // scale per 128 (chunk c = q + 4i: scale i / 2), bf16 rope; nvfp4_ds_mla: e2m1 latent x e4m3
    // scale per 16, e4m3 rope; staged bf16: the chunks as they are.
    template <class St> __device__ __forceinline__ void convert(int row, St st) const
    {
        if constexpr (Format == kBf16) {
#pragma unroll
            for (int i = 0; i < NL; i++)
                st(Lay::qk_at(row, 8 * (q + 4 * i)), lat[i]);
        } else if constexpr (Format == kFp8DsMla) {
#pragma unroll
            for (int i = 0; i < NL; i++) {
                const int c = q + 4 * i;
                uint4 o0, o1;
                e4m3x16_to_bf16(lat[i], __uint_as_float(sc[i / 2]), o0, o1);
                st(Lay::qk_at(row, 16 * c), o0);
                st(Lay::qk_at(row, 16 * c + 8), o1);
            }
#pragma unroll
            for (int i = 0; i < NR; i++)
                st(Lay::qk_at(row, LAT + 8 * (q + 4 * i)), rope[i]);
        } else {
#pragma unroll
            for (int i = 0; i < NL; i++)
                nvfp4_chunk_to_bf16<Lay>(lat[i], sc[2 * i], sc[2 * i + 1], row, q + 4 * i, st);
#pragma unroll
            for (int i = 0; i < NR; i++) {
                const int c = q + 4 * i;
                uint4 o0, o1;
                e4m3x16_to_bf16(rope[i], 1.0f, o0, o1);
                st(Lay::qk_at(row, LAT + 16 * c), o0);
                st(Lay::qk_at(row, LAT + 16 * c + 8), o1);
            }
        }
    }

    __device__ __forceinline__ void landed() const
    {
        if constexpr (!Staged)
            cp_async_wait_all();
    }
};

} // namespace dsa
