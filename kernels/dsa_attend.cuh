// Stage C, the sparse MLA kernel of one CTA: top-k to local slots, then attention on tensor cores.
// bf16 operands, fp32 accumulators: S = Q K^T over the 576 query/key dims, online softmax in fp32,
// O += P V over the 512 latent dims. On sm_90a every head count runs on warpgroup MMA (wgmma: 384
// threads, a producer warpgroup that loads and dequantises the key tiles and two consumer
// warpgroups whose operands the tensor cores read from shared memory): 64 heads per CTA with the
// heads along the MMA's 64 rows (dsa_wgmma.cuh), 16 or 32 with the products transposed, keys and
// latent dims along the rows (dsa_wgmma_t.cuh). Other targets (sm_90, sm_100a) run mma.sync
// m16n8k16 with ldmatrix operands (8 warps; dsa_mma_sync.cuh).
//
// One CTA = HB heads of one token, 8 warps (mma.sync). Per segment of up to 2048 top-k entries, the CTA first
// compacts the entries this rank owns into a list of local slots (order kept), so a DCP rank only
// pays for its own keys. Then, per tile of KT kept keys (dsa_attend_tiles.cuh loads them):
//   1. the tile's raw cache entries, loaded by cp.async while the previous tile was computed, are
//      dequantised to bf16 in shared memory (fp8_ds_mla, nvfp4_ds_mla; bf16 entries are copied by
//      cp.async straight into a double-buffered key tile), as FlashMLA does (dsa_attend_dequant.cuh);
//   2. S = Q K^T, the partial sums over the dims added in a fixed order (bit-for-bit repeatable),
//      scaled and masked;
//   3. online softmax per head in fp32, P to bf16;
//   4. O = O * corr + P V, each warpgroup (warp) a block of heads x latent dims held in registers.
// The CPU reference rounds the dequantised keys to bf16 the same way, so both compute one function.
#pragma once
#include "dsa_merge.cuh"
#include "dsa_mma_sync.cuh"
#include "dsa_pack_q.cuh"
#include "dsa_wgmma.cuh"
#include "dsa_wgmma_t.cuh"

namespace dsa {

// Select<B, T, F>::type is T when B, else F (std::conditional; the library uses no toolkit headers).
template <bool B, class T, class F> struct Select { using type = T; };
template <class T, class F> struct Select<false, T, F> { using type = F; };

// The length of request req, 0 for a request id out of range (every entry of its rows then -1).
__device__ __forceinline__ int32_t request_len(int32_t req, const dsa_attend_params &p)
{
    return req >= 0 && req < p.num_requests ? p.seq_lens[req] : 0;
}

// The local slot of top-k entry g of a row of request req, of length len (request_len), on this
// rank, or -1: position g belongs to rank (g / I) % W, at local position (g / (W I)) I + g % I
// (docs/design.md, "DCP"). Invalid entries (negative, beyond the request, blocks the table does not
// have, slots beyond the cache) are treated as -1 and never read. Without a branch, so that a
// thread's look-ups of several entries (compact_segment) issue their reads together, one memory
// latency for all of them rather than one after another; and the block's read waits only for the
// entry and the request id, not for the length: it needs a request in range and a block of its
// row of the table ([num_requests, max_blocks]), and whether g lies inside the request is tested
// beside it.
template <int W, int I, int BlockSize>
__device__ __forceinline__ int64_t local_slot(int32_t g, int32_t req, int32_t len, const dsa_attend_params &p)
{
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I, b = local / BlockSize;
    const bool in = g >= 0 && req >= 0 && req < p.num_requests && (g / I) % W == p.rank && b < p.max_blocks;
    const int32_t blk = in ? p.block_table[(int64_t)req * p.max_blocks + b] : -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return blk >= 0 && g < len && slot < p.num_slots ? slot : -1;
}

// Sparse MLA of HB heads (heads >= the real ones come as zero queries and are never stored) of one
// token over its kept keys. q_chunk(h, c) gives bf16 q[h][8c .. 8c + 8) as 16 bytes; slot_of(k, true)
// the local slot of top-k entry k or -1; store(h, d, x0, x1) takes O / l at (h, d), (h, d + 1),
// and with d = -1 the LSE of head h (natural log; -inf for a head with no kept key, output 0).
// Cluster = 2 (the generator's attend_cluster): the CTA and the other of its cluster attend the same
// keys for different heads and share the key tiles (wgmma_producer's Pair).
template <int HB, int KV, int LAT, int TOPK, int Format, int EntryBytes, int ScaleOffset, int RopeOffset, int Threads,
          int Cluster, class QChunk, class SlotOf, class Store>
__device__ __forceinline__ void sparse_mla(uint8_t *smem, const uint8_t *cache, float softmax_scale,
                                           QChunk q_chunk, SlotOf slot_of, Store store)
{
    using Lay = AttendLayout<HB, KV, LAT, Format, EntryBytes, Threads>;
    const AttendSmem<Lay> sm(smem);
    const CtaThread th;
    const int tid = th.tid;
    // a 384-thread CTA on the mma.sync path (the runtime asked for a target without wgmma): the
    // third warpgroup leaves; barriers for all threads no longer wait for exited ones
    if (!Lay::WG && tid >= kAttendThreads)
        return;
    // Q in q_s, by the 256 threads that run the mma.sync loop or the wgmma loops' consumers: q_load
    // reads a thread's latent chunks (plain loads) into registers, all before any is stored, so that
    // they are in flight together (the compiler cannot move a load through a generic pointer above a
    // store to shared memory); q_store stores them, then forms the rope chunks, one at a time. 8
    // neighbouring threads on 8 heads.
    constexpr int CL = LAT / 8, CR = (KV - LAT) / 8, NL = HB * CL, PER = (NL + kAttendThreads - 1) / kAttendThreads;
    // item i of a run of N chunks a head: its head (8 neighbouring items on 8 heads) and chunk
    const auto head_of = [](int i, int n) { return 8 * (i / 8 / n) + i % 8; };
    const auto chunk_of = [](int i, int n) { return i / 8 % n; };
    uint4 qlat[PER];
    const auto q_load = [&] {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int i = tid + j * kAttendThreads;
            if (i < NL)
                qlat[j] = q_chunk(head_of(i, CL), chunk_of(i, CL));
        }
    };
    const auto q_store = [&] {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int i = tid + j * kAttendThreads;
            if (i < NL)
                store16(sm.q_s + Lay::qk_at(head_of(i, CL), 8 * chunk_of(i, CL)), qlat[j]);
        }
        for (int i = tid; i < HB * CR; i += kAttendThreads) {
            const int h = head_of(i, CR), c = CL + chunk_of(i, CR);
            store16(sm.q_s + Lay::qk_at(h, 8 * c), q_chunk(h, c));
        }
    };
    if constexpr (Lay::WG) {
        constexpr bool Pair = Cluster == 2;
        static_assert(!Pair || !Lay::TR, "pairs: 64-head CTAs");
        if (tid == 0) {
            for (int b = 0; b < 2; b++) {
                // full[b]: the producer warpgroups' threads (a pair: the peer's bytes too, expected by
                // the local producer's thread 0 as it arrives)
                mbar_init(sm.bars + 8 * b, 128 * Lay::producers);
                // empty[b]: the consumer warpgroups' threads (transposed loop: group b's alone; a pair:
                // and the peer's 8 consumer warps)
                mbar_init(sm.bars + 16 + 8 * b, (Lay::TR ? 128 : 256) + (Pair ? 8 : 0));
            }
            if constexpr (Lay::TR)
                mbar_init(sm.bars + 32, 256); // the consumer groups' end of loop: their threads
            mbar_init_fence();
        }
        // the barriers are published by the first segment's barrier over every thread (named
        // barrier 3: compact_segment, or compact_by_producers and the consumers' wait for the
        // count), before any thread uses them; a pair's barriers to the peer by the cluster's
        // barrier, whose wait comes after the first compaction (its loads overlap the peer's
        // arrival). The main loop stores O and the LSE
        if constexpr (Pair)
            cluster_arrive_relaxed(); // waited on where a role first reaches into the peer (the main loop)
        // the keys first: the producer issues the first tile's loads as soon as the first segment
        // is compacted; the consumers issue their query loads before that compaction and store Q
        // after it, while the keys' loads are in flight, then meet on named barrier 6 (their 256
        // threads) before any reads q_s
        if (tid < kAttendThreads)
            q_load();
        const auto consumers_q = [&] {
            q_store();
            fence_proxy_async(); // the tensor cores read q_s
            named_barrier_unaligned_n<6, kAttendThreads>();
        };
        if constexpr (Lay::TR)
            wgmma_t_main_loop<Lay, TOPK, ScaleOffset, RopeOffset>(th, sm, cache, softmax_scale, slot_of, store,
                                                                  consumers_q);
        else
            wgmma_main_loop<Lay, TOPK, ScaleOffset, RopeOffset, Pair>(th, sm, cache, softmax_scale, slot_of, store,
                                                                      consumers_q);
        // a pair: neither CTA leaves while the other may still store into its tiles or arrive on
        // its barriers
        if constexpr (Pair)
            cluster_sync();
        return;
    }
    q_load(); // published by the first compaction's barriers
    q_store();
    if (tid < HB) {
        sm.m_s[tid] = neg_inf();
        sm.l_s[tid] = 0.0f;
    }
    mma_sync_main_loop<Lay, TOPK, ScaleOffset, RopeOffset>(th, sm, cache, softmax_scale, slot_of, store);
    if (tid < HB)
        store(tid, -1, sm.l_s[tid] > 0.0f ? sm.m_s[tid] + logf(sm.l_s[tid]) : neg_inf(), 0.0f); // d = -1: the LSE
}

// ---- the attend kernel body: one CTA = HB gathered heads of one token ----

// The CTA's dynamic shared memory for configuration C; the runtime reads it from the module
// (dsa_attend_smem_<config>, cuModuleGetGlobal).
// The CTA's threads depend on the target the module is compiled for: 384 for the warp-specialised
// wgmma loops (every head count on sm_90a), else 256 (mma.sync); the runtime reads them from the
// module too (dsa_attend_threads_<config>), since a context may compile for another target than
// the spec's first.
template <class C>
constexpr int attend_threads = kAttendWgmma ? attend_ws_threads(C::attend_producers) : kAttendThreads;
template <class C>
using AttendLayoutOf = AttendLayout<C::attend_heads_per_cta, C::kv_dim, C::kv_lora_rank, C::cache_format,
                                    C::cache_bytes, attend_threads<C>>;
template <class C> constexpr unsigned int attend_smem_bytes = AttendLayoutOf<C>::bytes;

// The CTA's row, blockIdx.x: held in a register (t), or where the top-k takes several segments read
// again at each use, behind a volatile asm the compiler cannot merge (held through every role and
// segment, it spilled at 64 heads a CTA)
template <class C> __device__ __forceinline__ int row_of_cta(int t)
{
    if constexpr (C::idx_topk > kAttendSegment)
        asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(t));
    return t;
}

// q_chunk(h, c): bf16 q[h][8c .. 8c + 8) of gathered head hg0 + h, zeros past the real heads. Gathered
// head hg is head hg % heads_local of rank hg / heads_local (the all-gather is rank-major). At DCP =
// 1 the CTA packs it from the host's q_lat and q_pe (packed_q_chunk, pack_q's formula): no pack
// kernel, no packed copy; the position check is counted once per token, by CTA (t, 0, 0).
template <class C> struct QueryChunks {
    const dsa_attend_params &p;
    int t, hg0;
    int64_t pos;
    bool pos_ok;
    __device__ __forceinline__ QueryChunks(const dsa_attend_params &p_, int t_, int hg0_) : p(p_), t(t_), hg0(hg0_)
    {
        if constexpr (C::dcp == 1)
            pos_ok = q_position_ok<C>(p.pack, t, pos, blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0);
    }
    __device__ __forceinline__ uint4 operator()(int h, int c) const
    {
        const int hg = hg0 + h, r = hg / C::heads_local, hl = hg % C::heads_local;
        if (hg >= C::heads_gathered)
            return make_uint4(0u, 0u, 0u, 0u);
        if constexpr (C::dcp == 1)
            return packed_q_chunk<C>(p.pack, row_of_cta<C>(t), hl, 8 * c, pos, pos_ok);
        else
            return load16(p.q + (((int64_t)r * p.num_tokens + row_of_cta<C>(t)) * C::heads_local + hl) * C::kv_dim + 8 * c);
    }
};

// slot_of(k, valid): the local slot of entry k of the token's top-k row on this rank, or -1 (also
// where !valid: k past the row; no entry is read then); with splits > 1 only the entries of this
// CTA's split (k % splits == split; splits a power of two, mask = splits - 1). Without a branch
// (local_slot says why).
template <class C> struct SlotOfTopk {
    const dsa_attend_params &p;
    const int32_t *row;
    int32_t req, len, split, mask;
    __device__ __forceinline__ int64_t operator()(int k, bool valid) const
    {
        const bool mine = valid && (k & mask) == split;
        if constexpr (C::idx_topk > kAttendSegment) { // the row's address formed at each look-up
            const int t = row_of_cta<C>(0);
            const int32_t r = p.req_of_token[t], g = mine ? p.topk[t * p.topk_stride + k] : -1;
            return local_slot<C::dcp, C::interleave, C::block_size>(g, r, request_len(r, p), p);
        }
        return local_slot<C::dcp, C::interleave, C::block_size>(mine ? row[k] : -1, req, len, p);
    }
};

// DCP = 1: store(h, d, x0, x1) writes O in bf16 to out, and (d = -1) the LSE x0 to lse if given.
template <class C> struct StoreOut {
    const dsa_attend_params &p;
    int t, hg0;
    // head hg's index in this CTA's token's rows of out and lse
    __device__ __forceinline__ int64_t row(int hg) const { return (int64_t)row_of_cta<C>(t) * C::heads_local + hg; }
    __device__ __forceinline__ void operator()(int h, int d, float x0, float x1) const
    {
        const int hg = hg0 + h;
        if (hg >= C::heads_gathered)
            return;
        if (d < 0) {
            if (p.lse)
                p.lse[row(hg)] = x0;
            return;
        }
        *reinterpret_cast<uint32_t *>(p.out + row(hg) * C::kv_lora_rank + d) = bf16_pair(x0, x1);
    }
    // O / l at dims d .. d + 3 (d a multiple of 4), as two 4-byte stores: out is only 4-byte
    // aligned (dsa.h), and one 8-byte store faults where it is not 8
    __device__ __forceinline__ void four(int h, int d, float4 o) const
    {
        const int hg = hg0 + h;
        if (hg >= C::heads_gathered)
            return;
        bf16x4_store(p.out + row(hg) * C::kv_lora_rank + d, o);
    }
};

// DCP > 1: store(h, d, x0, x1) writes the partial (bf16) and its LSE (fp32) into the exchange's block
// for the rank that owns head hg (ExchangeTarget, dsa_merge.cuh: this rank's send buffer, or that
// rank's receive buffer with the fused exchange), which the merge kernel combines.
template <class C> struct StorePartial {
    const dsa_attend_params &p;
    int t, hg0;
    __device__ __forceinline__ void operator()(int h, int d, float x0, float x1) const
    {
        const int hg = hg0 + h;
        if (hg >= C::heads_gathered)
            return;
        const ExchangeTarget<C> x(p.xdest, p.xfused, p.rank, p.num_tokens, hg / C::heads_local);
        const int hl = hg % C::heads_local, t = row_of_cta<C>(this->t);
        if (d < 0)
            *x.lse(t, hl) = x0;
        else
            *reinterpret_cast<uint32_t *>(x.out(t, hl) + d) = bf16_pair(x0, x1);
    }
};

// splits > 1: store(h, d, x0, x1) writes the fp32 partial of this CTA's split to the split workspace
// ([splits][T][heads_gathered]); the split merge (dsa_merge.cuh) combines a row's splits.
template <class C> struct StoreSplit {
    const dsa_attend_params &p;
    int t, hg0, split;
    // head hg's row of this CTA's split and token in the workspace
    __device__ __forceinline__ int64_t row(int hg) const
    {
        return ((int64_t)split * p.num_tokens + row_of_cta<C>(t)) * C::heads_gathered + hg;
    }
    __device__ __forceinline__ void operator()(int h, int d, float x0, float x1) const
    {
        const int hg = hg0 + h;
        if (hg >= C::heads_gathered)
            return;
        const int64_t srow = row(hg);
        if (d < 0)
            p.split_lse[srow] = x0;
        else
            *reinterpret_cast<float2 *>(p.split_out + srow * C::kv_lora_rank + d) = make_float2(x0, x1);
    }
    __device__ __forceinline__ void four(int h, int d, float4 o) const
    {
        const int hg = hg0 + h;
        if (hg >= C::heads_gathered)
            return;
        *reinterpret_cast<float4 *>(p.split_out + row(hg) * C::kv_lora_rank + d) = o;
    }
};

// The store of the CTA: its split's partial when the row is split, else the output (DCP = 1) or the
// partial for the exchange (DCP > 1). p.splits is the same for every CTA of the launch.
template <class C> struct StoreAttend {
    typename Select<C::dcp == 1, StoreOut<C>, StorePartial<C>>::type whole;
    StoreSplit<C> part;
    __device__ __forceinline__ void operator()(int h, int d, float x0, float x1) const
    {
        if (part.p.splits > 1)
            part(h, d, x0, x1);
        else
            whole(h, d, x0, x1);
    }
    // O / l at dims d .. d + 3 of head h (d a multiple of 4): at DCP = 1 in one call, its address
    // formed once; at DCP > 1 as two pairs, since the four-dim stores left the 32-head kernel of DCP
    // = 8 (tests/gen/derive/merge_even.lua) 8 bytes of spills
    __device__ __forceinline__ void four(int h, int d, float4 o) const
    {
        if constexpr (C::dcp > 1) {
            (*this)(h, d, o.x, o.y);
            (*this)(h, d + 2, o.z, o.w);
        } else if (part.p.splits > 1) {
            part.four(h, d, o);
        } else {
            whole.four(h, d, o);
        }
    }
    // the row merged by its split CTAs in their cluster (cluster_merge, dsa_wgmma_t.cuh): what one
    // split writes. At DCP = 1 only: the exchange's stores, inlined in that merge's unrolled loads,
    // left the 16-head kernel 8 bytes of spills (a DCP > 1 row is merged by the split merge kernel);
    // and only where a row can split (elsewhere the kernel carries no merge code)
    static constexpr bool cluster_merges = C::dcp == 1 && C::attend_max_splits > 1;
    __device__ __forceinline__ void merged(int h, int d, float x0, float x1) const { whole(h, d, x0, x1); }
};

// The most split CTAs of a row that may merge it in their cluster (a launch in clusters of the
// row's split CTAs, cluster_merge): the 16- and 32-head loop on sm_90a at DCP = 1, up to the
// plan's splits and cluster_merge_most (dsa_wgmma_t.cuh); 0 elsewhere (the split merge kernel
// merges). The runtime reads it from the module (dsa_attend_cluster_merge_<config>) and launches
// such clusters where the device holds them.
template <class C>
constexpr unsigned int attend_cluster_merge =
    AttendLayoutOf<C>::TR && StoreAttend<C>::cluster_merges && C::attend_cluster == 1 && C::attend_max_splits > 1
        ? (C::attend_max_splits < cluster_merge_most(C::attend_heads_per_cta) ? C::attend_max_splits
                                                                               : cluster_merge_most(C::attend_heads_per_cta))
        : 0;

// Top-k positions to this rank's slots (compacted: only this rank's keys are computed), then
// attention of HB heads per CTA over the kept keys. Grid (T, heads_gathered / HB, splits). A row (or
// split) with no kept key gives output 0 and LSE -inf (the merges' neutral element).
template <class C> __device__ __forceinline__ void attend(const dsa_attend_params &p)
{
    static_assert(attend_ws_threads(C::attend_producers) == C::attend_ws_threads,
                  "the plan's warp-specialised CTA (PLAN.md) is the one the kernel lays out");
    constexpr int HB = C::attend_heads_per_cta;
    extern __shared__ __align__(16) uint8_t smem[];
    const int t = blockIdx.x, hg0 = blockIdx.y * HB, split = blockIdx.z;
    const int32_t req = p.req_of_token[t];
    const QueryChunks<C> q_chunk{p, t, hg0};
    const SlotOfTopk<C> slot_of{p, p.topk + t * p.topk_stride, req, request_len(req, p), split, p.splits - 1};
    const StoreAttend<C> store{{p, t, hg0}, {p, t, hg0, split}};
    sparse_mla<HB, C::kv_dim, C::kv_lora_rank, C::idx_topk, C::cache_format, C::cache_bytes, C::cache_scale_offset,
               C::cache_rope_offset, attend_threads<C>, C::attend_cluster>(smem, p.kv_cache, C::softmax_scale(), q_chunk,
                                                                          slot_of, store);
}

} // namespace dsa
