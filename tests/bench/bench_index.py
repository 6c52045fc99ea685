"""Benchmark of stage B (the indexer) on an H200: libdsa's dsa_index (through ctypes) at decode, DCP = 1,
for both models' indexer head counts (DeepSeek-V3.2: 64 heads; GLM-5.2: 32), batch B in {1, 64, 128}
rows, context L in {8K, 32K, 128K} keys per row, beside in the same run:
- the floor: the indexer key bytes the rows read (the plan's idx_bytes_per_token a key) over the
  measured copy bandwidth;
- a PyTorch peer: dequantise the keys to bf16, einsum with the (already prepared) query, ReLU, the
  head weights, key scales, torch.topk (the peer skips the query preparation, which favours it);
  rows in pieces of at most 64 x 128K keys, which bounds its fp32 scores (one piece up to there).
Timed with CUDA events: median of 10 of the mean of 5 back-to-back calls after 2 warm-ups, and the
same with L2 flushed (a 256 MiB write) before each call. Each row's keys are its own request's.
The configuration's shapes come from libdsa (dsa_config_info, through tests/bench/dsa_ctypes.py).
Each point runs with the top-k kernels (dsa_testing_force_index_topk: `auto`, the runtime's choice,
which spreads a row over several CTAs when there are few rows of more than the plan's
index_topk_split_min_keys (16384) keys; `split`, split from 2 CTAs a row; `one`, a CTA per row;
`capN`, the split with at most N CTAs a row (dsa_testing_index_topk_cap; at short rows too, where
auto and nobins take one CTA a row: the "CTAs a row" column says which ran);
`nobins`, the runtime's choice with the split top-k counting its first pass itself rather than
index_score, dsa_testing_index_score_bins(ctx, 0): the same binary both ways, in one run; several,
comma-separated), says how many CTAs a row got, and checks that they give the same rows.

Usage: python3 tests/bench/bench_index.py [--quick] [--topk auto|split|one|both|capN|nobins,..] [--rows 1,64,128]
[--context 8192,32768,131072] [--no-peer] [--score auto|few|main|group] [--plain]   (from the repository root, after `ninja gpu`; default:
both top-k kernels, every row count and context, the peer at every point; --plain: kernels
launched plainly, not as programmatic dependent launches, to measure what those buy)
       python3 tests/bench/bench_index.py --calls CONFIG ROWS CONTEXT   4 calls of one point (the
runtime's top-k choice), for tests/bench/profile_index.sh
       python3 tests/bench/bench_index.py --line TAG [--rows 1,8,64,128] [--context 32768,131072]
[--score ..] [--plain]   one line "TAG: deepseek 1x32K: us/us | ..." of the runtime's choice, back to back /
L2 flushed, every configuration x rows x context (tests/bench/ab.sh --bench index)
       python3 tests/bench/bench_index.py --overlap [--rows 64,128] [--context 32768,131072]   each point's
rows as two halves on two streams at once, against the whole call and the halves in turn (overlap())
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_ctypes  # noqa: E402
from bench_prologue import copy_bandwidth, launch_floor_text, lib, time_flushed_ms, time_ms  # noqa: E402
from dsa_ctypes import IndexArgs, Options  # noqa: E402

CONFIGS = ["deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla"]
SCORE = 0  # --score: 0 auto (the runtime's choice), 1 few (mma.sync), 2 main (index_score), 3 group (index_score_group)


def time_us(fn, flush, reps=10, warmup=2, inner=5):
    """Median us of a call: back to back (time_ms), or each call alone after an L2 flush."""
    return 1e3 * (time_flushed_ms if flush else time_ms)(fn, reps=reps, warmup=warmup, inner=inner)


def random_pages(nblocks, BS, D, page):
    """Indexer cache pages of random keys: e4m3 values, power-of-two scales (what the prologue writes)."""
    vals = (torch.randn(nblocks, BS * D, device="cuda") * 16).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = torch.full((nblocks, BS), 2.0 ** -6, device="cuda").view(torch.uint8).view(nblocks, 4 * BS)
    cache = torch.cat([vals, scales], 1).contiguous()
    assert cache.shape[1] == page
    return cache


def index_args(q, w, pos, req, lens, table, cache, topk):
    """dsa_index_args_t over these tensors: rows q.shape[0], requests table.shape[0]."""
    a = IndexArgs()
    a.size = ctypes.sizeof(IndexArgs)
    a.num_tokens = q.shape[0]
    for f, t in (("q", q), ("weights", w), ("positions", pos), ("req_of_token", req), ("seq_lens", lens),
                 ("block_table", table), ("idx_cache", cache), ("topk", topk)):
        setattr(a, f, t.data_ptr())
    a.num_requests, a.max_blocks, a.num_cache_blocks = table.shape[0], table.shape[1], cache.shape[0]
    return a


def point(name, B, L):
    """The inputs of one point: B rows of L keys each, every row its own request; returns the shapes
    (H, D, K, BS), the context options, the tensors (kept alive with the arguments) and the arguments."""
    info = dsa_ctypes.config_info(lib, name)
    H, D, K, BS = info.idx_heads, info.idx_head_dim, info.idx_topk, info.block_size
    page = info.idx_page_bytes
    opts = Options(ctypes.sizeof(Options), None, 16384, 0, 1, None, None, None, None, 0, 256, max(B, 1))
    nb = L // BS
    nblocks = B * nb
    cache = random_pages(nblocks, BS, D, page)
    table = torch.randperm(nblocks, device="cuda", dtype=torch.int64).to(torch.int32).view(B, nb)
    q = torch.randn(B, H, D, device="cuda").bfloat16()
    w = torch.randn(B, H, device="cuda")
    pos = torch.full((B,), L - 1, device="cuda", dtype=torch.int64)
    req = torch.arange(B, device="cuda", dtype=torch.int32)
    lens = torch.full((B,), L, device="cuda", dtype=torch.int32)
    topk = torch.empty(B, K, device="cuda", dtype=torch.int32)
    a = index_args(q, w, pos, req, lens, table, cache, topk)
    return (H, D, K, BS), opts, dict(cache=cache, table=table, q=q, w=w, pos=pos, req=req, lens=lens, topk=topk), a


def context(name, opts, mode):
    """A context of the configuration with the top-k path `mode` (auto, one, split, capN: the split at
    most N CTAs a row, or nobins: auto without index_score's first-pass count) and SCORE forced."""
    ctx = ctypes.c_void_p()
    if lib.dsa_ctx_create(name.encode(), ctypes.byref(opts), ctypes.byref(ctx)) != 0:
        sys.exit(f"dsa_ctx_create: {lib.dsa_last_error(None).decode()}")
    lib.dsa_testing_force_index_score(ctx, SCORE)
    cap = int(mode[3:]) if mode.startswith("cap") else 0
    # capN forces the split (from 2 CTAs a row), so that it times the split at short rows too, where
    # the automatic choice takes one CTA a row
    lib.dsa_testing_force_index_topk(ctx, 2 if cap else {"auto": 0, "one": 1, "split": 2, "nobins": 0}[mode])
    if mode == "nobins" and lib.dsa_testing_index_score_bins(ctx, 0) != 0:
        sys.exit(f"dsa_testing_index_score_bins: {lib.dsa_last_error(ctx).decode()}")
    if lib.dsa_testing_index_topk_cap(ctx, cap) != 0:
        sys.exit(f"dsa_testing_index_topk_cap: {lib.dsa_last_error(ctx).decode()}")
    lib.dsa_testing_programmatic_launch(ctx, 0 if "--plain" in sys.argv else 1)
    return ctx


def call(ctx, a):
    if lib.dsa_index(ctx, ctypes.byref(a), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)) != 0:
        sys.exit(f"dsa_index: {lib.dsa_last_error(ctx).decode()}")


def calls(name, B, L):
    """--calls: a warm-up and three more calls of one point (the runtime's top-k choice), for a
    profiler to pick the fourth."""
    (_, _, _, BS), opts, t, a = point(name, B, L)
    ctx = context(name, opts, "auto")
    for _ in range(4):
        call(ctx, a)
    torch.cuda.synchronize()
    print(f"calls {name} {B} x {L}: top-k over {lib.dsa_index_topk_splits(ctx, B, L // BS)} CTAs a row")
    lib.dsa_ctx_destroy(ctx)


def run(name, B, L, copy_bw, peer, modes):
    (H, D, K, BS), opts, t, a = point(name, B, L)
    nb = L // BS
    cache, table, q, w, topk = t["cache"], t["table"], t["q"], t["w"], t["topk"]
    results, rows = {}, {}
    for mode in modes:
        ctx = context(name, opts, mode)

        def dsa():
            call(ctx, a)

        topk.fill_(-2)
        dsa()
        torch.cuda.synchronize()
        rows[mode] = topk.clone()
        results[mode] = (time_us(dsa, False), time_us(dsa, True), lib.dsa_index_topk_splits(ctx, B, nb))
        lib.dsa_ctx_destroy(ctx)
    same = all(torch.equal(rows[m], rows[modes[0]]) for m in modes)
    floor_us = B * L * dsa_ctypes.config_info(lib, name).idx_bytes_per_token / copy_bw * 1e6  # the plan's key bytes
    us_p = float("nan")
    if peer:
        rows = table.long()[:, :, None] * BS + torch.arange(BS, device="cuda")  # [B, nb, BS] slots
        rows = rows.view(B, L)
        blk, off = rows // BS, rows % BS  # each key's page and place in it, made outside the timing
        qf = q  # the peer takes the prepared query as given
        # the pages as views (rows of BS * (D + 4) bytes): a reshape of the key part to [N * BS, D]
        # cannot be one, and copied the whole cache every call (4% of the peer's time at 64 x 32K)
        keys = cache[:, :BS * D].view(-1, BS, D)
        scales = cache[:, BS * D:].view(torch.float32)  # [N, BS]

        # rows in pieces of at most 64 x 128K keys, as a user bounds its [rows, H, L] fp32 scores
        # (128 x 128K in one piece would hold ~13 GB of temporaries); one piece up to that
        piece = max(1, 64 * 131072 // L)

        def eager():
            out = []
            for r0 in range(0, B, piece):
                r1 = min(B, r0 + piece)
                v = keys[blk[r0:r1], off[r0:r1]].view(torch.float8_e4m3fn).bfloat16()  # [rows, L, D]
                sc = scales[blk[r0:r1], off[r0:r1]]                                    # [rows, L]
                s = torch.einsum("bhd,bld->bhl", qf[r0:r1], v).float().relu_()
                s = torch.einsum("bhl,bh->bl", s, w[r0:r1]) * sc
                out.append(torch.topk(s, min(K, L), dim=-1).indices)
            return out[0] if len(out) == 1 else torch.cat(out)

        us_p = time_us(eager, False, reps=3, warmup=1, inner=1)
    return results, same, floor_us, us_p


def line(tag, rows, contexts):
    """--line: the runtime's choice at every configuration x rows x context point, us back to back /
    L2 flushed, on one line (A/B runs of two trees in one device call, tests/bench/ab.sh)."""
    res = []
    for name in CONFIGS:
        short = name.split("_")[0]
        for B in rows:
            for L in contexts:
                results, _, _, _ = run(name, B, L, 1.0, False, ["auto"])
                us, us_f, _ = results["auto"]
                res.append(f"{short} {B}x{L // 1024}K: {us:.1f}/{us_f:.1f}")
                torch.cuda.empty_cache()
    print(f"{tag}: " + " | ".join(res), flush=True)


def overlap(rows, contexts):
    """--overlap: a call's rows as two halves, each its own call (and context, so its own
    workspaces) on its own stream, launched together, against the whole call and the two halves one
    after the other on one stream, back to back, the runtime's choices. The question under scoring
    a call's rows in groups (issue 14): whether one group's top-k, a chain of latencies, runs beside
    another group's scores, which fill the device, or waits for them. Checks that the halves' rows
    equal the whole call's."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    print("| configuration | rows | context | whole us | halves one after the other us | halves on two streams us | rows equal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in CONFIGS:
        for B in rows:
            for L in contexts:
                (H, D, K, BS), opts, t, a = point(name, B, L)
                h = B // 2
                whole, ca, cb = (context(name, opts, "auto") for _ in range(3))
                outs = [torch.empty(h, K, device="cuda", dtype=torch.int32),
                        torch.empty(B - h, K, device="cuda", dtype=torch.int32)]
                halves = [index_args(t["q"][lo:hi], t["w"][lo:hi], t["pos"][lo:hi], t["req"][lo:hi], t["lens"],
                                     t["table"], t["cache"], out) for (lo, hi), out in zip(((0, h), (h, B)), outs)]

                def seq():
                    call(ca, halves[0])
                    call(cb, halves[1])

                def par():
                    cur = torch.cuda.current_stream()
                    s1.wait_stream(cur)
                    s2.wait_stream(cur)
                    with torch.cuda.stream(s1):
                        call(ca, halves[0])
                    with torch.cuda.stream(s2):
                        call(cb, halves[1])
                    cur.wait_stream(s1)
                    cur.wait_stream(s2)

                call(whole, a)
                ref = t["topk"].clone()
                same = True
                for fn in (seq, par):
                    outs[0].fill_(-2), outs[1].fill_(-2)
                    fn()
                    torch.cuda.synchronize()
                    same = same and torch.equal(outs[0], ref[:h]) and torch.equal(outs[1], ref[h:])
                us = [time_us(f, False) for f in (lambda: call(whole, a), seq, par)]
                print(f"| {name} | {B} | {L} | {us[0]:.1f} | {us[1]:.1f} | {us[2]:.1f} | {'yes' if same else 'NO'} |",
                      flush=True)
                for c in (whole, ca, cb):
                    lib.dsa_ctx_destroy(c)
                torch.cuda.empty_cache()


def main():
    if "--calls" in sys.argv:
        i = sys.argv.index("--calls")
        return calls(sys.argv[i + 1], int(sys.argv[i + 2]), int(sys.argv[i + 3]))
    quick = "--quick" in sys.argv
    topk_arg = sys.argv[sys.argv.index("--topk") + 1] if "--topk" in sys.argv else "both"
    modes = ["auto", "split", "one"] if topk_arg == "both" else topk_arg.split(",")
    global SCORE
    SCORE = {"auto": 0, "few": 1, "main": 2, "group": 3}[sys.argv[sys.argv.index("--score") + 1] if "--score" in sys.argv else "auto"]

    def ints(flag, default):
        return tuple(int(x) for x in sys.argv[sys.argv.index(flag) + 1].split(",")) if flag in sys.argv else default
    if "--line" in sys.argv:
        return line(sys.argv[sys.argv.index("--line") + 1], ints("--rows", (1, 8, 64, 128)),
                    ints("--context", (32768, 131072)))
    if "--overlap" in sys.argv:
        return overlap(ints("--rows", (64, 128)), ints("--context", (32768, 131072)))
    rows = ints("--rows", (1, 64) if quick else (1, 64, 128))
    contexts = ints("--context", (8192, 32768) if quick else (8192, 32768, 131072))
    peer = "--no-peer" not in sys.argv
    bw = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}; copy bandwidth {bw / 1e12:.2f} TB/s (2 GiB copy); "
          + launch_floor_text())
    print("| configuration | indexer heads | rows | context | top-k (CTAs a row) | libdsa us | L2 flushed us | "
          "floor us | x floor | PyTorch peer us | speed-up | rows equal |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    # the first point once, untimed: measured first, it read 1.2 us slower than in a later run
    # (11.8 against 10.5-10.6 us at one row of 8K, logs/bench_index_full_8e2013c.log and
    # logs/index_line_8e2013c.log), the device not yet at its working clocks
    run(CONFIGS[0], rows[0], contexts[0], bw, False, modes)
    torch.cuda.empty_cache()
    for name in CONFIGS:
        H = dsa_ctypes.config_info(lib, name).idx_heads
        for B in rows:
            for L in contexts:
                results, same, fl, us_p = run(name, B, L, bw, peer, modes)
                for mode, (us, us_f, splits) in results.items():
                    print(f"| {name} | {H} | {B} | {L} | {mode} ({splits}) | {us:.1f} | {us_f:.1f} | {fl:.1f} | "
                          f"{us_f / fl:.2f} | {us_p:.0f} | {us_p / us:.1f}x | {'yes' if same else 'NO'} |", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
