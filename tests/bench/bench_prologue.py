"""Benchmark of stage A (the prologue) on an H200: libdsa (through ctypes, the thin Python
binding a host engine would use) beside a PyTorch eager implementation of the same stage, timed in
the same run with CUDA events, against the measured device copy bandwidth.

Bytes per token count each input read once and each output written once (docs/benchmarks.md):
q_c, kv, indexer k, position, slot and the rope cos/sin row read; q_c_out, the top-k row (-1), the
MLA cache entry and the indexer entry written; weights are read once per launch and not counted.
Every slot is owned here (the most bytes).

Usage: python3 tests/bench/bench_prologue.py   (from the repository root, after `ninja gpu`)
"""
import ctypes
import math
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
lib = ctypes.CDLL(os.path.join(ROOT, "build", "libdsa.so"))


class Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("cache_dir", ctypes.c_char_p), ("max_tokens", ctypes.c_int64),
                ("device", ctypes.c_int), ("log_level", ctypes.c_int), ("target", ctypes.c_char_p),
                ("nccl_comm", ctypes.c_void_p), ("nccl_id", ctypes.c_void_p), ("inproc_group", ctypes.c_void_p),
                ("dcp_rank", ctypes.c_int), ("attend_tokens", ctypes.c_int64)]


class PrologueArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("num_tokens", ctypes.c_int64)] + [
        (n, ctypes.c_void_p) for n in ("q_c", "q_c_out", "kv", "idx_k", "positions", "slot_mapping", "q_norm_w",
                                       "kv_norm_w", "idx_norm_w", "idx_norm_b", "kv_cache", "idx_cache")
    ] + [("num_cache_blocks", ctypes.c_int64), ("topk", ctypes.c_void_p), ("clear_topk", ctypes.c_int),
         ("q_c_stride", ctypes.c_int64), ("kv_stride", ctypes.c_int64), ("idx_k_stride", ctypes.c_int64)]


lib.dsa_ctx_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
lib.dsa_prologue.argtypes = [ctypes.c_void_p, ctypes.POINTER(PrologueArgs), ctypes.c_void_p]
lib.dsa_last_error.argtypes = [ctypes.c_void_p]
lib.dsa_last_error.restype = ctypes.c_char_p
lib.dsa_ctx_destroy.argtypes = [ctypes.c_void_p]
lib.dsa_inproc_group_create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.dsa_inproc_group_destroy.argtypes = [ctypes.c_void_p]

# geometry of the configurations benchmarked (values from their config.h)
GEOS = {
    "glm5.2_tp4_dcp4_i1_fp8_ds_mla": dict(q=2048, eps=1e-5, bs=64, topk=2048, fmt="fp8", bpt=656, rope_il=True,
                                          idx_il=True, theta=8e6, maxpos=202752),
    "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla": dict(q=2048, eps=1e-5, bs=64, topk=2048, fmt="nvfp4", bpt=352,
                                            rope_il=True, idx_il=True, theta=8e6, maxpos=202752),
    "glm5.2_tp1_dcp1_i1_bf16": dict(q=2048, eps=1e-5, bs=64, topk=2048, fmt="bf16", bpt=1152, rope_il=True,
                                    idx_il=True, theta=8e6, maxpos=202752),
    "deepseek_v32_tp8_dcp8_i1_fp8_ds_mla": dict(q=1536, eps=1e-6, bs=64, topk=2048, fmt="fp8", bpt=656,
                                                rope_il=True, idx_il=False, theta=1e4, maxpos=163840),
}


def bytes_per_token(g):
    read = 2 * g["q"] + 2 * 576 + 2 * 128 + 8 + 8 + 2 * 32 * 4
    write = 2 * g["q"] + 4 * g["topk"] + g["bpt"] + 132
    return read + write


def time_ms(fn, reps=30, warmup=5, inner=1):
    """Median over reps of the mean time of `inner` back-to-back calls between two events (inner > 1
    keeps the host's launch latency out of a call's time: the calls queue while the GPU runs)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    return statistics.median(times)


def copy_bandwidth():
    n = 1 << 31  # 2 GiB, far beyond L2
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), reps=20)
    return 2 * n / (ms * 1e-3)


def rope_plain(theta, maxpos):
    # The benchmarked GLM configurations use plain rope; DeepSeek's YaRN table comes from the
    # runtime in libdsa, and the eager peer uses the same-size table either way (cost, not value).
    inv = theta ** (-torch.arange(0, 64, 2, dtype=torch.float64, device="cuda") / 64)
    ang = torch.arange(maxpos, dtype=torch.float64, device="cuda")[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def hadamard_matrix(n):
    h = torch.ones(1, 1, dtype=torch.float32)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).cuda()


def eager_prologue(g, t, cos, sin, H):
    """The same stage in PyTorch eager ops: what an engine would write without a fused kernel."""
    q = t["q_c"].float()
    t["q_out"].copy_((q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + g["eps"]) * t["qw"].float()).bfloat16())
    t["topk"].fill_(-1)
    mask = t["slot"] >= 0
    slot = t["slot"][mask]
    pos = t["pos"][mask]
    kv = t["kv"][mask].float()
    lat = kv[:, :512]
    lat = lat * torch.rsqrt(lat.pow(2).mean(-1, keepdim=True) + g["eps"]) * t["kvw"].float()
    c, s = cos[pos], sin[pos]
    kpe = kv[:, 512:]
    x0, x1 = kpe[:, 0::2], kpe[:, 1::2]
    kpe = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(1)
    n = lat.shape[0]
    if g["fmt"] == "bf16":
        entry = torch.cat([lat.bfloat16().view(torch.uint8), kpe.bfloat16().view(torch.uint8)], 1)
    elif g["fmt"] == "fp8":
        tiles = lat.view(n, 4, 128)
        scale = (tiles.abs().amax(-1) / 448).clamp(min=torch.finfo(torch.float32).tiny)
        q8 = (tiles / scale[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(n, 512)
        entry = torch.cat([q8, scale.view(torch.uint8).view(n, 16), kpe.bfloat16().view(torch.uint8)], 1)
    else:
        blocks = lat.view(n, 32, 16)
        want = (blocks.abs().amax(-1) / 6).clamp(min=2 ** -9)
        sc8 = want.to(torch.float8_e4m3fn)
        sc = sc8.float()
        v = (blocks / sc[..., None]).abs()
        code = ((v > 0.25).int() + (v >= 0.75).int() + (v > 1.25).int() + (v >= 1.75).int() + (v > 2.5).int() +
                (v >= 3.5).int() + (v > 5).int()) | ((blocks < 0).int() << 3)
        code = code.view(n, 256, 2)
        packed = (code[..., 0] | (code[..., 1] << 4)).to(torch.uint8)
        scales = sc8.view(torch.uint8).view(n, 8, 4).transpose(1, 2).reshape(n, 32)
        entry = torch.cat([packed, kpe.to(torch.float8_e4m3fn).view(torch.uint8), scales], 1)
    t["cache"].view(-1, g["bpt"])[slot] = entry
    k = t["idx_k"][mask].float()
    k = torch.nn.functional.layer_norm(k, (128,), t["iw"].float(), t["ib"].float(), 1e-6)
    r = k[:, :64]
    if g["idx_il"]:
        a, b = r[:, 0::2], r[:, 1::2]
        r = torch.stack([a * c - b * s, a * s + b * c], -1).flatten(1)
    else:
        a, b = r[:, :32], r[:, 32:]
        r = torch.cat([a * c - b * s, a * s + b * c], 1)
    k = torch.cat([r, k[:, 64:]], 1) @ H
    amax = k.abs().amax(-1).clamp(min=1e-4) / 448
    scale = torch.exp2(torch.ceil(torch.log2(amax)))
    k8 = (k / scale[:, None]).to(torch.float8_e4m3fn).view(torch.uint8)
    page, off = slot // g["bs"], slot % g["bs"]
    pages = t["icache"].view(-1, g["bs"] * 132)
    vals = pages[:, : g["bs"] * 128].reshape(-1, g["bs"], 128)
    vals[page, off] = k8
    pages[:, g["bs"] * 128:].view(torch.float32).view(-1, g["bs"])[page, off] = scale


def bench(name, g, T, copy_bw):
    # the prologue talks to no other rank: rank 0 of an in-process group stands in for the DCP group
    dcp = int(name.split("_dcp")[1].split("_")[0])
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
        kv=torch.randn(T, 576, device=dev).bfloat16(),
        idx_k=torch.randn(T, 128, device=dev).bfloat16(),
        pos=torch.randint(0, g["maxpos"], (T,), device=dev),
        slot=torch.randperm(blocks * g["bs"], device=dev)[:T],
        qw=(torch.rand(g["q"], device=dev) + 0.5).bfloat16(),
        kvw=(torch.rand(512, device=dev) + 0.5).bfloat16(),
        iw=(torch.rand(128, device=dev) + 0.5).bfloat16(),
        ib=(torch.rand(128, device=dev) - 0.5).bfloat16(),
        cache=torch.zeros(blocks * g["bs"] * g["bpt"], device=dev, dtype=torch.uint8),
        icache=torch.zeros(blocks * g["bs"] * 132, device=dev, dtype=torch.uint8),
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

    cos, sin = rope_plain(g["theta"], g["maxpos"])
    H = hadamard_matrix(128)
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
    for name, g in GEOS.items():
        for T in (16384, 65536):
            ms, ms_e, bw, diff = bench(name, g, T, copy_bw)
            print(f"| {name} | {T} | {bytes_per_token(g)} | {ms * 1e3:.1f} | {bw / 1e9:.0f} | "
                  f"{100 * bw / copy_bw:.1f}% | {ms_e * 1e3:.1f} | {ms_e / ms:.1f}x | {diff:.3g} |")


if __name__ == "__main__":
    main()
