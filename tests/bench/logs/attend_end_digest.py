"""Digests of dsa_attend's output and LSE on the benchmark grid's inputs, to check that a kernel patch
keeps the results bit for bit: run it on the tree and on the tree with the patch applied (`ninja gpu`
between), and diff the two outputs. Every line is one call: the heads x format x rows point, the split
count (the runtime's, then each forced one the context allows) and who merged the split rows (their
CTAs' cluster or the split merge kernel), then the SHA-256 (16 hex digits) of out and lse. The inputs
come from a fixed seed (bench_attend.Point, the same for every run); out and lse are cleared first.

Usage (from the repository root, after `ninja gpu` and `build/dsagen specs/models/bench_*.lua -o
.bench-out`): python3 tests/bench/logs/attend_end_digest.py [--tp 8,4] [--format fp8_ds_mla,...]
"""
import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import bench_attend  # noqa: E402
from bench_attend import GRID, Point, lib  # noqa: E402


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1].split(",") if name in sys.argv else default


def digest(t):
    return hashlib.sha256(t.cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def main():
    for fmt in arg("--format", ["fp8_ds_mla", "nvfp4_ds_mla", "bf16"]):
        for tp in arg("--tp", ["8", "4"]):
            for B in bench_attend.BATCHES:
                torch.manual_seed(1234)
                p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_{fmt}"), attend_tokens=B)
                run = p.call(B)
                for sp in (0, 2, 4, 8, 16):  # 0: the runtime's choice
                    if sp and lib.dsa_testing_force_attend_splits(p.ctx, sp) != 0:
                        continue
                    for on in (1, 0):
                        lib.dsa_testing_attend_cluster_merge(p.ctx, on)
                        used = lib.dsa_testing_attend_merges_in_cluster(p.ctx, B)
                        p.out.zero_()
                        p.lse.zero_()
                        run()
                        torch.cuda.synchronize()
                        print(f"{p.info.heads_local}h {fmt} x{B} splits {sp or 'auto'} "
                              f"{'cluster' if used else 'kernel'}: out {digest(p.out[:B])} lse {digest(p.lse[:B])}",
                              flush=True)
                lib.dsa_testing_attend_cluster_merge(p.ctx, 1)
                p.close()
                del p
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
