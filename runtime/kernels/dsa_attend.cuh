// Stage C building blocks: the top-k entry to local slot mapping, dequantisation of key pairs in
// each cache format, and the sparse MLA of one CTA on tensor cores (mma.sync m16n8k16, bf16
// operands, fp32 accumulators): S = Q K^T over 576 dims, online softmax in fp32, O += P V over
// the 512 latent dims. Keys are dequantised to bf16 in shared memory (as FlashMLA does); the CPU
// reference rounds them the same way, so both compute the same function.
#pragma once
#include "dsa_numerics.cuh"

namespace dsa {

constexpr int kAttendThreads = 256;
constexpr int kKeysPerTile = 32;
constexpr int kRowStride = 584;   // bf16 per q/k row: 576 + 8, so fragment loads hit distinct banks
constexpr int kPStride = 40;      // bf16 per P row: 32 + 8
constexpr int kSStride = 33;      // fp32 per S row

// Dynamic shared memory of a CTA of HB heads, as sparse_mla lays it out (runtime/ctx.c allocates
// it): 2 (HB + kKeysPerTile) kRowStride + 4 HB kSStride + 2 HB kPStride + 12 HB + 8 kKeysPerTile.

// The local slot of top-k entry g of a row of request req on this rank, or -1: invalid entries
// (negative, beyond the request, blocks the table does not have, slots beyond the cache) are
// treated as -1 and never read.
template <int W, int I, int BlockSize>
__device__ __forceinline__ int64_t local_slot(int32_t g, int32_t req, const dsa_attend_params &p)
{
    if (g < 0 || req < 0 || req >= p.num_requests || g >= p.seq_lens[req])
        return -1;
    if ((g / I) % W != p.rank)
        return -1;
    const int64_t local = (int64_t)(g / (W * I)) * I + g % I;
    const int64_t b = local / BlockSize;
    if (b >= p.max_blocks)
        return -1;
    const int32_t blk = p.block_table[req * p.max_blocks + b];
    if (blk < 0)
        return -1;
    const int64_t slot = (int64_t)blk * BlockSize + local % BlockSize;
    return slot < p.num_slots ? slot : -1;
}

__device__ __forceinline__ float e2m1_to_float(uint32_t code)
{
    const int ex = (code >> 1) & 3, mant = code & 1; // 0 .5 1 1.5 2 3 4 6
    const float mag = ex == 0 ? 0.5f * (float)mant : (float)(2 + mant) * 0.25f * (float)(1 << ex);
    return code & 8 ? -mag : mag;
}

// Key elements d and d + 1 (d even) of a cache entry, dequantised and packed as two bf16.
template <int Format, int L, int ScaleOffset, int RopeOffset>
__device__ __forceinline__ uint32_t key_pair(const uint8_t *e, int d)
{
    float x0, x1;
    if constexpr (Format == 0) { // bf16: latent then rope, contiguous: already the pair
        return *reinterpret_cast<const uint32_t *>(e + 2 * d);
    } else if constexpr (Format == 1) { // fp8_ds_mla
        if (d >= L)
            return *reinterpret_cast<const uint32_t *>(e + RopeOffset + 2 * (d - L));
        const float scale = reinterpret_cast<const float *>(e + ScaleOffset)[d / 128];
        x0 = e4m3_to_float(e[d]) * scale;
        x1 = e4m3_to_float(e[d + 1]) * scale;
    } else { // nvfp4_ds_mla
        if (d < L) {
            const int s = d / 16;
            const float scale = e4m3_to_float(e[ScaleOffset + (L / 64) * (s & 3) + (s >> 2)]);
            const uint32_t byte = e[d / 2];
            x0 = e2m1_to_float(byte & 0xf) * scale;
            x1 = e2m1_to_float(byte >> 4) * scale;
        } else {
            x0 = e4m3_to_float(e[RopeOffset + d - L]);
            x1 = e4m3_to_float(e[RopeOffset + d + 1 - L]);
        }
    }
    return (uint32_t)float_to_bf16(x0) | (uint32_t)float_to_bf16(x1) << 16;
}

// D = A B + D, m16n8k16, A row-major bf16, B column-major bf16, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t lds32(const uint16_t *p) { return *reinterpret_cast<const uint32_t *>(p); }

// Sparse MLA of HB heads (rows of q_s, heads >= valid_heads masked) of one token over its kept
// keys. Leaves O / l (HB x 512, in each thread's fragments) and the LSE per head to store().
// KeyLoad(j, d) returns the bf16 pair of key slot_s[j], elements d, d+1.
template <int HB, int KV, int LAT, int TOPK, class SlotOf, class KeyPair, class Store>
__device__ __forceinline__ void sparse_mla(uint16_t *smem_base, float softmax_scale, SlotOf slot_of,
                                           KeyPair key_pair_of, Store store)
{
    static_assert(HB == 16 || HB == 32 || HB == 64, "heads per CTA");
    static_assert(KV % 16 == 0 && LAT % 8 == 0 && KV <= kRowStride, "dims");
    constexpr int KT = kKeysPerTile;
    constexpr int RB = HB / 16;             // row blocks of 16 heads
    constexpr int CG = 8 / RB;              // warps sharing a row block in P V
    constexpr int CB = LAT / 8 / CG;        // 8-dim column blocks per warp in P V
    uint16_t *q_s = smem_base;                            // [HB][kRowStride], filled by the caller
    uint16_t *k_s = q_s + HB * kRowStride;                // [KT][kRowStride]
    float *s_s = reinterpret_cast<float *>(k_s + KT * kRowStride); // [HB][kSStride]
    uint16_t *p_s = reinterpret_cast<uint16_t *>(s_s + HB * kSStride); // [HB][kPStride]
    float *corr_s = reinterpret_cast<float *>(p_s + HB * kPStride);
    float *m_s = corr_s + HB, *l_s = m_s + HB;
    int64_t *slot_s = reinterpret_cast<int64_t *>(l_s + HB);

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t4 = lane % 4;
    if (tid < HB) {
        m_s[tid] = neg_inf();
        l_s[tid] = 0.0f;
    }
    const int rb = warp % RB, cg = warp / RB;   // this warp's row block and column group in P V
    float acc[CB][4];
#pragma unroll
    for (int c = 0; c < CB; c++)
        acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;

    for (int k0 = 0; k0 < TOPK; k0 += KT) {
        if (tid < KT)
            slot_s[tid] = k0 + tid < TOPK ? slot_of(k0 + tid) : -1;
        __syncthreads();
        // keys to bf16 in shared memory; rows of invalid entries are zeros (their scores are -inf)
        for (int i = tid; i < KT * (KV / 2); i += kAttendThreads) {
            const int j = i / (KV / 2), d = 2 * (i % (KV / 2));
            const int64_t slot = slot_s[j];
            *reinterpret_cast<uint32_t *>(k_s + j * kRowStride + d) = slot < 0 ? 0u : key_pair_of(slot, d);
        }
        __syncthreads();
        // S = Q K^T: RB x (KT/8) tiles of 16 x 8 over the warps
        for (int tile = warp; tile < RB * (KT / 8); tile += 8) {
            const int trb = tile / (KT / 8), tcb = tile % (KT / 8);
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const uint16_t *qa = q_s + (trb * 16 + g) * kRowStride + 2 * t4;
            const uint16_t *kb = k_s + (tcb * 8 + g) * kRowStride + 2 * t4;
#pragma unroll 4
            for (int kk = 0; kk < KV; kk += 16)
                mma_bf16(c, lds32(qa + kk), lds32(qa + 8 * kRowStride + kk), lds32(qa + kk + 8),
                         lds32(qa + 8 * kRowStride + kk + 8), lds32(kb + kk), lds32(kb + kk + 8));
            const int col = tcb * 8 + 2 * t4;
            const bool v0 = slot_s[col] >= 0, v1 = slot_s[col + 1] >= 0;
            float *s0 = s_s + (trb * 16 + g) * kSStride + col, *s1 = s0 + 8 * kSStride;
            s0[0] = v0 ? c[0] * softmax_scale : neg_inf();
            s0[1] = v1 ? c[1] * softmax_scale : neg_inf();
            s1[0] = v0 ? c[2] * softmax_scale : neg_inf();
            s1[1] = v1 ? c[3] * softmax_scale : neg_inf();
        }
        __syncthreads();
        // online softmax per head: kAttendThreads / HB threads per row
        {
            constexpr int TPR = kAttendThreads / HB, CPT = KT / TPR;
            const int row = tid / TPR, part = tid % TPR;
            float s[CPT], mt = neg_inf();
#pragma unroll
            for (int i = 0; i < CPT; i++) {
                s[i] = s_s[row * kSStride + part * CPT + i];
                mt = fmaxf(mt, s[i]);
            }
            mt = group_max<TPR>(mt);
            const float m_old = m_s[row], m_new = fmaxf(m_old, mt);
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < CPT; i++) {
                const float pr = m_new == neg_inf() ? 0.0f : __expf(s[i] - m_new);
                sum += pr;
                p_s[row * kPStride + part * CPT + i] = float_to_bf16(pr);
            }
            sum = group_sum<TPR>(sum);
            const float corr = m_new == neg_inf() ? 1.0f : __expf(m_old - m_new); // m_old = -inf: 0
            __syncwarp();
            if (part == 0) {
                corr_s[row] = corr;
                m_s[row] = m_new;
                l_s[row] = l_s[row] * corr + sum;
            }
        }
        __syncthreads();
        // O = O * corr + P V: this warp's row block, CB column blocks of 8 dims
        {
            const float c_lo = corr_s[rb * 16 + g], c_hi = corr_s[rb * 16 + g + 8];
#pragma unroll
            for (int c = 0; c < CB; c++) {
                acc[c][0] *= c_lo, acc[c][1] *= c_lo;
                acc[c][2] *= c_hi, acc[c][3] *= c_hi;
            }
            const uint16_t *pa = p_s + (rb * 16 + g) * kPStride + 2 * t4;
#pragma unroll
            for (int ks = 0; ks < KT; ks += 16) {
                const uint32_t a0 = lds32(pa + ks), a1 = lds32(pa + 8 * kPStride + ks), a2 = lds32(pa + ks + 8),
                               a3 = lds32(pa + 8 * kPStride + ks + 8);
                const uint16_t *v0 = k_s + (ks + 2 * t4) * kRowStride + g;
#pragma unroll
                for (int c = 0; c < CB; c++) {
                    const int n0 = (cg * CB + c) * 8;
                    const uint32_t b0 = (uint32_t)v0[n0] | (uint32_t)v0[kRowStride + n0] << 16;
                    const uint32_t b1 = (uint32_t)v0[8 * kRowStride + n0] | (uint32_t)v0[9 * kRowStride + n0] << 16;
                    mma_bf16(acc[c], a0, a1, a2, a3, b0, b1);
                }
            }
        }
        __syncthreads(); // the next tile overwrites k_s, p_s, slot_s
    }
    // O / l and LSE = m + ln l; an empty row is 0 and -inf
    const int h_lo = rb * 16 + g, h_hi = h_lo + 8;
    const float l_lo = l_s[h_lo], l_hi = l_s[h_hi];
    const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
#pragma unroll
    for (int c = 0; c < CB; c++) {
        const int d = (cg * CB + c) * 8 + 2 * t4;
        store(h_lo, d, acc[c][0] * inv_lo, acc[c][1] * inv_lo);
        store(h_hi, d, acc[c][2] * inv_hi, acc[c][3] * inv_hi);
    }
    if (tid < HB)
        store(tid, -1, l_s[tid] > 0.0f ? m_s[tid] + logf(l_s[tid]) : neg_inf(), 0.0f); // d = -1: the LSE
}

} // namespace dsa
