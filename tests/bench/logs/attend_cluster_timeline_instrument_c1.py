# Throwaway (never to land): attend_cluster_timeline_instrument.py for a tree with the one-consumer
# patch (logs/attend_one_consumer_16h_35d87ab.patch) applied: its anchors where that patch changed
# them (a tile's key tile is `buf`, not the group's; the cluster merge takes its thread count), and
# the stamps of the producers' first loads and puts in the deep loop, which 16 heads then run at
# fp8 and nvfp4. Run as the original: in the tree root of a copy, then `ninja gpu` and
#   python3 tests/bench/logs/attend_cluster_timeline_run.py
import os

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, 'attend_cluster_timeline_instrument.py')).read()
subs = [
    ('mbar_wait(full0 + 8 * wg, (u / 2) % 2);', 'mbar_wait(full0 + 8 * buf, (u / 2) % 2);'),
    ('mbar_arrive(empty0 + 8 * wg); // this thread', 'mbar_arrive(empty0 + 8 * buf); // this thread'),
    ('cluster_merge<HB, LAT, OP>(smem_addr(obuf0)', 'cluster_merge<HB, LAT, OP, NC * NG>(smem_addr(obuf0)'),
    ("patch('kernels/dsa_wgmma.cuh', [\n", """patch('kernels/dsa_wgmma.cuh', [
(\'\'\'                if (n > Lay::KT)
                    b.load(cache, sm.list, Lay::KT, half, n);
\'\'\', \'\'\'                if (n > Lay::KT)
                    b.load(cache, sm.list, Lay::KT, half, n);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && seg0 == 0)
                    xa_pld[blockIdx.z][half] = xa_now();
\'\'\'),
(\'\'\'                mbar_arrive(full0 + 8 * buf);
                u++;
\'\'\', \'\'\'                mbar_arrive(full0 + 8 * buf);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && u < 4)
                    xa_put[blockIdx.z][u][half] = xa_now();
                u++;
\'\'\'),
"""),
]
for old, new in subs:
    assert old in src, old
    src = src.replace(old, new)
exec(compile(src, 'attend_cluster_timeline_instrument.py (one consumer)', 'exec'))
