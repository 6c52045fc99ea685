# Throwaway (forty-fourth session): the stamps of attend_cluster_timeline_instrument.py in the deep
# producer's branch of kernels/dsa_wgmma.cuh (two tiles' raw entries in flight), which that
# instrument does not stamp: the producers' first loads issued and each tile's put (per half). Run
# in the tree root of a copy, after `git apply tests/bench/logs/attend_deep_fp8_f0727e0.patch` (fp8
# takes the deep branch) and attend_cluster_timeline_instrument.py, then `ninja gpu` and
#   python3 tests/bench/logs/attend_cluster_timeline_run.py
from instrument_patch import patch

patch('kernels/dsa_wgmma.cuh', [
('''                s.landed();
                fence_proxy_async();
                mbar_arrive(full0 + 8 * buf);
                u++;''', '''                s.landed();
                fence_proxy_async();
                mbar_arrive(full0 + 8 * buf);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && u < 16)
                    xa_put[blockIdx.z][u][half] = xa_now();
                u++;'''),
('''                if (n > Lay::KT)
                    b.load(cache, sm.list, Lay::KT, half, n);''', '''                if (n > Lay::KT)
                    b.load(cache, sm.list, Lay::KT, half, n);
                if (xa_on(Lay::heads) && th.tid % 128 == 0 && seg0 == 0)
                    xa_pld[blockIdx.z][half] = xa_now();'''),
])
print("attend cluster timeline: the deep branch stamped too")
