"""Benchmark of the sparse MLA of stage C on an H200: libdsa's dsa_attend (through ctypes) for
deepseek_v32_tp1_dcp1_i1_fp8_ds_mla (DeepSeek-V3.2's 128 heads on one GPU, top-k 2048, fp8_ds_mla)
at batch 64 and 128 decode rows, beside a PyTorch eager gather + einsum peer on the same cache in the
same run. Heads, top-k, block size, dimensions, softmax scale and the cache layout come from libdsa
(dsa_config_info, through tests/bench/dsa_ctypes.py).

FLOPs per row: 2 * heads * topk * (kv_dim + kv_lora_rank) (QK^T over the 576 packed dims, PV over the
512 latent ones). Each row's top-k positions are distinct positions of its own request (no key
shared between rows): bytes = queries + unique keys * cache bytes per token (656) + outputs. Timed
with CUDA events: median of 20 of the mean of 10 back-to-back calls, after 3 warm-ups (both libdsa
and the eager peer); libdsa is also timed one call at a time, which adds the host's launch latency
(what an engine without CUDA graphs pays).

Usage: python3 tests/bench/bench_attend.py   (from the repository root, after `ninja gpu`)
"""
import ctypes
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_ctypes  # noqa: E402  (the binding both benchmarks share)
from bench_prologue import lib, time_ms  # noqa: E402
from dsa_ctypes import AttendArgs, Options  # noqa: E402

NAME = "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla"
SEQ = 16384  # tokens of each request
INFO = dsa_ctypes.config_info(lib, NAME)
if INFO.cache_dtype != dsa_ctypes.CACHE_FP8_DS_MLA or INFO.dcp != 1:
    sys.exit(f"bench_attend: {NAME} is {INFO.cache_dtype_name.decode()} at dcp {INFO.dcp}; "
             "this benchmark builds an fp8_ds_mla cache for one rank")
H, TOPK, BS, SCALE = INFO.heads_local, INFO.idx_topk, INFO.block_size, INFO.softmax_scale
L, R, KVD = INFO.kv_lora_rank, INFO.qk_rope_dim, INFO.kv_dim
TILES = L // 128  # fp8_ds_mla: one fp32 scale per 128 latent values
SC, RO = INFO.cache_scale_offset, INFO.cache_rope_offset  # byte offsets of the scales and the rope


def make_cache(nblocks):
    """A valid fp8_ds_mla cache: e4m3 latent of random values, scale 2^-4 per tile, bf16 rope."""
    n = nblocks * BS
    lat = (torch.randn(n, L, device="cuda") * 8).to(torch.float8_e4m3fn).view(torch.uint8)
    scales = torch.full((n, TILES), 2.0 ** -4, device="cuda").view(torch.uint8).view(n, 4 * TILES)
    rope = torch.randn(n, R, device="cuda").bfloat16().view(torch.uint8).view(n, 2 * R)
    cache = torch.cat([lat, scales, rope], 1).contiguous()
    assert cache.shape[1] == INFO.cache_bytes_per_token
    return cache


def dequant(entries):
    lat = entries[..., :L].view(torch.float8_e4m3fn).float()
    sc = entries[..., SC:SC + 4 * TILES].contiguous().view(torch.float32)
    lat = (lat.view(*lat.shape[:-1], TILES, 128) * sc[..., None]).flatten(-2)
    rope = entries[..., RO:RO + 2 * R].contiguous().view(torch.bfloat16).float()
    return torch.cat([lat, rope], -1)


def run(B, opts):
    ctx = ctypes.c_void_p()
    if lib.dsa_ctx_create(NAME.encode(), ctypes.byref(opts), ctypes.byref(ctx)) != 0:
        sys.exit(f"dsa_ctx_create: {lib.dsa_last_error(None).decode()}")
    blocks_per_req = SEQ // BS
    nblocks = B * blocks_per_req
    cache = make_cache(nblocks)
    table = torch.randperm(nblocks, device="cuda", dtype=torch.int64).to(torch.int32).view(B, blocks_per_req)
    q_lat = torch.randn(B, H, L, device="cuda").bfloat16()
    q_pe = torch.randn(B, H, R, device="cuda").bfloat16()
    pos = torch.full((B,), SEQ - 1, device="cuda", dtype=torch.int64)
    topk = torch.stack([torch.randperm(SEQ, device="cuda")[:TOPK] for _ in range(B)]).to(torch.int32)
    req = torch.arange(B, device="cuda", dtype=torch.int32)
    lens = torch.full((B,), SEQ, device="cuda", dtype=torch.int32)
    out = torch.empty(B, H, L, device="cuda", dtype=torch.bfloat16)
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
        k = dequant(cache[slots]).bfloat16()                       # [B, TOPK, KVD]
        s = torch.einsum("bhd,bkd->bhk", q_full, k).float() * SCALE
        p = torch.softmax(s, -1)
        return torch.einsum("bhk,bkd->bhd", p.bfloat16(), k[..., :L])

    dsa()
    torch.cuda.synchronize()
    # rebuild the packed query on the host side from the same inputs (interleaved rope, theta 1e4
    # with YaRN: the exact table is libdsa's; the peer's cost does not depend on the values)
    q_full = torch.cat([q_lat, q_pe], -1)
    ms1 = time_ms(dsa, reps=20, warmup=3)  # one call at a time: the host's launch latency included
    ms = time_ms(dsa, reps=20, warmup=3, inner=10)
    ms_e = time_ms(eager, reps=20, warmup=3, inner=10)
    flops = 2 * H * TOPK * (KVD + L) * B
    lib.dsa_ctx_destroy(ctx)
    return ms, ms1, ms_e, flops


def main():
    opts = Options(ctypes.sizeof(Options), None, 16384, 0, 1, None, None, None, None, 0, 256)
    print(f"device {torch.cuda.get_device_name()}; {NAME}: {H} heads, topk {TOPK}, "
          f"{INFO.cache_dtype_name.decode()}")
    print("| decode rows | libdsa us | TFLOP/s | one call at a time us | eager us | eager TFLOP/s | speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for B in (64, 128):
        ms, ms1, ms_e, fl = run(B, opts)
        print(f"| {B} | {ms * 1e3:.0f} | {fl / ms / 1e9:.1f} | {ms1 * 1e3:.0f} | {ms_e * 1e3:.0f} | {fl / ms_e / 1e9:.1f} "
              f"| {ms_e / ms:.2f}x |")


if __name__ == "__main__":
    main()
