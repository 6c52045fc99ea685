# Throwaway (issue 15): the sparse MLA's time against the keys a row keeps, to split a call into a
# fixed part F (launch, the start's round trips, the end) and a part per 64-key tile p: fp8_ds_mla,
# 16 and 32 heads (grid_tp8, grid_tp4), 64 and 128 rows with the runtime's split choice, each row's
# top-k cut to its first n entries (the rest -1: dropped by the compaction, never read), us L2 flushed /
# back to back.
# Run from the tree root after `ninja gpu`, carrying .bench-out: python3 tests/bench/logs/attend_keys_sweep.py
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_attend import GRID, Point  # noqa: E402
from bench_prologue import launch_floor_us, time_flushed_ms, time_ms  # noqa: E402

floor, floor_f = launch_floor_us()
print(f"KS launch floor {floor:.1f} us back to back, {floor_f:.1f} us L2 flushed", flush=True)
for tp in (8, 4):
    p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_fp8_ds_mla"))
    full = p.topk.clone()
    for B in (128, 64):
        res = []
        for n in (64, 128, 256, 512, 1024, 2048):
            p.topk.copy_(full)
            p.topk[:, n:] = -1
            run = p.call(B)
            res.append(f"n {n}: {time_flushed_ms(run) * 1e3:.1f} / {time_ms(run, inner=10) * 1e3:.1f}")
        print(f"KS {p.info.heads_local}h x{B}: " + " | ".join(res), flush=True)
    p.topk.copy_(full)
    p.close()
