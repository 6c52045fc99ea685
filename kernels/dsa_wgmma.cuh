// Sparse MLA main loop on warpgroup MMA (wgmma, sm_90a; 64 heads per CTA, two warpgroups): operands
// read from shared memory by the tensor cores, fp32 accumulators in registers. S: each warpgroup all
// of S over half of the 576 dims; P V: each warpgroup half of the latent dims of every head. The next
// tile's cp.async is issued while the tensor cores compute S.
#pragma once
#include "dsa_async.cuh"
#include "dsa_attend_tiles.cuh"

namespace dsa {

// The attend tiles for wgmma (dsa_async.cuh has the instructions and the descriptor): 8 x 8 core
// matrices of 16-byte rows (no swizzle): element (r, c) of a tile with C columns at (r/8)(C/8)64 +
// (c/8)64 + (r%8)8 + c%8 (bf16 units), so one tile serves Q K^T (K-major, row groups SBO = C/8 x 128
// bytes apart, column groups LBO = 128) and P V (V N-major: the same key tile read with LBO and SBO
// swapped).
// D += A B, m64 x N x k16, A and B by descriptor (TransB = 1: B N-major)
template <int TransB> __device__ __forceinline__ void wgmma_n32(float (&d)[16], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, %19;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}

template <int TransB> __device__ __forceinline__ void wgmma_n64(float (&d)[32], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, %35;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}

template <int TransB> __device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t a, uint64_t b)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, %131;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(a), "l"(b), "r"(1), "n"(TransB));
}

// The whole key loop of one CTA on wgmma, in the steps of mma_sync_main_loop (dsa_mma_sync.cuh),
// which also says why it is one function and why steps 0 (compaction) and 3 (online softmax) are
// written out in both. The next tile's cp.async is issued while the tensor cores compute S.
template <class Lay, int TOPK, int ScaleOffset, int RopeOffset, class SlotOf, class Store>
__device__ __forceinline__ void wgmma_main_loop(const CtaThread &th, const AttendSmem<Lay> &sm, const uint8_t *cache,
                                                float softmax_scale, const SlotOf &slot_of, const Store &store)
{
    constexpr int HB = Lay::heads, KT = Lay::KT, SS = Lay::SS, KSTEPS = Lay::KSTEPS;
    const int tid = th.tid, warp = th.warp, lane = th.lane, g = th.g, t4 = th.t4;
    // warpgroup wg takes k-steps [wg KSTEPS / 2, ...) of S and latent dims [wg DW, ...) of O; its warp
    // wl holds rows 16 wl + g and + 8
    const int wg = warp / 4, wl = warp % 4;
    float oacc[Lay::ACC]; // O: (row, dim 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1} (row 16 wl + g), + {2, 3} (+ 8)
#pragma unroll
    for (int i = 0; i < Lay::ACC; i++)
        oacc[i] = 0.0f;

    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
        // 0. compact this rank's entries of the segment into list[], in top-k order
        constexpr int SEG = TOPK < kAttendSegment ? TOPK : kAttendSegment;
        constexpr int EPT = (SEG + kAttendThreads - 1) / kAttendThreads;
        int32_t mine[EPT];
        int cnt = 0;
#pragma unroll
        for (int e = 0; e < EPT; e++) {
            const int k = seg0 + tid * EPT + e;
            const int64_t s = (tid * EPT + e < SEG && k < TOPK) ? slot_of(k) : -1;
            mine[e] = (int32_t)s;
            cnt += s >= 0;
        }
        int incl = cnt; // inclusive scan over the warp, then over the warps
#pragma unroll
        for (int o = 1; o < 32; o *= 2) {
            const int v = __shfl_up_sync(0xffffffffu, incl, o);
            incl += lane >= o ? v : 0;
        }
        __syncthreads(); // list[] and scan[] of the previous segment are no longer read
        if (lane == 31)
            sm.scan[warp] = incl;
        __syncthreads();
        int base = incl - cnt, n = 0;
        for (int w = 0; w < kAttendThreads / 32; w++) {
            base += w < warp ? sm.scan[w] : 0;
            n += sm.scan[w];
        }
#pragma unroll
        for (int e = 0; e < EPT; e++)
            if (mine[e] >= 0)
                sm.list[base++] = mine[e];
        __syncthreads();
        if (n > 0)
            issue_tile(th, sm, cache, 0, 0, n);
        for (int t0 = 0, it = 0; t0 < n; t0 += KT, it++) {
            const int nk = n - t0 < KT ? n - t0 : KT; // keys in this tile; the rest are zero rows
            const uint16_t *kt = sm.k_s + Lay::key_tile_off(it);
            land_tile<Lay, ScaleOffset, RopeOffset>(sm); // 1. the bf16 key tile

            // 2. S = Q K^T: warpgroup wg all of S over its half of the dims; group 0 adds them
            float sacc[KT / 2]; // (row, key 8 j + 2 t4 + {0, 1}) at 4 j + {0, 1} (row 16 wl + g), + {2, 3} (+ 8)
#pragma unroll
            for (int i = 0; i < KT / 2; i++)
                sacc[i] = 0.0f;
            wg_pin(sacc);
            wgmma_fence();
            const uint32_t qa = smem_addr(sm.q_s), kb = smem_addr(kt);
            constexpr uint32_t SBO = Lay::QK_SBO;
            // k-steps [0, KH0) to group 0, [KH0, KSTEPS) to group 1: with an even count a trip count
            // the compiler sees as uniform (an odd one costs a branch, and serialized wgmmas)
            constexpr int KH0 = KSTEPS / 2, KH1 = KSTEPS - KH0;
#pragma unroll
            for (int i = 0; i < KH1; i++) {
                const int ks = wg * KH0 + i;
                if (KSTEPS % 2 == 0 || wg == 1 || i < KH0) {
                    const uint64_t da = wg_desc(qa + 256u * ks, 128u, SBO), db = wg_desc(kb + 256u * ks, 128u, SBO);
                    if constexpr (KT == 64)
                        wgmma_n64<0>(sacc, da, db);
                    else
                        wgmma_n32<0>(sacc, da, db);
                }
            }
            wgmma_commit();
            if (t0 + KT < n)
                issue_tile(th, sm, cache, t0 + KT, (it + 1) % 2, n); // while the tensor cores work; lands while this tile is computed
            wgmma_wait();
            wg_pin(sacc);
            const int r0 = 16 * wl + g;
            if (wg == 1)
#pragma unroll
                for (int j = 0; j < KT / 8; j++) {
                    float *r = sm.s_s + r0 * SS + 8 * j + 2 * t4;
                    *reinterpret_cast<float2 *>(r) = make_float2(sacc[4 * j], sacc[4 * j + 1]);
                    *reinterpret_cast<float2 *>(r + 8 * SS) = make_float2(sacc[4 * j + 2], sacc[4 * j + 3]);
                }
            __syncthreads();
            if (wg == 0)
#pragma unroll
                for (int j = 0; j < KT / 8; j++) {
                    const int col = 8 * j + 2 * t4;
#pragma unroll
                    for (int hh = 0; hh < 2; hh++) {
                        float *r = sm.s_s + (r0 + 8 * hh) * SS + col;
                        const float2 v = *reinterpret_cast<const float2 *>(r);
                        const float x0 = sacc[4 * j + 2 * hh] + v.x, x1 = sacc[4 * j + 2 * hh + 1] + v.y;
                        *reinterpret_cast<float2 *>(r) = make_float2(col < nk ? x0 * softmax_scale : neg_inf(),
                                                                     col + 1 < nk ? x1 * softmax_scale : neg_inf());
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
                fence_proxy_async(); // P is read by the tensor cores
            }
            __syncthreads();

            // 4. O = O * corr + P V over this warpgroup's latent dims. Always rescaled: registers the
            // tensor cores accumulate into must not change on a path the compiler cannot prove uniform
            // (it would serialize every wgmma)
            const float c_lo = sm.corr_s[16 * wl + g], c_hi = sm.corr_s[16 * wl + g + 8];
#pragma unroll
            for (int j = 0; j < Lay::ACC / 4; j++) {
                oacc[4 * j] *= c_lo, oacc[4 * j + 1] *= c_lo;
                oacc[4 * j + 2] *= c_hi, oacc[4 * j + 3] *= c_hi;
            }
            wg_pin(oacc);
            wgmma_fence();
            // A = P (K-major, 8-row groups KT/8 x 128 bytes apart); B = V, the key tile's latent
            // columns [wg DW, ...) read N-major: 8-key groups (k) SBO apart, 8-dim groups 128 bytes
            constexpr uint32_t KSBO = Lay::QK_SBO, PSBO = Lay::P_SBO;
            const uint32_t pa = smem_addr(sm.p_s), vb = smem_addr(kt) + (uint32_t)(wg * Lay::DW / 8 * 128);
#pragma unroll
            for (int kk = 0; kk < KT / 16; kk++) {
                const uint64_t da = wg_desc(pa + 256u * kk, 128u, PSBO);
                if constexpr (Lay::DW == 256) {
                    wgmma_n256<1>(oacc, da, wg_desc(vb + 2u * KSBO * kk, KSBO, 128u));
                } else {
#pragma unroll
                    for (int c = 0; c < Lay::DW / 32; c++)
                        wgmma_n32<1>(*reinterpret_cast<float(*)[16]>(oacc + 16 * c), da,
                                     wg_desc(vb + 512u * c + 2u * KSBO * kk, KSBO, 128u));
                }
            }
            wgmma_commit();
            wgmma_wait();
            wg_pin(oacc);
        }
    }
    __syncthreads(); // the last tile's l
    // O / l; the LSE is the caller's
    const int h_lo = 16 * wl + g, h_hi = h_lo + 8;
    const float l_lo = sm.l_s[h_lo], l_hi = sm.l_s[h_hi];
    const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f, inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
#pragma unroll
    for (int j = 0; j < Lay::ACC / 4; j++) {
        const int d = wg * Lay::DW + 8 * j + 2 * t4;
        store(h_lo, d, oacc[4 * j] * inv_lo, oacc[4 * j + 1] * inv_lo);
        store(h_hi, d, oacc[4 * j + 2] * inv_hi, oacc[4 * j + 3] * inv_hi);
    }
}

} // namespace dsa
