// Stage C.5, the merge kernel body (DCP > 1): the W ranks' partial outputs of a head, by their LSEs.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// For each (token, head of this rank): over the DCP ranks' partials IN RANK ORDER and in fp32, so
// the result is bit-for-bit repeatable. NaN or +inf LSEs count as -inf, -inf partials weigh 0, an
// all-empty row is output 0 and LSE -inf (docs/design.md, "DCP"). Grid (T, heads_local).
template <class C> __device__ __forceinline__ void merge(const dsa_merge_params &p)
{
    constexpr int W = C::dcp, H = C::heads_local, L = C::kv_lora_rank;
    const int t = blockIdx.x, hl = blockIdx.y;
    float lse[W];
    float m = neg_inf();
#pragma unroll
    for (int r = 0; r < W; r++) {
        const float x = p.part_lse[((int64_t)r * p.num_tokens + t) * H + hl];
        lse[r] = (x != x || x == -neg_inf()) ? neg_inf() : x;
        m = fmaxf(m, lse[r]);
    }
    float total = neg_inf();
    if (m != neg_inf()) {
        float sum = 0.0f;
#pragma unroll
        for (int r = 0; r < W; r++)
            sum += lse[r] == neg_inf() ? 0.0f : expf(lse[r] - m);
        total = m + logf(sum);
    }
    uint16_t *o = p.out + ((int64_t)t * H + hl) * L;
    for (int d = threadIdx.x; d < L; d += blockDim.x) {
        float v = 0.0f;
#pragma unroll
        for (int r = 0; r < W; r++)
            if (lse[r] != neg_inf())
                v += expf(lse[r] - total) * p.part_out[(((int64_t)r * p.num_tokens + t) * H + hl) * L + d];
        o[d] = float_to_bf16(v);
    }
    if (threadIdx.x == 0 && p.lse)
        p.lse[(int64_t)t * H + hl] = total;
}

} // namespace dsa
