# Throwaway driver of attend_cluster_timeline_instrument.py (run from the tree root after it and
# `ninja gpu`): 16 heads (grid_tp8, fp8_ds_mla), 1, 8 and 64 rows. Each round: L2 flushed (rounds 0-2;
# 3-5 warm, added in the thirty-second session), one call
# launched in clusters timed between two events (its stamps recorded), then one call merged by the
# split merge kernel, whose CTA (0, 0) prints the clustered call's stamps. Also the launch floor.
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_attend import GRID, Point, lib  # noqa: E402
from bench_prologue import launch_floor_us  # noqa: E402

floor, floor_f = launch_floor_us()
print(f"XC launch floor {floor:.1f} us back to back, {floor_f:.1f} us L2 flushed", flush=True)
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for fmt in ("fp8_ds_mla",):
    p = Point(os.path.join(GRID, f"grid_tp8_dcp1_i1_{fmt}"))
    for B in (1, 8, 64):  # 64: two splits a row merged in the cluster (the fortieth session's addition)
        run = p.call(B)
        lib.dsa_testing_attend_cluster_merge(p.ctx, 1)
        print(f"XC {fmt} rows {B}: merged in the cluster: {lib.dsa_testing_attend_merges_in_cluster(p.ctx, B)}", flush=True)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        # rounds 0-2 L2 flushed before the stamped call, 3-5 not (the call right after two others:
        # its code and data warm); each after three unstamped-in-effect calls, so that the printing
        # merge call before does not shape it (rounds 1-2 of the first version ran 30 us after it)
        for rnd in range(6):
            for _ in range(3):
                run()
            torch.cuda.synchronize()
            if rnd < 3:
                flush.fill_(1)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            print(f"XC round {rnd} ({'L2 flushed' if rnd < 3 else 'warm'}): the clustered call "
                  f"{a.elapsed_time(b) * 1e3:.1f} us between its events", flush=True)
            lib.dsa_testing_attend_cluster_merge(p.ctx, 0)
            run()
            torch.cuda.synchronize()
            lib.dsa_testing_attend_cluster_merge(p.ctx, 1)
    p.close()
