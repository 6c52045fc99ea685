// Stage C's LSE merges: a row's split partials (C.4b, when attend splits a row's keys over CTAs) and
// the DCP ranks' partials (C.5, DCP > 1). Both are one function, lse_merge.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// The DCP exchange's buffer for T rows: W blocks, block r for (or from) rank r, each the partial
// outputs [T][heads_local][kv_lora_rank] in bf16 then their LSEs [T][heads_local] in fp32:
// C::exchange_row bytes per row (the plan's number, which the runtime moves in one all-to-all;
// docs/layouts.md, "DCP exchange"). bf16 halves the bytes of fp32 partials; the merge is still fp32.
template <class C> struct ExchangeBlocks {
    static constexpr int H = C::heads_local, L = C::kv_lora_rank;
    static_assert(C::exchange_row == H * (2 * L + 4), "the plan's exchange row is this layout's");
    uint8_t *base;
    int T;
    __device__ __forceinline__ uint8_t *block(int r) const { return base + (int64_t)r * T * C::exchange_row; }
    __device__ __forceinline__ uint16_t *out(int r, int t, int hl) const
    {
        return reinterpret_cast<uint16_t *>(block(r)) + ((int64_t)t * H + hl) * L;
    }
    __device__ __forceinline__ float *lse(int r, int t, int hl) const
    {
        return reinterpret_cast<float *>(block(r) + (int64_t)T * H * L * 2) + (int64_t)t * H + hl;
    }
};

// Where a rank's partials of the heads of rank r go (dsa_attend_params.xdest): block r of its own
// send buffer (the all-to-all then moves it), or, with the fused exchange, block `rank` of rank r's
// receive buffer, written over the interconnect, which leaves only a barrier before the merge.
// xdest[r] is picked by constant indices: indexed by a variable, the kernel parameter's array had
// its address taken, which copied the whole parameter block to local memory (112 bytes of stack in
// the split merge).
template <class C> struct ExchangeTarget {
    ExchangeBlocks<C> x;
    int b;
    __device__ __forceinline__ ExchangeTarget(uint8_t *const (&xdest)[DSA_MAX_PEERS], int xfused, int rank, int T, int r)
        : x{xfused ? pick(xdest, r) : xdest[0], T}, b(xfused ? rank : r)
    {
    }
    static __device__ __forceinline__ uint8_t *pick(uint8_t *const (&a)[DSA_MAX_PEERS], int r)
    {
        static_assert(C::dcp <= DSA_MAX_PEERS, "a block per rank");
        uint8_t *v = a[0];
#pragma unroll
        for (int i = 1; i < C::dcp; i++)
            v = r == i ? a[i] : v;
        return v;
    }
    __device__ __forceinline__ uint16_t *out(int t, int hl) const { return x.out(b, t, hl); }
    __device__ __forceinline__ float *lse(int t, int hl) const { return x.lse(b, t, hl); }
};

constexpr int kMergeMax = DSA_MERGE_MAX; // the most partials one merge takes (attend_max_splits, DCP ranks)
constexpr int kMergeLoads = 8;            // partials a merge thread loads at once, unless told fewer

// The merges' arithmetic, in one place for lse_merge below and for the split CTAs of a cluster that
// merge a row among themselves (dsa_wgmma_t.cuh): a partial's LSE as a merge counts it (NaN or +inf
// as -inf); the merged LSE of n of them, lse(r) for r = 0 .. n - 1 in that order (-inf where every
// one is); a partial's weight in the merged output; and its output added with that weight (the
// caller skips a -inf partial, whose output is never added).
__device__ __forceinline__ float merge_lse_in(float x) { return (x != x || x == -neg_inf()) ? neg_inf() : x; }
// f(r) for r = 0 .. n - 1 in order: NMax = 0, a loop to n; NMax > 0 (n <= NMax), unrolled to NMax,
// so that f may index a thread's registers by r
template <int NMax, class F> __device__ __forceinline__ void merge_each(int n, const F &f)
{
    if constexpr (NMax > 0) {
#pragma unroll
        for (int r = 0; r < NMax; r++)
            if (r < n)
                f(r);
    } else {
        for (int r = 0; r < n; r++)
            f(r);
    }
}
template <int NMax, class Lse> __device__ __forceinline__ float merge_lse_total(int n, const Lse &lse)
{
    float m = neg_inf();
    merge_each<NMax>(n, [&](int r) { m = fmaxf(m, lse(r)); });
    if (m == neg_inf())
        return neg_inf();
    float sum = 0.0f;
    merge_each<NMax>(n, [&](int r) {
        if (lse(r) != neg_inf())
            sum += expf(lse(r) - m);
    });
    return m + logf(sum);
}
__device__ __forceinline__ float merge_weight(float lse, float total) { return lse != neg_inf() ? expf(lse - total) : 0.0f; }
__device__ __forceinline__ void merge_add(float4 &v, float w, const float4 &x)
{
    v.x += w * x.x, v.y += w * x.y, v.z += w * x.z, v.w += w * x.w;
}

// The merge of the n <= kMergeMax partials of one (token, head) by the whole CTA, IN THE ORDER r = 0
// .. n - 1 and in fp32, so the result is bit-for-bit repeatable: lse_at(r) is partial r's LSE,
// part4(r, d) its output at latent dims d .. d + 3 (a float4); put4(d, v) takes the merged output
// for the 4 dims of this thread (d = 4 threadIdx.x, then by 4 blockDim.x, below L); returns the
// merged LSE. NaN or +inf LSEs count as -inf, -inf partials weigh 0, and an all-empty (token, head)
// is output 0 and LSE -inf (docs/design.md, "DCP"; every partial's output is loaded, the attend
// kernel writes each, 0 where empty, but a -inf partial's is never added). The LSEs are read once,
// by n threads (a merge CTA has at least 32, the plan's merge_threads), and their weights computed
// once, in shared memory: the loops run to n, not to the most there can be (unrolled to 32, the
// merge held 128 registers a thread). A thread's loads of G partials go out at once, 4 dims each:
// one dim a thread and 8 partials at a time, a 1-row call's merge of 16 splits waited on 8 rounds
// of memory latency (12 us, as long as the attention it merged). G = 8: 84 registers. 16 (159
// registers, 3 CTAs an SM): one row no faster, 8 rows of 64-128 heads 3-4 us and 64 rows of 2 splits
// 2-10 us slower. 2 (32 registers, 16 CTAs an SM): 64 rows of 2 splits 2-5 us faster at 32-64 heads,
// 8 rows of 16 splits 6-7 us slower; hence the split merge's two entries (tests/bench/RESULTS.md,
// thirteenth session). G changes which loads are in flight together, never the sums: the result is
// the same bits whatever G.
template <int L, int G = kMergeLoads, class LseAt, class Part4, class Put4>
__device__ __forceinline__ float lse_merge(int n, LseAt lse_at, Part4 part4, Put4 put4)
{
    static_assert(L % 4 == 0, "4 latent dims a thread");
    static_assert(G >= 1 && G <= kMergeMax, "partials loaded at once");
    __shared__ float lse_s[kMergeMax], w_s[kMergeMax];
    const int tid = threadIdx.x;
    if (tid < n)
        lse_s[tid] = merge_lse_in(lse_at(tid));
    __syncthreads();
    const float total = merge_lse_total<0>(n, [&](int r) { return lse_s[r]; });
    if (tid < n) // a -inf partial weighs 0 (and is skipped below)
        w_s[tid] = merge_weight(lse_s[tid], total);
    __syncthreads();
    for (int d = 4 * tid; d < L; d += 4 * (int)blockDim.x) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int r0 = 0; r0 < n; r0 += G) { // G partials' loads in flight at once, then their sum in order
            float4 x[G];
#pragma unroll
            for (int i = 0; i < G; i++)
                x[i] = r0 + i < n ? part4(r0 + i, d) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int i = 0; i < G; i++)
                if (r0 + i < n && lse_s[r0 + i] != neg_inf())
                    merge_add(v, w_s[r0 + i], x[i]);
        }
        put4(d, v);
    }
    return total;
}

// 4 bf16 at p (4-byte aligned) as a float4, and a float4 stored there as bf16
__device__ __forceinline__ float4 bf16x4_load(const uint16_t *p)
{
    const uint32_t a = reinterpret_cast<const uint32_t *>(p)[0], b = reinterpret_cast<const uint32_t *>(p)[1];
    return make_float4(bf16_to_float((uint16_t)a), bf16_to_float((uint16_t)(a >> 16)), bf16_to_float((uint16_t)b),
                       bf16_to_float((uint16_t)(b >> 16)));
}
__device__ __forceinline__ void bf16x4_store(uint16_t *p, float4 v)
{
    reinterpret_cast<uint32_t *>(p)[0] = bf16_pair(v.x, v.y);
    reinterpret_cast<uint32_t *>(p)[1] = bf16_pair(v.z, v.w);
}

// C.5: for each (token, head of this rank), the W ranks' partials in rank order, to bf16 out and
// lse. Grid (T, heads_local).
template <class C> __device__ __forceinline__ void merge(const dsa_merge_params &p)
{
    constexpr int W = C::dcp, H = C::heads_local, L = C::kv_lora_rank;
    static_assert(W <= kMergeMax, "the ranks' partials in one merge");
    const int t = blockIdx.x, hl = blockIdx.y;
    const ExchangeBlocks<C> x{const_cast<uint8_t *>(p.xrecv), p.num_tokens};
    uint16_t *o = p.out + ((int64_t)t * H + hl) * L;
    const float total = lse_merge<L>(
        W, [&](int r) { return *x.lse(r, t, hl); }, [&](int r, int d) { return bf16x4_load(x.out(r, t, hl) + d); },
        [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && p.lse)
        p.lse[(int64_t)t * H + hl] = total;
}

// C.4b: for each (token, gathered head), the row's splits in split order, to what attend writes
// with one split: bf16 out and lse (DCP = 1), or the partial and LSE of the rank that owns the head,
// in the exchange's layout (DCP > 1; dsa_attend.cuh, StorePartial). Grid (T, heads_gathered). G:
// the partials a thread loads at once (lse_merge).
template <class C, int G> __device__ __forceinline__ void split_merge(const dsa_split_merge_params &p)
{
    constexpr int HG = C::heads_gathered, H = C::heads_local, L = C::kv_lora_rank;
    static_assert(C::attend_max_splits <= kMergeMax, "a row's splits in one merge");
    const int t = blockIdx.x, hg = blockIdx.y;
    const auto row = [&](int s) { return ((int64_t)s * p.num_tokens + t) * HG + hg; };
    const auto lse_at = [&](int s) { return p.split_lse[row(s)]; };
    const auto part4 = [&](int s, int d) { return *reinterpret_cast<const float4 *>(p.split_out + row(s) * L + d); };
    // where the merged row goes: the output (DCP = 1), or the exchange's partial of the rank that owns
    // the head (DCP > 1)
    uint16_t *o;
    float *lse = nullptr;
    if constexpr (C::dcp == 1) {
        o = p.out + ((int64_t)t * H + hg) * L;
        if (p.lse)
            lse = p.lse + (int64_t)t * H + hg;
    } else {
        const ExchangeTarget<C> x(p.xdest, p.xfused, p.rank, p.num_tokens, hg / H);
        o = x.out(t, hg % H);
        lse = x.lse(t, hg % H);
    }
    const float total = lse_merge<L, G>(p.splits, lse_at, part4, [&](int d, float4 v) { bf16x4_store(o + d, v); });
    if (threadIdx.x == 0 && lse)
        *lse = total;
}

} // namespace dsa
