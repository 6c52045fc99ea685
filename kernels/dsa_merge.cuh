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
template <class C> struct ExchangeTarget {
    ExchangeBlocks<C> x;
    int b;
    __device__ __forceinline__ ExchangeTarget(uint8_t *const *xdest, int xfused, int rank, int T, int r)
        : x{xfused ? xdest[r] : xdest[0], T}, b(xfused ? rank : r)
    {
    }
    __device__ __forceinline__ uint16_t *out(int t, int hl) const { return x.out(b, t, hl); }
    __device__ __forceinline__ float *lse(int t, int hl) const { return x.lse(b, t, hl); }
};

constexpr int kMergeMax = DSA_MERGE_MAX; // the most partials one merge takes (attend_max_splits, DCP ranks)

// The merge of the n <= kMergeMax partials of one (token, head) by the whole CTA, IN THE ORDER r = 0
// .. n - 1 and in fp32, so the result is bit-for-bit repeatable: lse_at(r) is partial r's LSE,
// part_at(r, d) its output at latent dim d; put(d, v) takes the merged output for the dims of this
// thread (d = threadIdx.x, then by blockDim.x, below L); returns the merged LSE. NaN or +inf LSEs
// count as -inf, -inf partials weigh 0, and an all-empty (token, head) is output 0 and LSE -inf
// (docs/design.md, "DCP"; every partial's output is loaded, the attend kernel writes each, 0 where
// empty, but a -inf partial's is never added). The LSEs are read once, by n threads (a merge CTA has
// at least 32, the plan's merge_threads), and their weights computed once, in shared memory:
// the loops run to n, not to the most there can be (unrolled to 32, the merge held 128 registers a
// thread), and the partials' loads go out 8 at a time, not one after another.
template <int L, class LseAt, class PartAt, class Put>
__device__ __forceinline__ float lse_merge(int n, LseAt lse_at, PartAt part_at, Put put)
{
    __shared__ float lse_s[kMergeMax], w_s[kMergeMax];
    const int tid = threadIdx.x;
    if (tid < n) {
        const float x = lse_at(tid);
        lse_s[tid] = (x != x || x == -neg_inf()) ? neg_inf() : x;
    }
    __syncthreads();
    float m = neg_inf();
    for (int r = 0; r < n; r++)
        m = fmaxf(m, lse_s[r]);
    float total = neg_inf();
    if (m != neg_inf()) {
        float sum = 0.0f;
        for (int r = 0; r < n; r++)
            if (lse_s[r] != neg_inf())
                sum += expf(lse_s[r] - m);
        total = m + logf(sum);
    }
    if (tid < n) // a -inf partial weighs 0 (and is skipped below)
        w_s[tid] = lse_s[tid] != neg_inf() ? expf(lse_s[tid] - total) : 0.0f;
    __syncthreads();
    for (int d = tid; d < L; d += blockDim.x) {
        float v = 0.0f;
        for (int r0 = 0; r0 < n; r0 += 8) { // 8 partials' loads in flight at once, then their sum in order
            float x[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                x[i] = r0 + i < n ? part_at(r0 + i, d) : 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (r0 + i < n && lse_s[r0 + i] != neg_inf())
                    v += w_s[r0 + i] * x[i];
        }
        put(d, v);
    }
    return total;
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
        W, [&](int r) { return *x.lse(r, t, hl); }, [&](int r, int d) { return bf16_to_float(x.out(r, t, hl)[d]); },
        [&](int d, float v) { o[d] = float_to_bf16(v); });
    if (threadIdx.x == 0 && p.lse)
        p.lse[(int64_t)t * H + hl] = total;
}

// C.4b: for each (token, gathered head), the row's splits in split order, to what attend writes
// with one split: bf16 out and lse (DCP = 1), or the partial and LSE of the rank that owns the head,
// in the exchange's layout (DCP > 1; dsa_attend.cuh, StorePartial). Grid (T, heads_gathered).
template <class C> __device__ __forceinline__ void split_merge(const dsa_split_merge_params &p)
{
    constexpr int HG = C::heads_gathered, H = C::heads_local, L = C::kv_lora_rank;
    static_assert(C::attend_max_splits <= kMergeMax, "a row's splits in one merge");
    const int t = blockIdx.x, hg = blockIdx.y;
    const auto row = [&](int s) { return ((int64_t)s * p.num_tokens + t) * HG + hg; };
    const auto lse_at = [&](int s) { return p.split_lse[row(s)]; };
    const auto part_at = [&](int s, int d) { return p.split_out[row(s) * L + d]; };
    if constexpr (C::dcp == 1) {
        uint16_t *o = p.out + ((int64_t)t * H + hg) * L;
        const float total =
            lse_merge<L>(p.splits, lse_at, part_at, [&](int d, float v) { o[d] = float_to_bf16(v); });
        if (threadIdx.x == 0 && p.lse)
            p.lse[(int64_t)t * H + hg] = total;
    } else {
        const ExchangeTarget<C> x(p.xdest, p.xfused, p.rank, p.num_tokens, hg / H);
        uint16_t *o = x.out(t, hg % H);
        const float total =
            lse_merge<L>(p.splits, lse_at, part_at, [&](int d, float v) { o[d] = float_to_bf16(v); });
        if (threadIdx.x == 0)
            *x.lse(t, hg % H) = total;
    }
}

} // namespace dsa
