# Throwaway driver of attend_pair_timeline_instrument.py (run from the tree root after it and `ninja gpu`,
# carrying .bench-out): the 128-head pair (grid_tp1) in fp8_ds_mla and bf16, 128 rows (one split a
# row), each row's full 2,048 keys; each timed L2 flushed and back to back (the call right after three
# others), then one 8-row call (split: its merge kernel prints the stamps of the 128-row call before
# it, "XR" lines). The launch floor first.
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_attend import GRID, Point  # noqa: E402
from bench_prologue import launch_floor_us  # noqa: E402

floor, floor_f = launch_floor_us()
print(f"XR launch floor {floor:.1f} us back to back, {floor_f:.1f} us L2 flushed", flush=True)
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for fmt in ("fp8_ds_mla", "bf16"):
    p = Point(os.path.join(GRID, f"grid_tp1_dcp1_i1_{fmt}"))
    run, run8 = p.call(128), p.call(8)
    for mode in ("flushed", "back to back"):
        for _ in range(3):
            run()
        if mode == "flushed":
            torch.cuda.synchronize()
            flush.fill_(1)
        torch.cuda._sleep(400_000)  # the GPU busy while the host queues the events and the call
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        print(f"XR {fmt} {p.info.heads_local}h x128 {mode}: {a.elapsed_time(b) * 1e3:.1f} us between the events", flush=True)
        run8()
        torch.cuda.synchronize()
    p.close()
