# Debug phases of the transposed (16/32-head) sparse MLA loop (never to land): per CTA, each role's
# cycles per tile in each phase, summed over its tiles with clock64 by the first thread of each
# consumer group and of each producer warpgroup, kept at the end by the CTAs of blockIdx.x % 32 == 5
# (every split) in a __device__ array that the next split merge kernel prints (a printf in the
# attend kernel makes ptxas serialize its wgmmas): so a point whose rows are split (64 rows at 16
# and 32 heads). Run from the repository root on a throwaway copy of the kernels (the device's
# working copy), then `ninja gpu` and
#   python3 tests/bench/bench_attend.py --calls TP ROWS | grep '^TL'
# Consumer line: tiles, then per tile: wait (full), S (its wgmmas), max (column maxima to barrier
# 1), soft (softmax, P^T, to barrier 2), pv (the P V wgmmas), and the loop's total from before the
# first compaction to after the last tile (and to its first tile's arrival), and the end (merge and
# stores) in four parts. One row (gridDim.x < 6): CTA x 0. Producer line: tiles,
# per tile: wait (empty), put (convert and store), load (the next tile's issue), arrive; total.
import sys
p = 'kernels/dsa_wgmma_t.cuh'
s = open(p).read()
def rep(s, a, b, cnt=1):
    assert s.count(a) >= 1, a
    return s.replace(a, b, cnt)
s = rep(s, '''    int u = 0;
    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {''', '''    int u = 0;
    long long xw = 0, xs = 0, xm = 0, xso = 0, xpv = 0, xsm = 0, xfe = 0, xw0 = -1;
    const long long x0 = clock64();
    for (int seg0 = 0; seg0 < TOPK; seg0 += kAttendSegment) {''')
s = rep(s, '''            mbar_wait(full0 + 8 * wg, (u / 2) % 2);''', '''            const long long xa = clock64();
            mbar_wait(full0 + 8 * wg, (u / 2) % 2);
            const long long xb = clock64();''')
s = rep(s, '''            wgmma_wait();
            wg_pin(sacc);
''', '''            wgmma_wait();
            wg_pin(sacc);
            const long long xc = clock64();
''')
s = rep(s, '''            group_sync();
            // per head: the new m''', '''            group_sync();
            const long long xd = clock64();
            // per head: the new m''')
s = rep(s, '''            fence_proxy_async(); // P^T is read by the tensor cores
            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
''', '''            const long long xd2 = clock64();
            fence_proxy_async(); // P^T is read by the tensor cores
            const long long xd3 = clock64();
            group_sync(); // barrier 1 + wg, again: P^T of the whole tile
            const long long xe = clock64();
            xsm += xd2 - xd, xfe += xd3 - xd2;
''')
s = rep(s, '''            mbar_arrive(empty0 + 8 * wg);''', '''            const long long xf = clock64();
            xw += xb - xa, xs += xc - xb, xm += xd - xc, xso += xe - xd, xpv += xf - xe;
            if (xw0 < 0)
                xw0 = xb - x0; // from the loop's start (the first compaction included) to its first tile
            mbar_arrive(empty0 + 8 * wg);''')
s = rep(s, '''    mbar_arrive(done);
    mbar_wait(done, 0);''', '''    mbar_arrive(done);
    mbar_wait(done, 0);
    const long long x2 = clock64();''')
s = rep(s, '''    mbar_arrive(done);
    mbar_wait(done, 1);''', '''    const long long x3 = clock64();
    mbar_arrive(done);
    mbar_wait(done, 1);
    const long long x4 = clock64();''')
s = rep(s, '''    float l[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {''', '''    const long long x1 = clock64();
    float l[NH];
#pragma unroll
    for (int h = 0; h < NH; h++) {''')
i = s.rindex('''        store(head, d + 2, o.z, o.w);
    }
''') + len('''        store(head, d + 2, o.z, o.w);
    }
''')
s = s[:i] + '''    if (gt == 0 && blockIdx.x % 32 == (gridDim.x > 5 ? 5 : 0) && blockIdx.y == 0 && blockIdx.x < 128 && blockIdx.z < 2) {
        const int nt = (u + 1 - wg) / 2 > 0 ? (u + 1 - wg) / 2 : 1;
        long long *r = xtl[((blockIdx.x / 32) * 2 + blockIdx.z) * 4 + wg];
        r[0] = 1, r[1] = blockIdx.x, r[2] = blockIdx.z, r[3] = (u + 1 - wg) / 2, r[4] = xw / nt, r[5] = xs / nt;
        r[6] = xm / nt, r[7] = xso / nt, r[8] = xpv / nt, r[9] = x1 - x0, r[10] = clock64() - x1, r[11] = xsm / nt;
        r[0] = 1 + 16 * (xfe / nt);
        r[12] = xw0, r[13] = x2 - x1, r[14] = x3 - x2, r[15] = x4 - x3, r[16] = clock64() - x4;
    }
''' + s[i:]
open(p, 'w').write(s)

p = 'kernels/dsa_wgmma.cuh'
s = open(p).read()
for wait in ('''                if (u >= 2)
                    mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it''',
             '''            if (u >= 2)
                mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // the consumers are done with use u / 2 - 1'''):
    ind = wait[:wait.index('if')]
    if wait not in s and 'constexpr bool Deep = !Pair;' in s:
        continue  # the deep patch's form, below
    s = rep(s, wait, ind + 'const long long xa = clock64();\n' + wait + '\n' + ind + 'const long long xb = clock64();')
deep = 'constexpr bool Deep = !Pair;' in s  # attend_deep_producer_cd156a2.patch applied
if deep:
    s = rep(s, '''            if (u >= 2)
                mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it''', '''            const long long xa = clock64();
            if (u >= 2)
                mbar_wait(empty0 + 8 * buf, (u / 2 - 1) % 2); // a pair: both CTAs' consumers are done with it
            const long long xb = clock64();''')
    s = rep(s, '''            if (t0 + Ahead2 < n)
                s.load(cache, sm.list, t0 + Ahead2, half, n);
            s.landed();''', '''            const long long xc = clock64();
            if (t0 + Ahead2 < n)
                s.load(cache, sm.list, t0 + Ahead2, half, n);
            const long long xd = clock64();
            s.landed();''')
    s = rep(s, '''                mbar_arrive(full0 + 8 * buf);
            u++;''', '''                mbar_arrive(full0 + 8 * buf);
            const long long xe = clock64();
            xw += xb - xa, xp += xc - xb, xl += xd - xc, xr += xe - xd;
            u++;''')
    s = rep(s, '''        constexpr int Ahead2 = Deep ? 2 * Lay::KT : Lay::KT; // how far ahead a stage is refilled
        int u = 0;''', '''        constexpr int Ahead2 = Deep ? 2 * Lay::KT : Lay::KT; // how far ahead a stage is refilled
        int u = 0;
        long long xw = 0, xp = 0, xl = 0, xr = 0;
        const long long x0 = clock64();''')
    s = rep(s, '''                for (int t0 = 0; t0 < n; t0 += Lay::KT)
                    tile(a, t0, n);
            }
        }
''', '''                for (int t0 = 0; t0 < n; t0 += Lay::KT)
                    tile(a, t0, n);
            }
        }
        if (th.tid % 128 == 0 && blockIdx.x % 32 == (gridDim.x > 5 ? 5 : 0) && blockIdx.y == 0 && blockIdx.x < 128 && blockIdx.z < 2 && Lay::TR) {
            const int nt = u > 0 ? u : 1;
            long long *r = xtl[((blockIdx.x / 32) * 2 + blockIdx.z) * 4 + th.warp / 4];
            r[0] = 2, r[1] = blockIdx.x, r[2] = blockIdx.z, r[3] = u, r[4] = xw / nt, r[5] = xp / nt;
            r[6] = xl / nt, r[7] = xr / nt, r[8] = clock64() - x0;
        }
''')
else:
    # two-producer path: put, load, landed+arrive
    s = rep(s, '''                if (t0 + Lay::KT < n)
                    a.load(cache, sm.list, t0 + Lay::KT, half, n);
                a.landed();''', '''                const long long xc = clock64();
                if (t0 + Lay::KT < n)
                    a.load(cache, sm.list, t0 + Lay::KT, half, n);
                const long long xd = clock64();
                a.landed();''')
    s = rep(s, '''                else
                    mbar_arrive(full0 + 8 * buf);
            }
        }
        return;''', '''                else
                    mbar_arrive(full0 + 8 * buf);
                const long long xe = clock64();
                xw += xb - xa, xp += xc - xb, xl += xd - xc, xr += xe - xd;
            }
        }
        if (th.tid % 128 == 0 && blockIdx.x % 32 == (gridDim.x > 5 ? 5 : 0) && blockIdx.y == 0 && blockIdx.x < 128 && blockIdx.z < 2 && Lay::TR) {
            const int nt = u > 0 ? u : 1;
            long long *r = xtl[((blockIdx.x / 32) * 2 + blockIdx.z) * 4 + th.warp / 4];
            r[0] = 2, r[1] = blockIdx.x, r[2] = blockIdx.z, r[3] = u, r[4] = xw / nt, r[5] = xp / nt;
            r[6] = xl / nt, r[7] = xr / nt, r[8] = clock64() - x0;
        }
        return;''')
    s = rep(s, '''        KeyStage<Lay, ScaleOffset, RopeOffset> a(th.warp % 4, th.lane);
        int u = 0;''', '''        KeyStage<Lay, ScaleOffset, RopeOffset> a(th.warp % 4, th.lane);
        int u = 0;
        long long xw = 0, xp = 0, xl = 0, xr = 0;
        const long long x0 = clock64();''')
# one-producer path (32 heads: Ahead)
s = rep(s, '''    KeyStage<Lay, ScaleOffset, RopeOffset> a(th.warp - 8, th.lane), b(th.warp - 8, th.lane); // halves 0 and 1
    int u = 0;''', '''    KeyStage<Lay, ScaleOffset, RopeOffset> a(th.warp - 8, th.lane), b(th.warp - 8, th.lane); // halves 0 and 1
    int u = 0;
    long long xw = 0, xp = 0, xr = 0;
    const long long x0 = clock64();''')
s = rep(s, '''            a.landed(); // bf16: both halves' cp.async
            fence_proxy_async(); // this thread's writes of the tile are read by the tensor cores
            mbar_arrive(full0 + 8 * buf);
        }
    }
}''', '''            const long long xc = clock64();
            a.landed(); // bf16: both halves' cp.async
            fence_proxy_async(); // this thread's writes of the tile are read by the tensor cores
            mbar_arrive(full0 + 8 * buf);
            xw += xb - xa, xp += xc - xb, xr += clock64() - xc;
        }
    }
    if (th.tid % 128 == 0 && blockIdx.x % 32 == (gridDim.x > 5 ? 5 : 0) && blockIdx.y == 0 && blockIdx.x < 128 && blockIdx.z < 2 && Lay::TR) {
        const int nt = u > 0 ? u : 1;
        long long *r = xtl[((blockIdx.x / 32) * 2 + blockIdx.z) * 4 + 2];
        r[0] = 3, r[1] = blockIdx.x, r[2] = blockIdx.z, r[3] = u, r[4] = xw / nt, r[5] = xp / nt, r[6] = xr / nt;
        r[7] = clock64() - x0;
    }
}''')
open(p, 'w').write(s)
p = 'kernels/dsa_merge.cuh'
s = open(p).read()
s = rep(s, 'namespace dsa {\n', '''namespace dsa {
__device__ long long xtl[32][20]; // the phases instrument's records (never to land)
''')
a = s.index('split_merge(const dsa_split_merge_params &p)')
b = s.index('{', a)
s = s[:b + 1] + '''
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0)
        for (int i = 0; i < 32; i++) {
            const long long *r = xtl[i];
            if (r[0] % 16 == 1)
                printf("TLC x %lld z %lld wg %d tiles %lld per-tile wait %lld S %lld max %lld soft %lld (math %lld fence %lld) pv %lld | loop %lld (to first tile %lld) end %lld (l + phase 0 %lld, merge + obuf %lld, phase 1 %lld, stores %lld)\\n",
                       r[1], r[2], i % 4, r[3], r[4], r[5], r[6], r[7], r[11], r[0] / 16, r[8], r[9], r[12], r[10], r[13], r[14], r[15], r[16]);
            else if (r[0] == 2)
                printf("TLP x %lld z %lld pwg %d tiles %lld per-tile wait %lld put %lld load %lld arrive %lld | total %lld\\n",
                       r[1], r[2], i % 4, r[3], r[4], r[5], r[6], r[7], r[8]);
            else if (r[0] == 3)
                printf("TLP x %lld z %lld pwg 2 tiles %lld per-tile wait %lld put+load %lld arrive %lld | total %lld\\n",
                       r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
            xtl[i][0] = 0;
        }
''' + s[b + 1:]
open(p, 'w').write(s)
print("instrumented", file=sys.stderr)
