# Throwaway (issue 15; never to land): the row timeline of attend_row_timeline_instrument.py (which it
# applies first: the globals, the kernel entry, the producers' stamps and the print), extended to the
# 64-head consumers (wgmma_consumers), so that the 128-head pair's tiles can be read in bf16 and in
# fp8_ds_mla side by side: the bf16 parity gap (tests/bench/RESULTS.md, fifty-eighth session: the
# consumers' loop is the same 915 instructions in both formats; the producer's put waits on 288
# bytes a thread a tile in bf16, 176 in fp8). Stamps of rank 0 of the pair of rows 0 and 77, in ns
# from the CTA's entry past its programmatic wait:
#   the producer (thread 256): per tile u its wait for a free key tile over (ew) and its put done,
#     its next loads issued right after (pt), as in the 16-head instrument (half 0 = cluster rank 0);
#   group 0 (thread 0): the full wait over (f), S done (s), P and the corrections handed over (p),
#     P V's lower half done and the tile released (o); k1 / cmp / q at the start, e0 (the loop done)
#     and end (O stored) at the end;
#   group 1 (thread 128): the full wait over (f1), group 0's P received (w1), the upper half done (o1).
# Run in the tree root of a copy, then `ninja gpu` and `python3 tests/bench/logs/attend_pair_timeline_run.py`.
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'attend_row_timeline_instrument.py'))
from instrument_patch import patch  # noqa: E402

patch('kernels/dsa_numerics.cuh', [('__device__ unsigned int xr_calls[2];\n', '''__device__ unsigned int xr_calls[2];
__device__ unsigned long long xr_f1[2][64], xr_w1[2][64], xr_o1[2][64];
''')])

patch('kernels/dsa_wgmma.cuh', [
# group 0
('''        regs_inc<kConsumerGroup0Regs>();
''', '''        regs_inc<kConsumerGroup0Regs>();
        // the slot re-derived at each stamp (special registers), so that no register is held for it
#define xs xr_slot()
#define xc (th.tid == 0 && xr_slot() >= 0)
        if (xc)
            xr_k1[xs] = xr_now();
'''),
('''        form_q(); // Q in q_s, while the producer's first loads are in flight (sparse_mla)
        if constexpr (Pair)
            cluster_wait(); // the peer's barriers are initialised (sparse_mla)
        for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
            const int n = seg0 == 0 ? n0 : count_from_producers(sm, seg0);
            // the segment's own t4 and r0''', '''        if (xc)
            xr_cmp[xs] = xr_now();
        form_q(); // Q in q_s, while the producer's first loads are in flight (sparse_mla)
        if (xc)
            xr_q[xs] = xr_now();
        if constexpr (Pair)
            cluster_wait(); // the peer's barriers are initialised (sparse_mla)
        for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {
            const int n = seg0 == 0 ? n0 : count_from_producers(sm, seg0);
            // the segment's own t4 and r0'''),
('''                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                // S = Q K^T''', '''                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                if (xc && u < 64)
                    xr_f[xs][u] = xr_now();
                // S = Q K^T'''),
('''                wgmma_commit();
                wgmma_wait();
                wg_pin(sacc);
                float mx_lo''', '''                wgmma_commit();
                wgmma_wait();
                wg_pin(sacc);
                if (xc && u < 64)
                    xr_s[xs][u] = xr_now();
                float mx_lo'''),
('''                    named_barrier_arrive_n<5, NC>();
                rescale(c_lo, c_hi);
''', '''                    named_barrier_arrive_n<5, NC>();
                if (xc && u < 64)
                    xr_p[xs][u] = xr_now();
                rescale(c_lo, c_hi);
'''),
('''                tile_done(buf);
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++)
                    wg_pin(pa[kk]);''', '''                tile_done(buf);
                if (xc && u < 64)
                    xr_o[xs][u] = xr_now();
#pragma unroll
                for (int kk = 0; kk < KT / 16; kk++)
                    wg_pin(pa[kk]);'''),
('''            }
        }
        finish();
    } else {''', '''            }
        }
        if (xc)
            xr_e0[xs] = xr_now();
        finish();
        if (xc) {
            xr_end[xs] = xr_now();
            xr_calls[xs] = (unsigned)u;
        }
#undef xc
    } else {'''),
# group 1
('''        regs_inc<kConsumerGroup1Regs>();
''', '''        regs_inc<kConsumerGroup1Regs>();
#define xc (th.tid == 128 && xr_slot() >= 0)
'''),
('''                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                if (buf == 0) // group 0's P and corrections of this tile''', '''                mbar_wait(full0 + 8 * buf, (u / 2) % 2);
                if (xc && u < 64)
                    xr_f1[xs][u] = xr_now();
                if (buf == 0) // group 0's P and corrections of this tile'''),
('''                    named_barrier_unaligned_n<5, NC>();
                rescale(corr[buf * HB + r0], corr[buf * HB + r0 + 8]);
''', '''                    named_barrier_unaligned_n<5, NC>();
                if (xc && u < 64)
                    xr_w1[xs][u] = xr_now();
                rescale(corr[buf * HB + r0], corr[buf * HB + r0 + 8]);
'''),
('''wg_desc(vb + 2u * SBO * kk, SBO, 128u));
                tile_done(buf);
''', '''wg_desc(vb + 2u * SBO * kk, SBO, 128u));
                tile_done(buf);
                if (xc && u < 64)
                    xr_o1[xs][u] = xr_now();
#undef xc
#undef xs
'''),
])

# group 1's stamps, printed after the 16-head instrument's lines (-1 where a kernel without them ran)
patch('kernels/dsa_merge.cuh', [('''                       d(xr_pt[xs][v][1]), d(xr_f[xs][v]), d(xr_s[xs][v]), d(xr_p[xs][v]), d(xr_o[xs][v]));
''', '''                       d(xr_pt[xs][v][1]), d(xr_f[xs][v]), d(xr_s[xs][v]), d(xr_p[xs][v]), d(xr_o[xs][v]));
            for (int v = 0; v < u && v < 64; v++)
                printf("XR cta %d u %d: group 1 f %lld w %lld o %lld\\n", xs, v, d(xr_f1[xs][v]), d(xr_w1[xs][v]),
                       d(xr_o1[xs][v]));
''')])
