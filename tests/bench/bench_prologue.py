"""Benchmark of stage A (the prologue) on an H200: libdsa (through ctypes, the thin Python
binding a host engine would use) beside a PyTorch eager implementation of the same stage, timed in
the same run with CUDA events, against the measured device copy bandwidth.

Bytes per token count each input read once and each output written once (docs/benchmarks.md): q_c, kv,
indexer k, position, slot and the rope cos/sin row read; q_c_out, the top-k row (-1), the MLA
cache entry and the indexer entry written; weights are read once per launch and not counted.
Every slot is owned here (the most bytes). Each configuration's shapes, formats and byte sizes
come from libdsa (dsa_config_info, through tests/bench/dsa_ctypes.py).

Usage: python3 tests/bench/bench_prologue.py   (from the repository root, after `ninja gpu`)
"""
import ctypes
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_ctypes  # noqa: E402  (the binding both benchmarks share)
from dsa_ctypes import Options, PrologueArgs  # noqa: E402

lib = dsa_ctypes.load()

# the configurations benchmarked
CONFIGS = ["glm5.2_tp4_dcp4_i1_fp8_ds_mla", "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "glm5.2_tp1_dcp1_i1_bf16",
           "deepseek_v32_tp8_dcp8_i1_fp8_ds_mla"]


def geometry(name):
    """What the benchmark needs of configuration name, all from libdsa: dsa_config_info, and for the
    rope's theta and the indexer key's rope (which it does not report yet) the configuration's
    config.h as libdsa embeds it. The eager peer uses plain rope at theta: DeepSeek's YaRN table
    comes from libdsa's runtime, and the peer's table has the same size either way (cost, not value)."""
    info = dsa_ctypes.config_info(lib, name)
    h = dsa_ctypes.config_h(lib, name)
    fmt = {dsa_ctypes.CACHE_BF16: "bf16", dsa_ctypes.CACHE_FP8_DS_MLA: "fp8",
           dsa_ctypes.CACHE_NVFP4_DS_MLA: "nvfp4"}[info.cache_dtype]
    return dict(q=info.q_lora_rank, eps=info.rms_norm_eps, bs=info.block_size, topk=info.idx_topk, fmt=fmt,
                bpt=info.cache_bytes_per_token, rope_il=bool(info.rope_interleaved), maxpos=info.max_positions,
                L=info.kv_lora_rank, R=info.qk_rope_dim, kvd=info.kv_dim, D=info.idx_head_dim,
                idx_bpt=info.idx_bytes_per_token, idx_page=info.idx_page_bytes, dcp=info.dcp,
                theta=dsa_ctypes.config_define(h, "DSA_ROPE_THETA"),
                idx_il=bool(dsa_ctypes.config_define(h, "DSA_IDX_ROPE_INTERLEAVED")),
                idx_rope_first=bool(dsa_ctypes.config_define(h, "DSA_IDX_ROPE_FIRST")),
                hadamard=bool(dsa_ctypes.config_define(h, "DSA_IDX_HADAMARD")),
                idx_eps=dsa_ctypes.config_define(h, "DSA_IDX_NORM_EPS"))


def bytes_per_token(g):
    read = 2 * g["q"] + 2 * g["kvd"] + 2 * g["D"] + 8 + 8 + 2 * (g["R"] // 2) * 4
    write = 2 * g["q"] + 4 * g["topk"] + g["bpt"] + g["idx_bpt"]
    return read + write


# GPU cycles a timed sample waits for before its first event: ~1 ms at the H100's and H200's
# clocks, longer than the host takes to queue a sample's calls (about 9 us a dsa_attend call)
_HOLD_CYCLES = 2_000_000


def time_ms(fn, reps=30, warmup=5, inner=1):
    """Median over reps of the mean time of `inner` back-to-back calls between two events. The GPU is
    held busy (torch.cuda._sleep) while the host queues the sample's first event and calls, so that
    it never waits for the host inside the sample: without the hold, a sample began with the GPU
    idle until the first call was queued, which at one row added 1-7 us (flushed times came out
    faster than back-to-back ones)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(_HOLD_CYCLES)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    return statistics.median(times)


_FLUSH = []  # a 256 MiB buffer (268 MB: 5x the H200's 50 MB L2), made at the first flushed timing


def time_flushed_ms(fn, reps=20, warmup=3, inner=1):
    """Median over reps of the mean time of `inner` calls, each timed alone between two events right
    after the L2 is flushed (the flush buffer rewritten): the cold-cache time of a call."""
    if not _FLUSH:
        _FLUSH.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = 0.0
        for _ in range(inner):
            _FLUSH[0].fill_(1)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            t += a.elapsed_time(b)
        times.append(t / inner)
    return statistics.median(times)


def launch_floor_us():
    """(back to back, L2 flushed) us of one launch that does nothing worth timing (a one-element add),
    timed as time_ms and time_flushed_ms time a call: what a one-kernel call cannot go below in these
    harnesses (the launch, and the events' own gap), for the one-row targets."""
    x = torch.zeros(1, dtype=torch.float32, device="cuda")
    run = lambda: x.add_(1.0)  # noqa: E731
    return time_ms(run, reps=20, warmup=3, inner=10) * 1e3, time_flushed_ms(run) * 1e3


def launch_floor_text():
    """launch_floor_us() for a benchmark's header."""
    floor, floor_f = launch_floor_us()
    return (f"launch floor (one one-element kernel, timed as a call is) {floor:.1f} us back to back, "
            f"{floor_f:.1f} us L2 flushed")


def copy_bandwidth():
    n = 1 << 31  # 2 GiB, far beyond L2
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), reps=20)
    return 2 * n / (ms * 1e-3)


def rope_plain(theta, maxpos, dim):
    # The benchmarked GLM configurations use plain rope; DeepSeek's YaRN table comes from the
    # runtime in libdsa, and the eager peer uses the same-size table either way (cost, not value).
    inv = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64, device="cuda") / dim)
    ang = torch.arange(maxpos, dtype=torch.float64, device="cuda")[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def hadamard_matrix(n):
    h = torch.ones(1, 1, dtype=torch.float32)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).cuda()


def rotate(x, c, s, interleaved):
    """Rope of x [n, dim] by cos/sin [n, dim / 2]: interleaved pairs (2i, 2i+1) or NeoX halves."""
    if interleaved:
        a, b = x[:, 0::2], x[:, 1::2]
        return torch.stack([a * c - b * s, a * s + b * c], -1).flatten(1)
    a, b = x[:, : x.shape[1] // 2], x[:, x.shape[1] // 2:]
    return torch.cat([a * c - b * s, a * s + b * c], 1)


def encode_entries(fmt, L, lat, kpe):
    """MLA cache entries [n, bytes per token] of n tokens' normalised latent [n, L] and rotated rope
    part [n, R] (fp32) in format fmt (bf16, fp8 or nvfp4), laid out as docs/layouts.md says."""
    n = lat.shape[0]
    if fmt == "bf16":
        return torch.cat([lat.bfloat16().view(torch.uint8), kpe.bfloat16().view(torch.uint8)], 1)
    if fmt == "fp8":
        tiles = lat.view(n, L // 128, 128)  # one fp32 scale per 128 values
        scale = (tiles.abs().amax(-1) / 448).clamp(min=torch.finfo(torch.float32).tiny)
        q8 = (tiles / scale[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(n, L)
        return torch.cat([q8, scale.view(torch.uint8).view(n, 4 * (L // 128)), kpe.bfloat16().view(torch.uint8)], 1)
    blocks = lat.view(n, L // 16, 16)  # one e4m3 scale per 16 values
    want = (blocks.abs().amax(-1) / 6).clamp(min=2 ** -9)
    sc8 = want.to(torch.float8_e4m3fn)
    sc = sc8.float()
    v = (blocks / sc[..., None]).abs()
    code = ((v > 0.25).int() + (v >= 0.75).int() + (v > 1.25).int() + (v >= 1.75).int() + (v > 2.5).int() +
            (v >= 3.5).int() + (v > 5).int()) | ((blocks < 0).int() << 3)
    code = code.view(n, L // 2, 2)
    packed = (code[..., 0] | (code[..., 1] << 4)).to(torch.uint8)
    # block s's scale at byte (L / 64) * (s % 4) + s // 4 of the scale area
    scales = sc8.view(torch.uint8).view(n, L // 64, 4).transpose(1, 2).reshape(n, L // 16)
    return torch.cat([packed, kpe.to(torch.float8_e4m3fn).view(torch.uint8), scales], 1)


def eager_prologue(g, t, cos, sin, H):
    """The same stage in PyTorch eager ops: what an engine would write without a fused kernel."""
    L, R, D = g["L"], g["R"], g["D"]
    q = t["q_c"].float()
    t["q_out"].copy_((q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + g["eps"]) * t["qw"].float()).bfloat16())
    t["topk"].fill_(-1)
    mask = t["slot"] >= 0
    slot = t["slot"][mask]
    pos = t["pos"][mask]
    kv = t["kv"][mask].float()
    lat = kv[:, :L]
    lat = lat * torch.rsqrt(lat.pow(2).mean(-1, keepdim=True) + g["eps"]) * t["kvw"].float()
    c, s = cos[pos], sin[pos]
    kpe = rotate(kv[:, L:], c, s, g["rope_il"])
    entry = encode_entries(g["fmt"], L, lat, kpe)
    t["cache"].view(-1, g["bpt"])[slot] = entry
    k = t["idx_k"][mask].float()
    k = torch.nn.functional.layer_norm(k, (D,), t["iw"].float(), t["ib"].float(), g["idx_eps"])
    if g["idx_rope_first"]:  # the key's rope dims first, or last
        k = torch.cat([rotate(k[:, :R], c, s, g["idx_il"]), k[:, R:]], 1)
    else:
        k = torch.cat([k[:, :D - R], rotate(k[:, D - R:], c, s, g["idx_il"])], 1)
    if g["hadamard"]:
        k = k @ H
    amax = k.abs().amax(-1).clamp(min=1e-4) / 448
    scale = torch.exp2(torch.ceil(torch.log2(amax)))
    k8 = (k / scale[:, None]).to(torch.float8_e4m3fn).view(torch.uint8)
    page, off = slot // g["bs"], slot % g["bs"]
    pages = t["icache"].view(-1, g["idx_page"])
    vals = pages[:, : g["bs"] * D].reshape(-1, g["bs"], D)
    vals[page, off] = k8
    pages[:, g["bs"] * D:].view(torch.float32).view(-1, g["bs"])[page, off] = scale


def bench(name, g, T, copy_bw):
    # the prologue talks to no other rank: rank 0 of an in-process group stands in for the DCP group
    dcp = g["dcp"]
    group = ctypes.c_void_p()
    if dcp > 1 and lib.dsa_inproc_group_create(dcp, ctypes.byref(group)) != 0:
        sys.exit(f"dsa_inproc_group_create: {lib.dsa_last_error(None).decode()}")
    opts = Options(ctypes.sizeof(Options), None, 1 << 20, 0, 1, None, None, None, group, 0, 64)
    ctx = ctypes.c_void_p()
    rc = lib.dsa_ctx_create(name.encode(), ctypes.byref(opts), ctypes.byref(ctx))
    if rc != 0:
        sys.exit(f"dsa_ctx_create({name}): {lib.dsa_last_error(None).decode()}")
    dev = "cuda"
    blocks = (T + g["bs"] - 1) // g["bs"] + 1
    t = dict(
        q_c=torch.randn(T, g["q"], device=dev).bfloat16(),
        q_out=torch.empty(T, g["q"], device=dev, dtype=torch.bfloat16),
        kv=torch.randn(T, g["kvd"], device=dev).bfloat16(),
        idx_k=torch.randn(T, g["D"], device=dev).bfloat16(),
        pos=torch.randint(0, g["maxpos"], (T,), device=dev),
        slot=torch.randperm(blocks * g["bs"], device=dev)[:T],
        qw=(torch.rand(g["q"], device=dev) + 0.5).bfloat16(),
        kvw=(torch.rand(g["L"], device=dev) + 0.5).bfloat16(),
        iw=(torch.rand(g["D"], device=dev) + 0.5).bfloat16(),
        ib=(torch.rand(g["D"], device=dev) - 0.5).bfloat16(),
        cache=torch.zeros(blocks * g["bs"] * g["bpt"], device=dev, dtype=torch.uint8),
        icache=torch.zeros(blocks * g["idx_page"], device=dev, dtype=torch.uint8),
        topk=torch.empty(T, g["topk"], device=dev, dtype=torch.int32),
    )
    a = PrologueArgs()
    a.size = ctypes.sizeof(PrologueArgs)
    a.num_tokens = T
    for f, k in (("q_c", "q_c"), ("q_c_out", "q_out"), ("kv", "kv"), ("idx_k", "idx_k"), ("positions", "pos"),
                 ("slot_mapping", "slot"), ("q_norm_w", "qw"), ("kv_norm_w", "kvw"), ("idx_norm_w", "iw"),
                 ("idx_norm_b", "ib"), ("kv_cache", "cache"), ("idx_cache", "icache"), ("topk", "topk")):
        setattr(a, f, t[k].data_ptr())
    a.num_cache_blocks = blocks
    a.clear_topk = 1

    def run_dsa():
        rc = lib.dsa_prologue(ctx, ctypes.byref(a), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            sys.exit(f"dsa_prologue: {lib.dsa_last_error(ctx).decode()}")

    cos, sin = rope_plain(g["theta"], g["maxpos"], g["R"])
    H = hadamard_matrix(g["D"])
    ms = time_ms(run_dsa)
    q_dsa = t["q_out"].clone()
    ms_eager = time_ms(lambda: eager_prologue(g, t, cos, sin, H), reps=10, warmup=2)
    # cross-check: the query norm of the two implementations agrees to bf16 rounding
    diff = (q_dsa.float() - t["q_out"].float()).abs().max().item()
    lib.dsa_ctx_destroy(ctx)
    lib.dsa_inproc_group_destroy(group)
    bw = bytes_per_token(g) * T / (ms * 1e-3)
    return ms, ms_eager, bw, diff


def main():
    torch.manual_seed(0)
    copy_bw = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {copy_bw / 1e12:.2f} TB/s (read + write)")
    print("| configuration | T | bytes/token | libdsa us | GB/s | % of copy | eager us | speed-up | q_c_out max diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in CONFIGS:
        g = geometry(name)
        for T in (16384, 65536):
            ms, ms_e, bw, diff = bench(name, g, T, copy_bw)
            print(f"| {name} | {T} | {bytes_per_token(g)} | {ms * 1e3:.1f} | {bw / 1e9:.0f} | "
                  f"{100 * bw / copy_bw:.1f}% | {ms_e * 1e3:.1f} | {ms_e / ms:.1f}x | {diff:.3g} |")


if __name__ == "__main__":
    main()
