// Stage C.1, the pack_q kernel body: q = [q_lat | rope(q_pe)], the query in the key's packed layout.
#pragma once
#include "dsa_numerics.cuh"
#include "dsa_rope.cuh"

namespace dsa {

// One thread per 8 elements (16 bytes written), grid (token, chunk blocks): every element is
// independent, so the whole batch's queries are in flight at once. A position outside the rope
// table is counted in rejected[1] and its rope part written as zeros, never read out of bounds.
// With the fused gather (DCP > 1, p.qfused) the packed query goes straight into block p.rank of
// every rank's gathered queries (stores over NVLink), and a barrier replaces the all-gather.
// Elements [d0, d0 + 8) of head h of token t's packed query: q_lat, or q_pe rotated at the
// token's position pos (zeros where pos_ok is false: outside the rope table). The one formula of
// the packed query, for pack_q and for attend at DCP = 1, which forms its query itself.
template <class C>
__device__ __forceinline__ uint4 packed_q_chunk(const dsa_pack_params &p, int t, int h, int d0, int64_t pos, bool pos_ok)
{
    constexpr int L = C::kv_lora_rank, R = C::qk_rope_dim;
    uint32_t w[4];
    if (d0 < L) {
        const uint16_t *src = p.q_lat + t * p.q_lat_stride + h * L + d0;
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = (uint32_t)src[2 * k] | (uint32_t)src[2 * k + 1] << 16;
    } else {
        const uint16_t *pe = p.q_pe + t * p.q_pe_stride + h * R;
        uint16_t v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int r = d0 + k - L;
            // rope pair of dim r: (2i, 2i + 1) interleaved, (i, i + R/2) NeoX
            const int pair = C::rope_interleaved ? r / 2 : r % (R / 2);
            const int a = C::rope_interleaved ? 2 * pair : pair, b = C::rope_interleaved ? a + 1 : pair + R / 2;
            if (!pos_ok) {
                v[k] = 0;
                continue;
            }
            const float c = p.rope_cos[pos * (R / 2) + pair];
            const float s = p.rope_sin[pos * (R / 2) + pair];
            const float x0 = bf16_to_float(pe[a]), x1 = bf16_to_float(pe[b]);
            v[k] = float_to_bf16(rope_rotate(x0, x1, c, s, r == a)); // rounded like the CPU reference
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = (uint32_t)v[2 * k] | (uint32_t)v[2 * k + 1] << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// pack_q's check of the token's position: counted once per token (by the thread given), the rope
// part then written as zeros, never read out of bounds
template <class C> __device__ __forceinline__ bool q_position_ok(const dsa_pack_params &p, int t, int64_t &pos, bool count)
{
    pos = p.positions[t];
    const bool ok = pos >= 0 && pos < C::max_positions;
    if (!ok && count)
        atomicAdd(&p.rejected[1], 1ull);
    return ok;
}

template <class C> __device__ __forceinline__ void pack_q(const dsa_pack_params &p)
{
    constexpr int KV = C::kv_dim, H = C::heads_local;
    static_assert(C::kv_lora_rank % 8 == 0 && KV % 8 == 0, "8-element chunks");
    const int t = blockIdx.x, i = blockIdx.y * blockDim.x + threadIdx.x;
    int64_t pos;
    const bool pos_ok = q_position_ok<C>(p, t, pos, blockIdx.y == 0 && threadIdx.x == 0);
    if (i >= H * (KV / 8))
        return;
    const int h = i / (KV / 8), d0 = 8 * (i % (KV / 8));
    const uint4 v = packed_q_chunk<C>(p, t, h, d0, pos, pos_ok);
    if (C::dcp > 1 && p.qfused) {
        const int64_t at = (((int64_t)p.rank * p.num_tokens + t) * H + h) * KV + d0;
#pragma unroll
        for (int r = 0; r < (C::dcp < DSA_MAX_PEERS ? C::dcp : DSA_MAX_PEERS); r++)
            store16(p.qdest[r] + at, v);
    } else {
        store16(p.q_packed + ((int64_t)t * H + h) * KV + d0, v);
    }
}

} // namespace dsa
