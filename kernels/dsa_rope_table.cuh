// The rope table kernel body: cos and sin of every position and pair, once at context creation.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

// Row pos holds cos and sin of pos * freq[i] (freq from the host: theta^(-2i/d), YaRN-corrected)
// times mscale, in double, stored as fp32. One thread per (position, pair).
template <class C>
__device__ __forceinline__ void rope_table(const double *freq, double mscale, float *cos_out, float *sin_out)
{
    constexpr int P = C::qk_rope_dim / 2;
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    static_assert(C::rope_entries() == (long long)C::max_positions * P, "a row of P pairs per position");
    if (i >= C::rope_entries())
        return;
    const int64_t pos = i / P;
    double s, c;
    sincos((double)pos * freq[i % P], &s, &c);
    cos_out[i] = (float)(c * mscale);
    sin_out[i] = (float)(s * mscale);
}

} // namespace dsa
