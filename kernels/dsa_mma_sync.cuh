// Sparse MLA main loop on mma.sync (m16n8k16, ldmatrix operands, 8 warps): 16 or 32 heads per CTA,
// and 64 on targets without wgmma (sm_90, sm_100a). S: each warp a WM x 32 tile over a share of the
// dims, the shares summed in a fixed order (bit-for-bit repeatable); P V: each warp a block of heads
// x latent dims in registers. The next tile's cp.async is issued just before S.
#pragma once
#include "dsa_attend_tiles.cuh"

namespace dsa {

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// D = A B + D, m16n8k16, A row-major bf16, B column-major bf16, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The whole key loop of one CTA on mma.sync: per segment, 0. compact this rank's entries into the
// list of local slots, then per tile 1. the bf16 key tile, 2. S = Q K^T, 3. online softmax, 4. O = O
// * corr + P V; at the end O / l to store(h, d, x0, x1) (0 for a head with no kept key). The caller
// has loaded Q and set m = -inf, l = 0.
//
// One function of about 200 lines, and steps 0 and 3 written out again in dsa_wgmma.cuh, on purpose:
// NVVM simplifies a function before it inlines it into its caller, so with steps 0, 2, 3 or 4 as
// functions of their own the lane arithmetic and the accumulators came out in another order, and the
// machine code of most attend kernels changed (tools/cubin_text_diff.py). Steps 1 (the
// tile loads, dsa_attend_tiles.cuh) and the dequantisation are shared functions: they keep it.
template <class Lay, int TOPK, int ScaleOffset, int RopeOffset, class SlotOf, class Store>
__device__ __forceinline__ void mma_sync_main_loop(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache,
                                                   float softmax_scale, const SlotOf &slot_of, const Store &store)
{
    constexpr int HB = Lay::heads, KT = Lay::KT, RS = Lay::RS, WM = Lay::WM, SS = Lay::SS, PS = Lay::PS;
    constexpr int MB = Lay::MB, NB = Lay::NB;
    const int tid = th.tid, warp = th.warp, lane = th.lane, g = th.g, t4 = th.t4;
    // ldmatrix lane offsets: A (row-major 16 x 16) and B of S (keys x dims): row, column of this lane
    const int a_row = (lane % 8) + 8 * ((lane / 8) % 2), a_col = 8 * (lane / 16);
    const int b_row = (lane % 8) + 8 * (lane / 16), b_col = 8 * ((lane / 8) % 2);
    // S: warp tile (tr, tc) of WM x 32, over k-steps [ks0, ks1) of the KV dims
    const int s_tile = warp % Lay::S_TILES, split = warp / Lay::S_TILES;
    const int tr = s_tile / (KT / 32), tc = s_tile % (KT / 32);
    const int ks0 = split * Lay::KSTEPS / Lay::SPLITS, ks1 = (split + 1) * Lay::KSTEPS / Lay::SPLITS;
    // P V: warp rows rg, latent dims [dg * DW, (dg + 1) * DW)
    const int rg = warp % Lay::RG, dg = warp / Lay::RG;
    float acc[MB][NB][4];
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
            acc[mb][nb][0] = acc[mb][nb][1] = acc[mb][nb][2] = acc[mb][nb][3] = 0.0f;

    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
        // 0. compact this rank's entries of the segment into list[], in top-k order
        const int n = compact_segment<Lay, TOPK, kAttendThreads, false>(th, sm, seg0, slot_of);
        if (n > 0)
            issue_tile(th, sm, cache, 0, 0, n);
        for (int t0 = 0, it = 0; t0 < n; t0 += KT, it++) {
            const int nk = n - t0 < KT ? n - t0 : KT; // keys in this tile; the rest are zero rows
            const uint16_t *kt = sm.k_s + Lay::key_tile_off(it);
            land_tile<Lay, ScaleOffset, RopeOffset>(sm); // 1. the bf16 key tile
            if (t0 + KT < n)
                issue_tile(th, sm, cache, t0 + KT, (it + 1) % 2, n); // lands while this tile is computed

            // 2. S = Q K^T: this warp's share of the dims of its WM x 32 tile
            float c[MB][4][4];
#pragma unroll
            for (int mb = 0; mb < MB; mb++)
#pragma unroll
                for (int nb = 0; nb < 4; nb++)
                    c[mb][nb][0] = c[mb][nb][1] = c[mb][nb][2] = c[mb][nb][3] = 0.0f;
            const uint32_t qa = smem_addr(sm.q_s + (tr * WM + a_row) * RS + a_col);
            const uint32_t kb = smem_addr(kt + (tc * 32 + b_row) * RS + b_col);
            constexpr int KPS = (Lay::KSTEPS + Lay::SPLITS - 1) / Lay::SPLITS;
#pragma unroll
            for (int kq = 0; kq < KPS; kq++) {
                const int ks = ks0 + kq;
                if (ks >= ks1)
                    break;
                uint32_t a[MB][4];
#pragma unroll
                for (int mb = 0; mb < MB; mb++)
                    ldsm_x4(a[mb], qa + (uint32_t)((mb * 16 * RS + ks * 16) * 2));
#pragma unroll
                for (int h = 0; h < 2; h++) { // keys 16h .. 16h + 15: two 8-key blocks
                    uint32_t b[4];
                    ldsm_x4(b, kb + (uint32_t)((h * 16 * RS + ks * 16) * 2));
#pragma unroll
                    for (int mb = 0; mb < MB; mb++) {
                        mma_bf16(c[mb][2 * h], a[mb], b[0], b[1]);
                        mma_bf16(c[mb][2 * h + 1], a[mb], b[2], b[3]);
                    }
                }
            }
            // splits 1.. leave partials; split 0 adds them in split order, scales and masks
            if (split > 0) {
                float *sp = sm.s_s + (split - 1) * HB * SS;
#pragma unroll
                for (int mb = 0; mb < MB; mb++)
#pragma unroll
                    for (int nb = 0; nb < 4; nb++) {
                        float *r0 = sp + (tr * WM + mb * 16 + g) * SS + tc * 32 + nb * 8 + 2 * t4;
                        *reinterpret_cast<float2 *>(r0) = make_float2(c[mb][nb][0], c[mb][nb][1]);
                        *reinterpret_cast<float2 *>(r0 + 8 * SS) = make_float2(c[mb][nb][2], c[mb][nb][3]);
                    }
            }
            __syncthreads();
            if (split == 0) {
#pragma unroll
                for (int mb = 0; mb < MB; mb++)
#pragma unroll
                    for (int nb = 0; nb < 4; nb++) {
                        const int off = (tr * WM + mb * 16 + g) * SS + tc * 32 + nb * 8 + 2 * t4;
                        const int col = tc * 32 + nb * 8 + 2 * t4;
#pragma unroll
                        for (int hh = 0; hh < 2; hh++) {
                            float x0 = c[mb][nb][2 * hh], x1 = c[mb][nb][2 * hh + 1];
#pragma unroll
                            for (int sp = 1; sp < Lay::SPLITS; sp++) {
                                const float2 v = *reinterpret_cast<const float2 *>(sm.s_s + (sp - 1) * HB * SS + off + hh * 8 * SS);
                                x0 += v.x;
                                x1 += v.y;
                            }
                            *reinterpret_cast<float2 *>(sm.s_s + off + hh * 8 * SS) =
                                make_float2(col < nk ? x0 * softmax_scale : neg_inf(), col + 1 < nk ? x1 * softmax_scale : neg_inf());
                        }
                    }
            }
            __syncthreads();
            // 3. online softmax per head: TPR threads per row, columns interleaved
            {
                constexpr int TPR = kAttendThreads / HB, PPT = KT / 2 / TPR;
                const int row = tid / TPR, part = tid % TPR;
                float2 s[PPT];
                float mt = neg_inf();
#pragma unroll
                for (int i = 0; i < PPT; i++) {
                    s[i] = *reinterpret_cast<const float2 *>(sm.s_s + row * SS + 2 * (part + TPR * i));
                    mt = fmaxf(mt, fmaxf(s[i].x, s[i].y));
                }
                mt = group_max<TPR>(mt);
                const float m_old = sm.m_s[row], m_new = fmaxf(m_old, mt);
                float sum = 0.0f;
#pragma unroll
                for (int i = 0; i < PPT; i++) {
                    const float p0 = m_new == neg_inf() ? 0.0f : __expf(s[i].x - m_new);
                    const float p1 = m_new == neg_inf() ? 0.0f : __expf(s[i].y - m_new);
                    sum += p0 + p1;
                    *reinterpret_cast<uint32_t *>(sm.p_s + Lay::p_at(row, 2 * (part + TPR * i))) = bf16x2(p0, p1);
                }
                sum = group_sum<TPR>(sum);
                const float corr = m_new == neg_inf() ? 1.0f : __expf(m_old - m_new); // m_old = -inf: 0
                __syncwarp();
                if (part == 0) {
                    sm.corr_s[row] = corr;
                    sm.m_s[row] = m_new;
                    sm.l_s[row] = sm.l_s[row] * corr + sum;
                }
            }
            __syncthreads();

            // 4. O = O * corr + P V over this warp's rows and latent dims (no rescale where corr = 1)
#pragma unroll
            for (int mb = 0; mb < MB; mb++) {
                const float c_lo = sm.corr_s[rg * WM + mb * 16 + g], c_hi = sm.corr_s[rg * WM + mb * 16 + g + 8];
                if (__any_sync(0xffffffffu, c_lo != 1.0f || c_hi != 1.0f))
#pragma unroll
                    for (int nb = 0; nb < NB; nb++) {
                        acc[mb][nb][0] *= c_lo, acc[mb][nb][1] *= c_lo;
                        acc[mb][nb][2] *= c_hi, acc[mb][nb][3] *= c_hi;
                    }
            }
            const uint32_t pa = smem_addr(sm.p_s + (rg * WM + a_row) * PS + a_col);
            // V = the key rows: keys along k, latent dims along n (transposed loads)
            const uint32_t vb = smem_addr(kt + a_row * RS + dg * Lay::DW + a_col);
#pragma unroll 1
            for (int kk = 0; kk < KT / 16; kk++) {
                uint32_t a[MB][4];
#pragma unroll
                for (int mb = 0; mb < MB; mb++)
                    ldsm_x4(a[mb], pa + (uint32_t)((mb * 16 * PS + kk * 16) * 2));
#pragma unroll
                for (int nb2 = 0; nb2 < NB / 2; nb2++) {
                    uint32_t b[4];
                    ldsm_x4_trans(b, vb + (uint32_t)((kk * 16 * RS + nb2 * 16) * 2));
#pragma unroll
                    for (int mb = 0; mb < MB; mb++) {
                        mma_bf16(acc[mb][2 * nb2], a[mb], b[0], b[1]);
                        mma_bf16(acc[mb][2 * nb2 + 1], a[mb], b[2], b[3]);
                    }
                }
            }
        }
    }
    __syncthreads(); // the last tile's l
    // O / l; the LSE is the caller's. The empty head (OnlineSoftmax::lse): 0 where l is 0 or NaN
    // (inv 0), whatever the accumulators hold
    const auto o = [](float a, float inv) { return inv != 0.0f ? a * inv : 0.0f; };
#pragma unroll
    for (int mb = 0; mb < MB; mb++) {
        const int h_lo = rg * WM + mb * 16 + g, h_hi = h_lo + 8;
        const float l_lo = sm.l_s[h_lo], l_hi = sm.l_s[h_hi];
        const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const int d = dg * Lay::DW + nb * 8 + 2 * t4;
            store(h_lo, d, o(acc[mb][nb][0], inv_lo), o(acc[mb][nb][1], inv_lo));
            store(h_hi, d, o(acc[mb][nb][2], inv_hi), o(acc[mb][nb][3], inv_hi));
        }
    }
}

} // namespace dsa
