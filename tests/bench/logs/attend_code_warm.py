# Throwaway (issue 15): how much of a sparse MLA call's fixed cost is its code fetched after the L2
# flush. Rows are taken in two halves of the bench's 128 requests, A (0..B-1) and B (B..2B-1), each row
# its own request, block table and keys. Per point, the median of 20 of one call on B timed between
# two events:
#   cold: after the L2 flush (bench_attend.py's "L2 flushed" time);
#   code: after the flush, then one untimed call on A: the kernels' code (and the small shared tensors'
#         pages) warm, B's data (its top-k, queries, table rows, keys) still cold;
#   warm: right after an untimed call on B itself, no flush (code and data warm);
#   rflush: after a flush that reads 256 MiB instead of writing it (L2 left holding clean lines: a
#         call after it writes nothing back to evict them).
# fp8_ds_mla at 16 and 32 heads, 1 and 64 rows, each row's top-k cut to n entries (64: one tile).
# Run from the tree root after `ninja gpu`, carrying .bench-out: python3 tests/bench/logs/attend_code_warm.py
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_attend import GRID, Point  # noqa: E402

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
flush.fill_(1)
flush64 = flush.view(torch.int64)


def timed(run, before):
    t = []
    for r in range(23):
        before()
        # the GPU held busy (~0.2 ms) while the host queues the event and the call: the sample never
        # waits for the host's launch (as bench_prologue.time_ms holds it)
        torch.cuda._sleep(400_000)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        if r >= 3:
            t.append(a.elapsed_time(b) * 1e3)
    return statistics.median(t)


for tp in (8, 4):
    p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_fp8_ds_mla"))
    assert p.pos.dtype == torch.int64 and p.req.dtype == torch.int32
    full = p.topk.clone()
    for B in (1, 64):  # (128 rows would need 256 requests: the bench allocates 128)
        for n in (64, 2048):
            p.topk.copy_(full)
            p.topk[:, n:] = -1
            ra, rb = p.call(B), p.call(B, start=B)
            cold = timed(rb, lambda: flush.fill_(1))
            code = timed(rb, lambda: (flush.fill_(1), ra()))
            warm = timed(rb, rb)
            rflush = timed(rb, lambda: flush64.sum())
            print(f"CW {p.info.heads_local}h x{B} n {n}: cold {cold:.1f} | code warm {code:.1f} | all warm {warm:.1f} | "
                  f"rflush {rflush:.1f} us", flush=True)
    p.topk.copy_(full)
    p.close()
