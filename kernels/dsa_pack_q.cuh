// Stage C.1, the pack_q kernel body: q = [q_lat | rope(q_pe)], the query in the key's packed layout.
#pragma once
#include "dsa_numerics.cuh"
#include "dsa_rope.cuh"

namespace dsa {

// n (<= N) consecutive elements of a host tensor, in 16-byte loads where the address allows
template <int N, class T> __device__ __forceinline__ void load_n(const T *src, T (&dst)[N], int n)
{
    constexpr int per = 16 / sizeof(T);
    static_assert(N % per == 0, "whole 16-byte loads");
    if (((uint64_t)src & 15) == 0) {
#pragma unroll
        for (int j = 0; j < N / per; j++)
            if (j * per < n) {
                const uint4 x = load16(src + j * per);
                memcpy(&dst[j * per], &x, 16);
            }
        return;
    }
#pragma unroll
    for (int j = 0; j < N; j++)
        if (j < n)
            dst[j] = src[j];
}
__device__ __forceinline__ void load8(const uint16_t *src, uint16_t (&dst)[8]) { load_n<8>(src, dst, 8); }

// Elements [d0, d0 + 8) of head h of token t's packed query: q_lat, or q_pe rotated at the
// token's position pos (zeros where pos_ok is false: outside the rope table). The one formula of
// the packed query, for pack_q and for attend at DCP = 1, which forms its query itself.
template <class C>
__device__ __forceinline__ uint4 packed_q_chunk(const dsa_pack_params &p, int t, int h, int d0, int64_t pos, bool pos_ok)
{
    constexpr int L = C::kv_lora_rank, R = C::qk_rope_dim;
    uint16_t v[8];
    if (d0 < L) {
        load8(p.q_lat + t * p.q_lat_stride + h * L + d0, v);
    } else {
        // rope dims r0 .. r0 + 8 (R % 16 == 0: the generator's rule for the sparse MLA). Interleaved:
        // pairs (2i, 2i + 1), both inside the 8; NeoX: pairs (i, i + R/2), the 8 in one half and their
        // partners the 8 dims R/2 away. Values and the pairs' cos/sin come in 16-byte loads where
        // aligned (32 scalar loads a chunk made attend's query slow to form at 64 heads).
        static_assert(R % 16 == 0, "the 8 dims of a chunk lie in one half of the rope dims");
        constexpr int H2 = R / 2;
        const int r0 = d0 - L;
        if (!pos_ok)
            return make_uint4(0u, 0u, 0u, 0u);
        const uint16_t *pe = p.q_pe + t * p.q_pe_stride + h * R;
        uint16_t own[8], mate[8];
        float c[8], sn[8];
        load8(pe + r0, own);
        if constexpr (!C::rope_interleaved)
            load8(pe + (r0 + H2) % R, mate);
        const int n = C::rope_interleaved ? 4 : 8, pair0 = C::rope_interleaved ? r0 / 2 : r0 % H2;
        load_n<8>(p.rope_cos + pos * H2 + pair0, c, n);
        load_n<8>(p.rope_sin + pos * H2 + pair0, sn, n);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int r = r0 + k, i = C::rope_interleaved ? k / 2 : k;
            const bool first = C::rope_interleaved ? r % 2 == 0 : r < H2;
            float x0, x1;
            if constexpr (C::rope_interleaved) {
                x0 = bf16_to_float(own[k & ~1]);
                x1 = bf16_to_float(own[k | 1]);
            } else {
                x0 = bf16_to_float(first ? own[k] : mate[k]);
                x1 = bf16_to_float(first ? mate[k] : own[k]);
            }
            v[k] = float_to_bf16(rope_rotate(x0, x1, c[i], sn[i], first)); // rounded like the CPU reference
        }
    }
    uint4 chunk; // the 8 values in memory order (little-endian: element 2k in word k's low half)
    memcpy(&chunk, v, sizeof chunk);
    return chunk;
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

// One thread per 8 elements (16 bytes written), grid (token, chunk blocks): every element is
// independent, so the whole batch's queries are in flight at once. A position outside the rope
// table is counted in rejected[1] and its rope part written as zeros, never read out of bounds.
// With the fused gather (DCP > 1, p.qfused) the packed query goes straight into block p.rank of
// every rank's gathered queries (stores over NVLink), and a barrier replaces the all-gather.
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
