# Throwaway driver of attend_pair_timeline_instrument.py (run from the tree root after it and `ninja gpu`,
# carrying .bench-out): the 128-head pair (grid_tp1) in fp8_ds_mla and bf16, 128 rows (one split a
# row), each row's full 2,048 keys; each timed L2 flushed and back to back (the call right after three
# others), then one 8-row call (split: its merge kernel prints the stamps of the 128-row call before
# it, "XR" lines). The launch floor first.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from attend_row_timeline_run import start, timed  # noqa: E402
from bench_attend import GRID, Point  # noqa: E402

flush = start()
for fmt in ("fp8_ds_mla", "bf16"):
    p = Point(os.path.join(GRID, f"grid_tp1_dcp1_i1_{fmt}"))
    timed(p.call(128), p.call(8), f"{fmt} {p.info.heads_local}h x128", flush)
    p.close()
