"""Benchmark of stage B's scoring at prefill on an H200 (issue 14's prefill target): one request of
4096 new rows at 64K context (rows at positions 61440 .. 65535, each scoring the keys up to its
own), DCP = 1, both models' indexer head counts, beside a plain fp8 GEMM (torch._scaled_mm, 8192^3,
e4m3 x e4m3 -> bf16) timed right before each line of the same run: the rate the target is a share
of.

The score kernel's time is the sum of the "index score" steps of the call (dsa_testing_stage_events:
CUDA events libdsa records after every kernel), median of 5 calls after 2 warm-ups; its rate counts
2 x heads x head_dim flops per (row, visible key). The whole stage (query, scores, top-k of every
chunk of rows) is timed too, back to back. The rows are chunked by the context's index_tokens
(512 here: the scores of 512 rows of 64K keys in the workspace).

--score picks the score kernel (dsa_testing_force_index_score), a comma-separated list timed one
after the other on the same rows: auto (the runtime's choice: index_score_group here, a call of
more rows than requests), main (index_score: each row's keys on their own) or group
(index_score_group: each CTA scores the plan's index_score_group_rows rows of the request, each key
tile loaded once). The top-k rows of every kernel must equal the first's (the kernels' scores are
the same bits); a difference ends the run.

--line TAG prints one line instead of the table, for tests/bench/ab.sh (--bench prefill): TAG, then
each configuration's scores us and share of _scaled_mm, for the first --score (default group).

--plain launches libdsa's kernels plainly instead of as programmatic dependent launches
(dsa_testing_programmatic_launch), so that a score kernel's CTAs never start, and wait, under the
kernel ahead of it: to see what the overlap does to the scores' time and its spread.

Usage: python3 tests/bench/bench_prefill.py [--rows 4096] [--context 65536] [--chunk 512]
[--score main,group] [--line TAG] [--plain]   (from the repository root, after `ninja gpu`)
"""
import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_ctypes  # noqa: E402
from bench_index import index_args, random_pages  # noqa: E402
from bench_prologue import lib, time_ms  # noqa: E402
from dsa_ctypes import Options  # noqa: E402

CONFIGS = ["deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla"]
MARKS = 256
SCORES = {"auto": 0, "main": 2, "group": 3}  # --score: dsa_testing_force_index_score's choice


def arg(flag, default):
    return int(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else default


def scaled_mm_rate(n=8192):
    """A function that times torch._scaled_mm on n x n x n e4m3 operands (B column-major, as
    cuBLASLt wants) and returns its TFLOP/s; the operands are made once, here, for every timing."""
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")

    def tflops():
        ms = time_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), reps=50,
                     warmup=20)
        return 2 * n ** 3 / (ms * 1e-3) / 1e12
    return tflops


def run(name, N, L, chunk, score):
    info = dsa_ctypes.config_info(lib, name)
    H, D, BS, page = info.idx_heads, info.idx_head_dim, info.block_size, info.idx_page_bytes
    nb = L // BS
    torch.manual_seed(20261201)  # the same keys, queries and weights for every score kernel compared
    cache = random_pages(nb, BS, D, page)
    table = torch.randperm(nb, device="cuda", dtype=torch.int64).to(torch.int32).view(1, nb)
    q = torch.randn(N, H, D, device="cuda").bfloat16()
    w = torch.randn(N, H, device="cuda")
    pos = torch.arange(L - N, L, device="cuda", dtype=torch.int64)
    req = torch.zeros(N, device="cuda", dtype=torch.int32)
    lens = torch.full((1,), L, device="cuda", dtype=torch.int32)
    topk = torch.empty(N, info.idx_topk, device="cuda", dtype=torch.int32)
    a = index_args(q, w, pos, req, lens, table, cache, topk)
    opts = Options(ctypes.sizeof(Options), None, 16384, 0, 1, None, None, None, None, 0, 256, chunk)
    ctx = ctypes.c_void_p()
    if lib.dsa_ctx_create(name.encode(), ctypes.byref(opts), ctypes.byref(ctx)) != 0:
        sys.exit(f"dsa_ctx_create: {lib.dsa_last_error(None).decode()}")
    if lib.dsa_testing_force_index_score(ctx, SCORES[score]) != 0:
        sys.exit(f"dsa_testing_force_index_score: {lib.dsa_last_error(ctx).decode()}")
    if lib.dsa_testing_programmatic_launch(ctx, 0 if "--plain" in sys.argv else 1) != 0:
        sys.exit(f"dsa_testing_programmatic_launch: {lib.dsa_last_error(ctx).decode()}")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def dsa():
        if lib.dsa_index(ctx, ctypes.byref(a), stream) != 0:
            sys.exit(f"dsa_index: {lib.dsa_last_error(ctx).decode()}")

    # CUDA events of torch (a cudaEvent_t is a CUevent), created by a first record
    events = [torch.cuda.Event(enable_timing=True) for _ in range(MARKS + 1)]
    for e in events:
        e.record()
    torch.cuda.synchronize()
    handles = (ctypes.c_void_p * MARKS)(*[e.cuda_event for e in events[1:]])
    names = (ctypes.c_char_p * MARKS)()
    count = ctypes.c_int(0)
    score_ms = []
    for rep in range(-2, 5):
        if lib.dsa_testing_stage_events(ctx, handles, names, MARKS, ctypes.byref(count)) != 0:
            sys.exit(f"dsa_testing_stage_events: {lib.dsa_last_error(ctx).decode()}")
        events[0].record()
        dsa()
        lib.dsa_testing_stage_events(ctx, None, None, 0, None)
        torch.cuda.synchronize()
        if rep < 0:
            continue
        if count.value >= MARKS:
            sys.exit("bench_prefill: more steps than MARKS")
        score_ms.append(sum(events[i].elapsed_time(events[i + 1]) for i in range(count.value)
                            if names[i] == b"index score"))
    whole_ms = time_ms(dsa, reps=5, warmup=1)
    lib.dsa_ctx_destroy(ctx)
    p = pos.double() + 1.0
    flops = 2.0 * H * D * float(p.sum())
    return H, statistics.median(score_ms), whole_ms, flops, topk.cpu()


def main():
    N, L, chunk = arg("--rows", 4096), arg("--context", 65536), arg("--chunk", 512)
    tag = sys.argv[sys.argv.index("--line") + 1] if "--line" in sys.argv else None
    default = "group" if tag else "main,group"
    scores = (sys.argv[sys.argv.index("--score") + 1] if "--score" in sys.argv else default).split(",")
    if not scores or any(s not in SCORES for s in scores):
        sys.exit(f"--score: a comma-separated list of {', '.join(SCORES)}")
    scaled_mm_tflops = scaled_mm_rate()

    def measure(name, score):
        # the GEMM's rate right before each line, with a longer warm-up: measured once a run it
        # read 1264-1463 TFLOP/s across one session's calls (tests/bench/RESULTS.md)
        ref = scaled_mm_tflops()
        H, s_ms, w_ms, flops, topk = run(name, N, L, chunk, score)
        return H, s_ms, w_ms, flops / (s_ms * 1e-3) / 1e12, ref, topk

    if tag:
        parts = []
        for name in CONFIGS:
            _, s_ms, _, rate, ref, _ = measure(name, scores[0])
            parts.append(f"{name.split('_')[0]} {1e3 * s_ms:.0f} us {100 * rate / ref:.0f}%")
            torch.cuda.empty_cache()
        print(f"{tag}: " + " | ".join(parts), flush=True)
        return
    print(f"device {torch.cuda.get_device_name()}")
    print("| configuration | indexer heads | score kernel | rows | context | scores us | scores TFLOP/s | "
          "torch._scaled_mm TFLOP/s | share of _scaled_mm | whole stage us |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in CONFIGS:
        first = None
        for score in scores:
            H, s_ms, w_ms, rate, ref, topk = measure(name, score)
            print(f"| {name} | {H} | {score} | {N} | {L} | {1e3 * s_ms:.0f} | {rate:.0f} | {ref:.0f} | "
                  f"{100 * rate / ref:.0f}% | {1e3 * w_ms:.0f} |", flush=True)
            if first is None:
                first = (score, topk)
            elif not torch.equal(first[1], topk):
                sys.exit(f"bench_prefill: {name}: the top-k rows of --score {score} differ from {first[0]}'s")
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
