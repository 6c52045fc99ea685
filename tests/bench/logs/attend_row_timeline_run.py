# Throwaway driver of attend_row_timeline_instrument.py (run from the tree root after it and `ninja gpu`,
# carrying .bench-out): fp8_ds_mla at 16 and 32 heads, 128 rows (one CTA a row), each row's top-k
# cut to n = 64 (one tile) and 2,048 keys; each point timed L2 flushed and back to back (the call
# right after three others), then one 8-row call (split: its merge kernel prints the stamps of the
# 128-row call before it, "XR" lines). The launch floor first.
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_attend import GRID, Point  # noqa: E402
from bench_prologue import launch_floor_us  # noqa: E402


def timed(run, run8, label, flush):
    """run timed L2 flushed, then back to back (after three others), each followed by run8 (the split
    call whose merge kernel prints the stamps of the call before it)."""
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
        print(f"XR {label} {mode}: {a.elapsed_time(b) * 1e3:.1f} us between the events", flush=True)
        run8()
        torch.cuda.synchronize()


def start():
    """The launch floor, printed, and the flush buffer."""
    floor, floor_f = launch_floor_us()
    print(f"XR launch floor {floor:.1f} us back to back, {floor_f:.1f} us L2 flushed", flush=True)
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


if __name__ == "__main__":
    flush = start()
    for tp in (8, 4):
        p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_fp8_ds_mla"))
        full = p.topk.clone()
        run8 = p.call(8)
        for n in (64, 2048):
            p.topk.copy_(full)
            p.topk[:, n:] = -1
            timed(p.call(128), run8, f"{p.info.heads_local}h x128 n {n}", flush)
        p.topk.copy_(full)
        p.close()
