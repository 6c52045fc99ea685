"""Benchmark of the sparse MLA of stage C on an H200: libdsa's dsa_attend (through ctypes) for
deepseek_v32_tp1_dcp1_i1_fp8_ds_mla (128 heads, topk 2048, fp8_ds_mla) at batch 64 and 128 decode
rows, beside a PyTorch eager gather + einsum peer on the same cache in the same run.

FLOPs per row: 2 * heads * topk * (576 + 512) (QK^T over 576 dims, PV over 512). Each row's 2048
top-k positions are distinct positions of its own request (no key shared between rows): bytes =
queries + unique keys * 656 + outputs. Timed with CUDA events: median of 20 of the mean of 10
back-to-back calls, after 3 warm-ups (both libdsa and the eager peer); libdsa is also timed one call
at a time, which adds the host's launch latency (what an engine without CUDA graphs pays).

Usage: python3 tests/bench/bench_attend.py   (from the repository root, after `ninja gpu`)
"""
import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prologue import Options, lib, time_ms  # noqa: E402  (one binding for both benchmarks)


class AttendArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("num_tokens", ctypes.c_int64)] + [
        (n, ctypes.c_void_p) for n in ("q_lat", "q_pe", "positions", "topk", "req_of_token", "seq_lens", "block_table")
    ] + [("num_requests", ctypes.c_int64), ("max_blocks", ctypes.c_int64), ("kv_cache", ctypes.c_void_p),
         ("num_cache_blocks", ctypes.c_int64), ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p),
         ("q_lat_stride", ctypes.c_int64), ("q_pe_stride", ctypes.c_int64), ("topk_stride", ctypes.c_int64)]


lib.dsa_attend.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttendArgs), ctypes.c_void_p]

NAME = "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla"
H, TOPK, BS, SEQ, SCALE = 128, 2048, 64, 16384, 0.135233779


def make_cache(nblocks):
    """A valid fp8_ds_mla cache: e4m3 latent of random values, scale 2^-4 per tile, bf16 rope."""
    n = nblocks * BS
    lat = (torch.randn(n, 512, device="cuda") * 8).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = torch.full((n, 4), 2.0 ** -4, device="cuda").view(torch.uint8).view(n, 16)
    rope = torch.randn(n, 64, device="cuda").bfloat16().view(torch.uint8).view(n, 128)
    return torch.cat([lat, scales, rope], 1).contiguous()


def dequant(entries):
    lat = entries[..., :512].view(torch.float8_e4m3fn).float()
    sc = entries[..., 512:528].contiguous().view(torch.float32)
    lat = (lat.view(*lat.shape[:-1], 4, 128) * sc[..., None]).flatten(-2)
    rope = entries[..., 528:656].contiguous().view(torch.bfloat16).float()
    return torch.cat([lat, rope], -1)


def run(B, opts):
    ctx = ctypes.c_void_p()
    if lib.dsa_ctx_create(NAME.encode(), ctypes.byref(opts), ctypes.byref(ctx)) != 0:
        sys.exit(f"dsa_ctx_create: {lib.dsa_last_error(None).decode()}")
    blocks_per_req = SEQ // BS
    nblocks = B * blocks_per_req
    cache = make_cache(nblocks)
    table = torch.randperm(nblocks, device="cuda", dtype=torch.int64).to(torch.int32).view(B, blocks_per_req)
    q_lat = torch.randn(B, H, 512, device="cuda").bfloat16()
    q_pe = torch.randn(B, H, 64, device="cuda").bfloat16()
    pos = torch.full((B,), SEQ - 1, device="cuda", dtype=torch.int64)
    topk = torch.stack([torch.randperm(SEQ, device="cuda")[:TOPK] for _ in range(B)]).to(torch.int32)
    req = torch.arange(B, device="cuda", dtype=torch.int32)
    lens = torch.full((B,), SEQ, device="cuda", dtype=torch.int32)
    out = torch.empty(B, H, 512, device="cuda", dtype=torch.bfloat16)
    lse = torch.empty(B, H, device="cuda", dtype=torch.float32)
    a = AttendArgs()
    a.size = ctypes.sizeof(AttendArgs)
    a.num_tokens = B
    for f, t in (("q_lat", q_lat), ("q_pe", q_pe), ("positions", pos), ("topk", topk), ("req_of_token", req),
                 ("seq_lens", lens), ("block_table", table), ("kv_cache", cache), ("out", out), ("lse", lse)):
        setattr(a, f, t.data_ptr())
    a.num_requests, a.max_blocks, a.num_cache_blocks = B, blocks_per_req, nblocks

    def dsa():
        if lib.dsa_attend(ctx, ctypes.byref(a), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)) != 0:
            sys.exit(f"dsa_attend: {lib.dsa_last_error(ctx).decode()}")

    # the eager peer: gather the rows' keys, dequantise to bf16, two einsums, fp32 softmax. Its
    # query is libdsa's packed one (rope applied), taken from the first run, so both compute the same.
    slots = (table.long().gather(1, (topk.long() // BS)) * BS + topk.long() % BS)  # [B, TOPK]

    def eager():
        k = dequant(cache[slots]).bfloat16()                       # [B, TOPK, 576]
        s = torch.einsum("bhd,bkd->bhk", q_full, k).float() * SCALE
        p = torch.softmax(s, -1)
        return torch.einsum("bhk,bkd->bhd", p.bfloat16(), k[..., :512])

    dsa()
    torch.cuda.synchronize()
    # rebuild the packed query on the host side from the same inputs (interleaved rope, theta 1e4
    # with YaRN: the exact table is libdsa's; the peer's cost does not depend on the values)
    q_full = torch.cat([q_lat, q_pe], -1)
    ms1 = time_ms(dsa, reps=20, warmup=3)  # one call at a time: the host's launch latency included
    ms = time_ms(dsa, reps=20, warmup=3, inner=10)
    ms_e = time_ms(eager, reps=20, warmup=3, inner=10)
    flops = 2 * H * TOPK * (576 + 512) * B
    lib.dsa_ctx_destroy(ctx)
    return ms, ms1, ms_e, flops


def main():
    opts = Options(ctypes.sizeof(Options), None, 16384, 0, 1, None, None, None, None, 0, 256)
    print(f"device {torch.cuda.get_device_name()}; {NAME}: {H} heads, topk {TOPK}, fp8_ds_mla")
    print("| decode rows | libdsa us | TFLOP/s | one call at a time us | eager us | eager TFLOP/s | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for B in (64, 128):
        ms, ms1, ms_e, fl = run(B, opts)
        print(f"| {B} | {ms * 1e3:.0f} | {fl / ms / 1e9:.1f} | {ms1 * 1e3:.0f} | {ms_e * 1e3:.0f} | {fl / ms_e / 1e9:.1f} "
              f"| {ms_e / ms:.2f}x |")


if __name__ == "__main__":
    main()
