// The RoPE rotation of one pair, shared by the query (pack_q), the cache's k_pe and the indexer key.
#pragma once

namespace dsa {

// One output of the rotation of the pair (x0, x1) by the angle with cosine c and sine s: its first
// element y0 = x0 c - x1 s (first = true) or its second y1 = x0 s + x1 c. Each product and the sum
// are rounded on their own (no fused multiply-add), as the CPU reference does (tests/ref/ref.c,
// ref_rope_apply, compiled without contraction): a last-bit difference here can flip the bf16 or
// e4m3 rounding of the stored value, so both sides compute the same fp32 number.
__device__ __forceinline__ float rope_rotate(float x0, float x1, float c, float s, bool first)
{
    return first ? __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)) : __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

} // namespace dsa
