// Numerics of the kernel library: bf16 / e4m3 / e2m1 conversions, pow2 scales, warp and block sums.
// Round to nearest even and saturating, like the CPU reference in tests/ref. No toolkit headers: a
// deploy machine's NVRTC needs nothing but what the runtime embeds.
#pragma once
#include "dsa_abi.h"

namespace dsa {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// 2^x, the multi-function unit's approximation (what __expf(y) computes for x = y log2(e)); 2^-inf = 0
__device__ __forceinline__ float exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// The online softmax of the attend loops (a row's running maximum m and sum l), in one of two forms.
// Base2: the scores stay unscaled and m with them; exp(scale (s - m)) = 2^(s l2 - m l2), l2 = scale
// log2(e): one fused multiply-add and one 2^x a score. Otherwise the scores are scaled first and
// exp(s - m) is __expf (a multiply and a 2^x). The 64-128-head loop and 32 heads take Base2; at 16
// heads it was 4% slower at 128 rows (tests/bench/RESULTS.md, ninth session), so 16 keeps the other.
// scale > 0, so the maximum of the scores is the maximum of the scaled ones.
template <bool Base2> struct OnlineSoftmax {
    float scale, l2;
    __device__ __forceinline__ explicit OnlineSoftmax(float softmax_scale)
        : scale(softmax_scale), l2(softmax_scale * 1.4426950408889634f)
    {
    }
    // a score as the maximum is taken over it
    __device__ __forceinline__ float score(float s) const { return Base2 ? s : s * scale; }
    // the operand of p() for a row whose maximum is m (every score of a row with m = -inf is -inf)
    __device__ __forceinline__ float bias(float m) const { return Base2 ? (m == neg_inf() ? 0.0f : m * l2) : m; }
    // exp(scale s - scale m), for b = bias(m); 0 where m = -inf. Base 2 only: the scaled form's
    // m == -inf ? 0 : __expf(s - m) is written in its one loop (16 heads, dsa_wgmma_t.cuh), where
    // ptxas emits the code it did before this struct; through a member function the same arithmetic
    // came out 8 instructions longer and 2% slower at 128 rows (RESULTS, ninth session).
    __device__ __forceinline__ float p(float s, float b) const
    {
        static_assert(Base2, "the scaled form's exponential is its loop's");
        return exp2_approx(__fmaf_rn(s, l2, -b));
    }
    // Base 2, lazily: the row's reference after a tile whose maximum is mx, m_old before it. It stays
    // m_old while the tile's scores are within 2^8 of it (p <= 256: no overflow in P's bf16 nor in
    // the fp32 sums), so that the sums are rescaled only where the maximum moved that far; the LSE
    // and O / l take the reference, whatever it is (FlashAttention-4's conditional rescaling)
    __device__ __forceinline__ float reference(float m_old, float mx) const
    {
        static_assert(Base2, "the scaled form keeps the running maximum");
        return (mx - m_old) * l2 > 8.0f ? mx : m_old; // -inf - -inf = NaN: stays -inf
    }
    // the factor of the sums so far as the maximum moves from m_old to m_new (1 while both are -inf)
    __device__ __forceinline__ float correction(float m_old, float m_new) const
    {
        return m_new == neg_inf() ? 1.0f : Base2 ? exp2_approx((m_old - m_new) * l2) : __expf(m_old - m_new);
    }
    // the weight of a part whose maximum is m in a merge whose maximum is mm (0 for an empty part)
    __device__ __forceinline__ float weight(float m, float mm) const
    {
        return m == neg_inf() ? 0.0f : Base2 ? exp2_approx((m - mm) * l2) : __expf(m - mm);
    }
    // the natural-log LSE of scale s over the row. The empty head: -inf where no key was kept (l = 0)
    // and where a score was not a number (l NaN: a NaN or inf in the host's query or in a key), and
    // every loop outputs such a head as 0, whatever its accumulators hold, as the DCP merge takes a
    // NaN partial for an empty one (docs/design.md, step 4)
    __device__ __forceinline__ float lse(float m, float l) const
    {
        return l > 0.0f ? (Base2 ? m * scale : m) + logf(l) : neg_inf();
    }
};

__device__ __forceinline__ float bf16_to_float(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

__device__ __forceinline__ uint16_t float_to_bf16(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// Two floats to two bf16 by float_to_bf16 (the CPU reference's rounding and NaN), lo in bits
// 0-15: the outputs' form (bf16x2 below is the instruction, whose NaN differs)
__device__ __forceinline__ uint32_t bf16_pair(float lo, float hi)
{
    return (uint32_t)float_to_bf16(lo) | (uint32_t)float_to_bf16(hi) << 16;
}

// Two floats to two e4m3 bytes, hardware round-to-nearest-even with saturation to +-448 (sm_89+).
// Returns lo in bits 0-7 and hi in bits 8-15.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi)
{
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ uint8_t e4m3(float x) { return (uint8_t)(e4m3x2(x, 0.0f) & 0xff); }

__device__ __forceinline__ float e4m3_to_float(uint8_t b)
{
    int e = (b >> 3) & 0xf, m = b & 7;
    float v = e == 0 ? (float)m * 0x1p-9f : __uint_as_float((uint32_t)(e + 120) << 23 | (uint32_t)m << 20);
    if (e == 15 && m == 7)
        v = __uint_as_float(0x7fc00000u);
    return (b & 0x80) ? -v : v;
}

// Two e4m3 bytes (lo in bits 0-7) to floats, exactly (through f16x2).
__device__ __forceinline__ void e4m3x2_to_float(uint32_t pair, float &lo, float &hi)
{
    const unsigned short in = (unsigned short)pair;
    asm("{\n\t.reg .b32 h2;\n\t.reg .b16 l, h;\n\t"
        "cvt.rn.f16x2.e4m3x2 h2, %2;\n\tmov.b32 {l, h}, h2;\n\t"
        "cvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(lo), "=f"(hi)
        : "h"(in));
}

// Two floats to two bf16 (round to nearest even), lo in bits 0-15.
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// e2m1 (magnitudes 0 .5 1 1.5 2 3 4 6), round to nearest even, saturating. sm_90 has no
// conversion instruction: count the rounding thresholds passed (ties go to the even code).
__device__ __forceinline__ uint32_t e2m1(float x)
{
    float a = fabsf(x);
    uint32_t c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
    return c | (x < 0.0f ? 8u : 0u);
}

// Eight e2m1 codes (code k in bits 4k .. 4k + 3 of w) times scale2 (a bf16x2 of one scale) to eight
// bf16, codes 2i and 2i + 1 in the low and high halves of out[i]: 4 integer instructions and 2
// bf16x2 multiplies a pair of values, where converting through float took about 10 a value. Each
// code is first the bf16 of value code x 2^-126: its magnitude bits become the exponent's two low
// bits and the mantissa's top bit, which gives 0.5 as the subnormal 2^-127 as well. The multiplies,
// by 2^126 and by the scale, are exact: an e2m1 value has 2 significant bits and an e4m3 scale 4,
// and their products lie in bf16's normal range, so out equals the float product rounded to bf16,
// as the CPU reference computes it (a NaN scale gives NaN either way). mul.bf16x2 keeps subnormal
// inputs (it has no .ftz).
__device__ __forceinline__ void e2m1x8_to_bf16(uint32_t w, uint32_t scale2, uint32_t out[4])
{
    const uint32_t w4 = w >> 4;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        // code 2i in bits 0-3, code 2i + 1 in bits 16-19
        uint32_t p;
        asm("prmt.b32 %0, %1, %2, %3;" : "=r"(p) : "r"(w), "r"(w4), "r"((uint32_t)(i | i << 4 | (4 + i) << 8 | (4 + i) << 12)));
        const uint32_t x = ((p << 6) & 0x01c001c0u) | ((p << 12) & 0x80008000u);
        uint32_t y;
        asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(y) : "r"(x), "r"(0x7e807e80u)); // x 2^126
        asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(out[i]) : "r"(y), "r"(scale2));
    }
}

// 2^ceil(log2 x) for a positive normal x.
__device__ __forceinline__ float pow2_ceil(float x)
{
    uint32_t u = __float_as_uint(x);
    if (u & 0x7fffffu)
        u = (u & 0x7f800000u) + 0x800000u;
    return __uint_as_float(u);
}

// nvfp4 block scale: max(amax / 6, 2^-9) to e4m3, one code up if rounding fell below.
__device__ __forceinline__ uint8_t nvfp4_block_scale(float amax)
{
    float want = fmaxf(__fdiv_rn(amax, 6.0f), 0x1p-9f);
    uint8_t code = e4m3(want);
    if (e4m3_to_float(code) < want && code < 0x7e)
        code++;
    return code;
}

template <int Width = 32> __device__ __forceinline__ float group_sum(float v)
{
#pragma unroll
    for (int o = Width / 2; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <int Width = 32> __device__ __forceinline__ float group_max(float v)
{
#pragma unroll
    for (int o = Width / 2; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block; every thread gets the result. scratch: one float per warp + 1.
template <int Threads> __device__ __forceinline__ float block_sum(float v, float *scratch)
{
    v = group_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < Threads / 32 ? scratch[lane] : 0.0f;
        s = group_sum(s);
        if (lane == 0)
            scratch[Threads / 32] = s;
    }
    __syncthreads();
    return scratch[Threads / 32];
}

// 8 bf16 (16 bytes) to floats and back.
struct bf16x8 {
    uint4 raw;
    __device__ __forceinline__ void to_float(float (&f)[8]) const
    {
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    __device__ __forceinline__ static uint4 from_float(const float (&f)[8])
    {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            w[i] = bf16_pair(f[2 * i], f[2 * i + 1]);
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
};

__device__ __forceinline__ uint4 load16(const void *p) { return *reinterpret_cast<const uint4 *>(p); }
__device__ __forceinline__ void store16(void *p, uint4 v) { *reinterpret_cast<uint4 *>(p) = v; }

} // namespace dsa
