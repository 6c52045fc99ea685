"""Benchmark of the sparse MLA of stage C on an H200: libdsa's dsa_attend (through ctypes) over the
grid of issue 15: heads per GPU {16, 32, 64, 128} x decode rows {1, 8, 64, 128} x the three cache
formats, top-k 2048, each row its own 2048 distinct keys of its own 16384-token request.

The configurations are DeepSeek-V3.2's layer at TP 8, 4, 2, 1 (specs/models/bench_attend_grid.lua), rendered
into .bench-out/ by `build/dsagen specs/models/bench_*.lua -o .bench-out` and loaded at run time
(dsa_ctx_create_dir); heads, top-k, block size, dimensions and the cache layout come from libdsa.

Per point: time back to back (median of 20 of the mean of 10 calls, CUDA events, after warm-ups) and
with L2 flushed before each call (a 256 MiB write between calls, each call timed alone, median of
20). FLOPs per row: 2 * heads * topk * (kv_dim + kv_lora_rank). Bytes: the rows' keys (topk * the
format's bytes per token), queries and outputs. The bound is the larger of bytes / copy bandwidth
and FLOPs / the bf16 tensor-core rate, both measured in the same run (a device copy, an 8192^3 bf16
matrix product); "share" is bound time / measured time. Each point runs with the runtime's split
choice (splits a row's top-k over CTAs when rows alone leave the device idle) and, for comparison,
with one CTA per row (dsa_testing_force_attend_splits(ctx, 1), the kernel before splitting).
Beside it, back to back, the PyTorch eager peer (gather the top-k keys, S = Q K^T, softmax in fp32,
P V), measured on the bf16 cache of each heads x rows point and shown on every format's row: it
skips the dequantisation of fp8 and nvfp4 keys, which favours it (not with --quick).

Usage: python3 tests/bench/bench_attend.py [--quick] [--plain]   (from the repository root, after
`ninja gpu` and the dsagen command above; --quick: fp8 only; --plain: kernels launched plainly, not
as programmatic dependent launches, to measure what those buy)
       python3 tests/bench/bench_attend.py --line TAG [--format F] [--floor]   one line "TAG: 16h x1:
           us | ..." of the L2-flushed times at every heads x rows point (format F: fp8_ds_mla, the
           default, nvfp4_ds_mla or bf16), for A/B runs of two trees in one device call; --floor
           puts first the launch floor, one one-element kernel timed the same way (the table prints
           it in its header); --model M reads the configurations M_tp8.. instead of grid_tp8..
           (gridk4096: specs/models/bench_attend_k4096.lua, top-k 4096, fp8 only)
       any mode with --kernel-merge: split rows merged by the split merge kernel even where their
           CTAs would merge them in their cluster (dsa_testing_attend_cluster_merge(ctx, 0)), to
           time the two in one run
       any mode with --sorted-topk: each row's top-k in ascending position order (the order stage
           B writes) instead of a random one, to see what the cache's DRAM locality is worth
       python3 tests/bench/bench_attend.py --merge-sweep   fp8, 16 and 32 heads at 1, 8 and 64 rows,
           each forced split count, the split rows merged in their cluster against the split merge
           kernel, L2 flushed
       python3 tests/bench/bench_attend.py --calls TP ROWS [--format F]   4 calls of the TP
           configuration (fp8_ds_mla unless F says nvfp4_ds_mla or bf16) at ROWS rows and nothing
           else, to run under a profiler (ncu --launch-skip 3 ...)
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_ctypes  # noqa: E402  (the binding the benchmarks share)
from bench_prologue import (copy_bandwidth, encode_entries, launch_floor_text, launch_floor_us, lib,  # noqa: E402
                            time_flushed_ms, time_ms)
from dsa_ctypes import AttendArgs, ConfigInfo, Options  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRID = os.path.join(ROOT, ".bench-out")
MODEL = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else "grid"  # --line's configurations
SEQ = 16384  # tokens of each request
BATCHES = (1, 8, 64, 128)
# --sorted-topk: each row's top-k in ascending position order, as stage B (dsa_index) writes it,
# instead of a random order; the same keys either way
SORTED_TOPK = "--sorted-topk" in sys.argv
FORMATS = {"bf16": dsa_ctypes.CACHE_BF16, "fp8": dsa_ctypes.CACHE_FP8_DS_MLA, "nvfp4": dsa_ctypes.CACHE_NVFP4_DS_MLA}


def tensor_rate():
    n = 8192
    a = torch.randn(n, n, device="cuda").bfloat16()
    b = torch.randn(n, n, device="cuda").bfloat16()
    ms = time_ms(lambda: a @ b, reps=10, warmup=3)
    return 2 * n ** 3 / (ms * 1e-3)


class Point:
    """One configuration's context and a cache for BATCHES[-1] requests; rows 0..B-1 for batch B."""

    def __init__(self, folder, attend_tokens=256):
        opts = Options(ctypes.sizeof(Options), None, 16384, 0, 1, None, None, None, None, 0, attend_tokens)
        self.ctx = ctypes.c_void_p()
        if lib.dsa_ctx_create_dir(folder.encode(), ctypes.byref(opts), ctypes.byref(self.ctx)) != 0:
            sys.exit(f"dsa_ctx_create_dir({folder}): {lib.dsa_last_error(None).decode()}")
        lib.dsa_testing_programmatic_launch(self.ctx, 0 if "--plain" in sys.argv else 1)
        if "--kernel-merge" in sys.argv:
            lib.dsa_testing_attend_cluster_merge(self.ctx, 0)  # refused (a no-op) where it has none
        info = ConfigInfo()
        info.size = ctypes.sizeof(ConfigInfo)
        lib.dsa_ctx_config(self.ctx, ctypes.byref(info))
        self.info = info
        fmt = {v: k for k, v in FORMATS.items()}[info.cache_dtype]
        H, L, R, BS = info.heads_local, info.kv_lora_rank, info.qk_rope_dim, info.block_size
        B = BATCHES[-1]
        blocks = SEQ // BS
        n = B * SEQ
        cache = torch.empty(n, info.cache_bytes_per_token, dtype=torch.uint8, device="cuda")
        for i in range(0, n, 1 << 18):  # random normalised latent and rope, in the format's bytes
            m = min(1 << 18, n - i)
            lat = torch.randn(m, L, device="cuda")
            kpe = torch.randn(m, R, device="cuda")
            cache[i:i + m] = encode_entries(fmt, L, lat, kpe)
        self.cache = cache
        self.table = torch.randperm(B * blocks, device="cuda", dtype=torch.int64).to(torch.int32).view(B, blocks)
        self.q_lat = torch.randn(B, H, L, device="cuda").bfloat16()
        self.q_pe = torch.randn(B, H, R, device="cuda").bfloat16()
        self.pos = torch.full((B,), SEQ - 1, device="cuda", dtype=torch.int64)
        self.topk = torch.stack([torch.randperm(SEQ, device="cuda")[:info.idx_topk] for _ in range(B)]).to(torch.int32)
        if SORTED_TOPK:  # each row's positions ascending, the order dsa_index writes
            self.topk = self.topk.sort(dim=1).values
        self.req = torch.arange(B, device="cuda", dtype=torch.int32)
        self.lens = torch.full((B,), SEQ, device="cuda", dtype=torch.int32)
        self.out = torch.empty(B, H, L, device="cuda", dtype=torch.bfloat16)
        self.lse = torch.empty(B, H, device="cuda", dtype=torch.float32)
        self.fmt, self.blocks = fmt, blocks

    def call(self, B, start=0):
        """A call on rows start .. start + B - 1 (each row its own request, table row and keys)."""
        a = AttendArgs()
        a.size = ctypes.sizeof(AttendArgs)
        a.num_tokens = B
        for f in ("q_lat", "q_pe", "topk", "out", "lse", "pos", "req"):
            t = getattr(self, f)
            setattr(a, {"pos": "positions", "req": "req_of_token"}.get(f, f),
                    t.data_ptr() + start * t.stride(0) * t.element_size())
        a.seq_lens, a.block_table, a.kv_cache = self.lens.data_ptr(), self.table.data_ptr(), self.cache.data_ptr()
        a.num_requests, a.max_blocks, a.num_cache_blocks = start + B, self.blocks, self.table.numel()
        ctx = self.ctx

        def run():
            if lib.dsa_attend(ctx, ctypes.byref(a), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)) != 0:
                sys.exit(f"dsa_attend: {lib.dsa_last_error(ctx).decode()}")
        return run

    def eager(self, B):
        """The PyTorch eager peer for batch B, on this point's bf16 cache (format bf16 only: the peer
        skips dequantisation, which favours it): gather the top-k keys, S = Q K^T, softmax, P V."""
        i = self.info
        BS, L = i.block_size, i.kv_lora_rank
        tk = self.topk[:B].long()
        slots = self.table[:B].long().gather(1, tk // BS) * BS + tk % BS  # [B, K]
        kv = self.cache.view(torch.bfloat16).view(-1, i.kv_dim)
        q = torch.cat([self.q_lat[:B], self.q_pe[:B]], -1)  # [B, H, kv_dim]
        scale = i.softmax_scale  # the plan's (qk head dim and YaRN's mscale), as dsa_attend uses

        def run():
            k = kv[slots]  # [B, K, kv_dim]
            p = (torch.einsum("bhd,bkd->bhk", q, k).float() * scale).softmax(-1)
            return torch.einsum("bhk,bkd->bhd", p.bfloat16(), k[..., :L])
        return run

    def close(self):
        lib.dsa_ctx_destroy(self.ctx)


def line(tag, fmt="fp8_ds_mla"):
    """--line: the L2-flushed times of one format (--format: fp8_ds_mla, nvfp4_ds_mla or bf16) at
    every point, the runtime's split choice, on one line."""
    res = []
    for tp in (8, 4, 2, 1):
        p = Point(os.path.join(GRID, f"{MODEL}_tp{tp}_dcp1_i1_{fmt}"))
        for B in BATCHES:
            run = p.call(B)
            res.append(f"{p.info.heads_local}h x{B}: {time_flushed_ms(run) * 1e3:.1f}")
        p.close()
        del p
        torch.cuda.empty_cache()
    if "--floor" in sys.argv:
        res.insert(0, "floor %.1f" % launch_floor_us()[1])
    print(f"{tag}: " + " | ".join(res), flush=True)


def merge_sweep():
    """--merge-sweep: fp8, 16 and 32 heads, 1 / 8 / 64 rows, each split count the context allows (a
    context of that many rows a chunk), L2-flushed us with the split rows merged in their CTAs'
    cluster and by the split merge kernel, in one run."""
    for tp in (8, 4):
        for B in (1, 8, 64):
            p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_fp8_ds_mla"), attend_tokens=B)
            run = p.call(B)
            res = []
            for sp in (2, 4, 8, 16):
                if lib.dsa_testing_force_attend_splits(p.ctx, sp) != 0:
                    continue
                t = []
                for on in (1, 0):
                    lib.dsa_testing_attend_cluster_merge(p.ctx, on)
                    used = lib.dsa_testing_attend_merges_in_cluster(p.ctx, B)
                    t.append(f"{'cluster' if used else 'kernel'} {time_flushed_ms(run) * 1e3:.1f}")
                res.append(f"s{sp}: " + " / ".join(t))
            lib.dsa_testing_attend_cluster_merge(p.ctx, 1)
            print(f"MS {p.info.heads_local}h x{B}: " + " | ".join(res), flush=True)
            p.close()
            del p
            torch.cuda.empty_cache()


def calls(tp, B, fmt):
    """--calls: a warm-up and three more calls of one point, for a profiler to pick the fourth."""
    p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_{fmt}"))
    run = p.call(B)
    for _ in range(4):
        run()
    torch.cuda.synchronize()
    p.close()


def main():
    if not os.path.isdir(GRID):
        sys.exit(f"bench_attend: no {GRID}: run `build/dsagen specs/models/bench_*.lua -o .bench-out` first")
    fi = sys.argv.index("--format") + 1 if "--format" in sys.argv else 0
    if fi and fi >= len(sys.argv):
        sys.exit("bench_attend: --format needs a format: fp8_ds_mla, nvfp4_ds_mla or bf16")
    fmt = sys.argv[fi] if fi else "fp8_ds_mla"
    if fmt not in ("fp8_ds_mla", "nvfp4_ds_mla", "bf16"):
        sys.exit(f"bench_attend: --format {fmt}: not one of fp8_ds_mla, nvfp4_ds_mla, bf16")
    if "--line" in sys.argv:
        return line(sys.argv[sys.argv.index("--line") + 1], fmt)
    if "--merge-sweep" in sys.argv:
        return merge_sweep()
    if "--calls" in sys.argv:
        i = sys.argv.index("--calls")
        return calls(int(sys.argv[i + 1]), int(sys.argv[i + 2]), fmt)
    quick = "--quick" in sys.argv
    bw, rate = copy_bandwidth(), tensor_rate()
    print(f"device {torch.cuda.get_device_name()}; copy bandwidth {bw / 1e12:.2f} TB/s (read + write), "
          f"bf16 tensor-core rate {rate / 1e12:.0f} TFLOP/s (8192^3 product); top-k 2048, {SEQ}-token requests")
    print(launch_floor_text())
    print("| heads | format | rows | splits | us | us L2 flushed | TFLOP/s | key TB/s | share of bound | "
          "bound | one CTA a row: us, L2 flushed | speed-up (flushed) | PyTorch eager us (bf16 keys) | x eager |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    peer = {}  # (heads, rows): the eager peer's us, measured on the bf16 point and shown for every format
    for tp in (8, 4, 2, 1):
        for fmt in (("fp8",) if quick else ("bf16", "fp8", "nvfp4")):
            name = {"bf16": "bf16", "fp8": "fp8_ds_mla", "nvfp4": "nvfp4_ds_mla"}[fmt]
            p = Point(os.path.join(GRID, f"grid_tp{tp}_dcp1_i1_{name}"))
            i = p.info
            H, K = i.heads_local, i.idx_topk
            for B in BATCHES:
                run = p.call(B)
                lib.dsa_testing_force_attend_splits(p.ctx, 0)
                splits = lib.dsa_testing_attend_splits(p.ctx, B)
                if lib.dsa_testing_attend_merges_in_cluster(p.ctx, B):
                    splits = f"{splits}, merged in the cluster"
                ms = time_ms(run, reps=20, warmup=3, inner=10)
                msf = time_flushed_ms(run)
                lib.dsa_testing_force_attend_splits(p.ctx, 1)
                ms1f = time_flushed_ms(run)
                lib.dsa_testing_force_attend_splits(p.ctx, 0)
                if fmt == "bf16":
                    peer[(H, B)] = 1e3 * time_ms(p.eager(B), reps=5, warmup=1)
                    torch.cuda.empty_cache()
                us_p = peer.get((H, B), float("nan"))
                flops = 2 * H * K * (i.kv_dim + i.kv_lora_rank) * B
                key_bytes = B * K * i.cache_bytes_per_token
                io_bytes = key_bytes + B * H * (i.kv_dim * 2 + i.kv_lora_rank * 2 + 4)
                t_mem, t_mma = io_bytes / bw, flops / rate  # bw counts a copy's reads and writes
                bound = "memory" if t_mem >= t_mma else "tensor"
                share = max(t_mem, t_mma) / (msf * 1e-3)
                print(f"| {H} | {fmt} | {B} | {splits} | {ms * 1e3:.1f} | {msf * 1e3:.1f} | {flops / msf / 1e9:.0f} | "
                      f"{key_bytes / msf / 1e9:.2f} | {share:.0%} | {bound} | {ms1f * 1e3:.1f} | {ms1f / msf:.2f}x | "
                      f"{us_p:.0f} | {us_p / (ms * 1e3):.1f}x |", flush=True)
            p.close()
            del p
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
