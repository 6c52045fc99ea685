// The indexer key of one token (stage A), and the query preparation that stage B shares with it:
// rope on the same dims in the same style, the same Hadamard, the same e4m3 scale rule.
#pragma once
#include "dsa_numerics.cuh"
#include "dsa_rope.cuh"

namespace dsa {

// One warp, D / 32 values per lane (lane holds dims lane * V ..): rope on R dims (the first or the
// last R), then the optional orthonormal Hadamard rotation. cos_row, sin_row: the position's row.
template <int D, int R, bool RopeFirst, bool Interleaved, bool Hadamard>
__device__ __forceinline__ void indexer_rope_hadamard(float (&x)[D / 32], int lane, const float *cos_row,
                                                      const float *sin_row)
{
    constexpr int V = D / 32;
    static_assert(D % 32 == 0 && V <= 8 && (V & (V - 1)) == 0, "indexer head_dim: 32..256, a power of two");
    static_assert(R % V == 0 && R <= D, "rope dims must cover whole lanes");
    // rope on dims [base, base + R)
    constexpr int base = RopeFirst ? 0 : D - R;
    const int first = lane * V - base; // this lane's first rope dim, if inside
    const bool in_rope = first >= 0 && first < R;
    if constexpr (Interleaved) {
        static_assert(V % 2 == 0, "interleaved pairs must sit inside one lane");
        if (in_rope) {
#pragma unroll
            for (int j = 0; j < V; j += 2) {
                const int i = (first + j) / 2;
                const float x0 = x[j], x1 = x[j + 1];
                x[j] = rope_rotate(x0, x1, cos_row[i], sin_row[i], true);
                x[j + 1] = rope_rotate(x0, x1, cos_row[i], sin_row[i], false);
            }
        }
    } else {
        // NeoX: dim d pairs with d + R/2, which sits (R/2)/V lanes away
        constexpr int kLaneOff = (R / 2) / V;
#pragma unroll
        for (int j = 0; j < V; j++) {
            const float other = __shfl_xor_sync(0xffffffffu, x[j], kLaneOff);
            if (in_rope) {
                const int d = first + j;
                const int i = d % (R / 2);
                const bool lo = d < R / 2; // x[j] is the first element of pair i and other the second, or the reverse
                x[j] = rope_rotate(lo ? x[j] : other, lo ? other : x[j], cos_row[i], sin_row[i], lo);
            }
        }
    }

    if constexpr (Hadamard) {
#pragma unroll
        for (int h = 1; h < V; h *= 2) {
#pragma unroll
            for (int j = 0; j < V; j++) {
                if ((j & h) == 0) {
                    const float a = x[j], c = x[j + h];
                    x[j] = a + c;
                    x[j + h] = a - c;
                }
            }
        }
#pragma unroll
        for (int h = 1; h < 32; h *= 2) {
#pragma unroll
            for (int j = 0; j < V; j++) {
                const float other = __shfl_xor_sync(0xffffffffu, x[j], h);
                x[j] = (lane & h) ? other - x[j] : x[j] + other;
            }
        }
        const float s = rsqrtf((float)D);
#pragma unroll
        for (int j = 0; j < V; j++)
            x[j] *= s;
    }

}

// The power-of-two scale of a warp's D values: 2^ceil(log2(max(amax, 1e-4) / 448)).
template <int D> __device__ __forceinline__ float indexer_scale(const float (&x)[D / 32])
{
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < D / 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    amax = group_max(amax);
    return pow2_ceil(__fdiv_rn(fmaxf(amax, 1e-4f), 448.0f));
}

// The lane's D / 32 values as e4m3 of x / scale, at row + lane * (D / 32).
template <int D>
__device__ __forceinline__ void indexer_store_e4m3(const float (&x)[D / 32], float scale, uint8_t *row, int lane)
{
    constexpr int V = D / 32;
#pragma unroll
    for (int j = 0; j < V; j += 2) {
        const uint32_t two = e4m3x2(__fdiv_rn(x[j], scale), __fdiv_rn(x[j + 1], scale));
        *reinterpret_cast<uint16_t *>(row + lane * V + j) = (uint16_t)two;
    }
}

// One warp, D / 32 values per lane: LayerNorm (weight, bias), rope on R dims (first or last),
// optional Hadamard, e4m3 with a power-of-two scale into the page layout [bs x D e4m3][bs x fp32 scale].
template <int D, int R, bool RopeFirst, bool Interleaved, bool Hadamard, int BlockSize>
__device__ __forceinline__ void write_indexer_key(const uint16_t *k, const uint16_t *w, const uint16_t *b, float eps,
                                                  const float *cos_row, const float *sin_row, int64_t slot,
                                                  uint8_t *cache)
{
    constexpr int V = D / 32;
    const int lane = threadIdx.x % 32;
    float x[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = bf16_to_float(k[lane * V + j]);
    float mean = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
        mean += x[j];
    mean = group_sum(mean) / (float)D;
    float var = 0.0f;
#pragma unroll
    for (int j = 0; j < V; j++)
        var += (x[j] - mean) * (x[j] - mean);
    const float r = rsqrtf(group_sum(var) / (float)D + eps);
#pragma unroll
    for (int j = 0; j < V; j++)
        x[j] = (x[j] - mean) * r * bf16_to_float(w[lane * V + j]) + bf16_to_float(b[lane * V + j]);

    indexer_rope_hadamard<D, R, RopeFirst, Interleaved, Hadamard>(x, lane, cos_row, sin_row);
    const float scale = indexer_scale<D>(x);
    uint8_t *page = cache + (slot / BlockSize) * (int64_t)(BlockSize * (D + 4));
    const int off = (int)(slot % BlockSize);
    indexer_store_e4m3<D>(x, scale, page + off * D, lane);
    if (lane == 0)
        *reinterpret_cast<float *>(page + BlockSize * D + 4 * off) = scale;
}

} // namespace dsa
