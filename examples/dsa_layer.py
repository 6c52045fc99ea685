"""A DeepSeek-V3.2-shaped sparse-attention layer in PyTorch over dsagen: the GEMMs in torch, the
three DSA stages (prologue, indexer, sparse MLA) through dsagen, every dimension from the library
(dsagen.config_info). Random weights; what an engine author would copy is the shape of forward().

    python3 examples/dsa_layer.py          # one GPU: a prefill, then a decode step run eager, under
                                           # torch.compile(fullgraph=True) and replayed from a CUDA graph
    torchrun --nproc_per_node 2 examples/dsa_layer.py --config glm5.2_tp2_dcp2_i1_nvfp4_ds_mla \\
        --reference glm5.2_tp1_dcp1_i1_bf16   # TP = DCP = 2 on two GPUs against one GPU

(from the repository root, with PYTHONPATH=build/python after `ninja python`). Exits 1 when the
runs disagree. tests/gpu/test_torch.py and test_torch_dcp.py import this file.
"""
import argparse
import math
import os
import sys

import torch
import torch.distributed as dist

import dsagen

# The model width is not part of the attention step (libdsa never sees it): the models' own values.
HIDDEN = {"deepseek_v32": 7168, "glm5.2": 6144}


class Pages:
    """The engine's paged-cache bookkeeping for num_requests requests of up to max_len tokens on DCP
    rank `rank` of W: a block table, and per step the tensors the layer takes. Positions are dealt to
    the ranks in runs of `interleave` (docs/design.md, "DCP"): owner (p / I) % W, local index
    (p / (W I)) I + p % I; a token's slot is -1 on every rank but its owner."""

    def __init__(self, info, num_requests, max_len, W=1, rank=0, device="cuda", seed=0):
        self.info, self.W, self.rank, self.device = info, W, rank, device
        per_req = -(-max_len // info.block_size)
        self.num_blocks = num_requests * per_req
        gen = torch.Generator().manual_seed(seed * 101 + rank)
        self.table = torch.randperm(self.num_blocks, generator=gen).to(torch.int32).view(num_requests, per_req)
        self.table = self.table.to(device)

    def step(self, seq_lens, new):
        """A step in which request r has seq_lens[r] tokens and its last new[r] are this step's rows."""
        bs, I, W = self.info.block_size, self.info.interleave, self.W
        dev = self.device
        pos = torch.cat([torch.arange(n - k, n) for n, k in zip(seq_lens, new)]).to(dev)
        req = torch.cat([torch.full((k,), r, dtype=torch.int32) for r, k in enumerate(new)]).to(dev)
        local = (pos // (W * I)) * I + pos % I
        slot = self.table[req.long(), local // bs].long() * bs + local % bs
        slot = torch.where((pos // I) % W == self.rank, slot, -1)
        return dict(positions=pos, slot_mapping=slot, req_of_token=req,
                    seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev), block_table=self.table)


class DsaAttention(torch.nn.Module):
    """One attention layer with its own indexer (an "indexer layer"), for tensor-parallel rank tp_rank
    of info.tp: this rank's heads_local query heads, the indexer replicated, wo's rows of these heads
    (the partial outputs summed over tp_group). The caches are buffers: num_blocks pages of this rank's
    keys in the configuration's formats."""

    def __init__(self, ctx, hidden, num_blocks, tp_rank=0, tp_group=None, seed=0):
        super().__init__()
        g = ctx.info
        self.ctx, self.tp_group = ctx, tp_group
        self.H, self.nope, self.rope, self.L, self.V = g.heads_local, g.qk_nope_dim, g.qk_rope_dim, g.kv_lora_rank, g.v_head_dim
        self.IH, self.D, self.K = g.idx_heads, g.idx_head_dim, g.idx_topk
        dev = torch.device("cuda", ctx.device)
        gen = torch.Generator().manual_seed(seed)  # the full model's weights: the same on every rank

        def w(*shape, fan_in):
            return (torch.randn(*shape, generator=gen) / math.sqrt(fan_in)).to(torch.bfloat16)

        def norm(n):
            return (1 + 0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16)

        heads = slice(tp_rank * self.H, (tp_rank + 1) * self.H)
        p = {}
        p["wq_a"] = w(hidden, g.q_lora_rank, fan_in=hidden)
        p["q_norm"] = norm(g.q_lora_rank)
        # wq_b's columns: every head's nope part, then every head's rope part, so that q_pe is a
        # row-strided view dsagen takes without a copy (a permutation of the checkpoint's columns)
        wq_nope = w(g.q_lora_rank, g.heads, self.nope, fan_in=g.q_lora_rank)[:, heads]
        wq_rope = w(g.q_lora_rank, g.heads, self.rope, fan_in=g.q_lora_rank)[:, heads]
        p["wq_b"] = torch.cat([wq_nope.flatten(1), wq_rope.flatten(1)], 1)
        p["wkv_a"] = w(hidden, g.kv_dim, fan_in=hidden)
        p["kv_norm"] = norm(g.kv_lora_rank)
        p["w_uk"] = w(g.heads, self.nope, self.L, fan_in=self.nope)[heads]  # wkv_b's key half, absorbed into q
        p["w_uv"] = w(g.heads, self.L, self.V, fan_in=self.L)[heads]        # and its value half
        p["wo"] = w(g.heads, self.V, hidden, fan_in=g.heads * self.V)[heads].flatten(0, 1)
        p["wq_idx"] = w(g.q_lora_rank, self.IH * self.D, fan_in=g.q_lora_rank)
        p["wk_idx"] = w(hidden, self.D, fan_in=hidden)
        p["k_norm_w"], p["k_norm_b"] = norm(self.D), (0.1 * torch.randn(self.D, generator=gen)).to(torch.bfloat16)
        p["w_proj"] = w(hidden, self.IH, fan_in=hidden)
        for name, t in p.items():
            self.register_buffer(name, t.contiguous().to(dev), persistent=False)
        self.register_buffer("kv_cache", torch.zeros(num_blocks, g.block_size, g.cache_bytes_per_token,
                                                     dtype=torch.uint8, device=dev))
        self.register_buffer("idx_cache", torch.zeros(num_blocks, g.idx_page_bytes, dtype=torch.uint8, device=dev))

    def forward(self, x, positions, slot_mapping, req_of_token, seq_lens, block_table):
        """x [T, hidden] bf16 -> ([T, hidden] bf16, this layer's top-k rows [T, idx_topk]). The rows are
        returned for the layers that share them (GLM-5.2): those pass clear_topk=False to the
        prologue and skip the indexer."""
        T, H = x.shape[0], self.H
        ctx = self.ctx
        q_c = x @ self.wq_a                                 # [T, q_lora_rank], before its norm
        kv = x @ self.wkv_a                                 # [T, kv_lora_rank + rope], before norm and rope
        idx_k = x @ self.wk_idx                             # the indexer's key, before norm and rope
        q_c_out = torch.empty_like(q_c)
        topk = torch.empty(T, self.K, dtype=torch.int32, device=x.device)
        # stage A: q_c's norm for every token; this rank's tokens into both caches; topk cleared
        ctx.prologue(q_c, q_c_out, kv, positions, slot_mapping, self.q_norm, self.kv_norm, self.kv_cache, topk=topk,
                     clear_topk=True, idx_k=idx_k, idx_norm_w=self.k_norm_w, idx_norm_b=self.k_norm_b,
                     idx_cache=self.idx_cache)
        q = q_c_out @ self.wq_b
        q_nope = q[:, :H * self.nope].view(T, H, self.nope)
        q_pe = q[:, H * self.nope:].view(T, H, self.rope)  # row-strided: passed as it is
        q_lat = torch.einsum("thn,hnl->thl", q_nope, self.w_uk).contiguous()
        # stage B: each row's top-k positions by the indexer's score
        iq = (q_c_out @ self.wq_idx).view(T, self.IH, self.D)
        weights = (x @ self.w_proj).float()
        ctx.index(iq, weights, positions, req_of_token, seq_lens, block_table, self.idx_cache, topk)
        # stage C: sparse MLA over those rows (with DCP: gathered, over the group's shards, merged)
        lat = torch.empty(T, H, self.L, dtype=torch.bfloat16, device=x.device)
        ctx.attend(q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, self.kv_cache, lat)
        y = torch.einsum("thl,hlv->thv", lat, self.w_uv).flatten(1) @ self.wo
        if self.tp_group is not None:
            dist.all_reduce(y, group=self.tp_group)
        return y, topk


def rel_err(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp(min=1e-30)).item()


LENS = [3000, 700, 1, 2100]  # requests' lengths after the prefill; one longer than idx_topk


def run(layer, pages, hidden, seed=1):
    """A prefill of every request, then the decode step's input: (prefill output, decode x, decode batch)."""
    gen = torch.Generator().manual_seed(seed)
    dev = pages.device
    x = torch.randn(sum(LENS), hidden, generator=gen).to(torch.bfloat16).to(dev)
    y, _ = layer(x, **pages.step(LENS, LENS))
    xd = torch.randn(len(LENS), hidden, generator=gen).to(torch.bfloat16).to(dev)
    return y, xd, pages.step([n + 1 for n in LENS], [1] * len(LENS))


def single_gpu(config, hidden, cache_dir):
    """Eager, compiled and graph-captured decode steps on one GPU; returns the failures."""
    bad = []
    with dsagen.Context(config, device=0, cache_dir=cache_dir) as ctx:
        pages = Pages(ctx.info, len(LENS), max(LENS) + 1)
        layer = DsaAttention(ctx, hidden, pages.num_blocks)
        _, xd, batch = run(layer, pages, hidden)
        caches = (layer.kv_cache.clone(), layer.idx_cache.clone())  # after the prefill
        y_eager, topk_eager = layer(xd, **batch)

        compiled = torch.compile(layer, fullgraph=True)
        y_comp, topk_comp = compiled(xd, **batch)
        e = rel_err(y_comp, y_eager)
        print(f"torch.compile(fullgraph=True): decode output within {e:.2e} of eager, top-k "
              f"{'equal' if torch.equal(topk_comp, topk_eager) else 'DIFFERENT'}")
        if not e <= 1e-2 or not torch.equal(topk_comp, topk_eager):  # a NaN error fails too
            bad.append("torch.compile")

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as torch.cuda.graph asks
            layer(xd, **batch)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y_graph, topk_graph = layer(xd, **batch)
        layer.kv_cache.copy_(caches[0])  # the state before the eager step: the replay rewrites the same slot
        layer.idx_cache.copy_(caches[1])
        graph.replay()
        same = torch.equal(y_graph, y_eager) and torch.equal(topk_graph, topk_eager)
        print(f"CUDA graph: the replayed decode step {'bit-identical to' if same else 'DIFFERS from'} eager")
        if not same:
            bad.append("CUDA graph")
        torch.cuda.synchronize()
    return bad


def dcp_run(config, reference, hidden, cache_dir):
    """TP = DCP = the world size, against reference (TP = DCP = 1) on each rank's own GPU."""
    rank, W = dist.get_rank(), dist.get_world_size()
    info = dsagen.config_info(config)
    if info.tp != W or info.dcp != W or dsagen.config_info(reference).dcp != 1:
        sys.exit(f"dsa_layer: {config} must have tp = dcp = {W} (the world size) and {reference} dcp 1")
    bad = []
    with dsagen.Context(config, device=rank, dcp=dist.group.WORLD, cache_dir=cache_dir) as ctx, \
            dsagen.Context(reference, device=rank, cache_dir=cache_dir) as ref:
        pages = Pages(ctx.info, len(LENS), max(LENS) + 1, W=W, rank=rank)
        layer = DsaAttention(ctx, hidden, pages.num_blocks, tp_rank=rank, tp_group=dist.group.WORLD)
        ref_pages = Pages(ref.info, len(LENS), max(LENS) + 1)
        ref_layer = DsaAttention(ref, hidden, ref_pages.num_blocks)
        y_pre, xd, batch = run(layer, pages, hidden)
        r_pre, _, ref_batch = run(ref_layer, ref_pages, hidden)
        y, topk = layer(xd, **batch)
        r, r_topk = ref_layer(xd, **ref_batch)
        e_pre, e = rel_err(y_pre, r_pre), rel_err(y, r)
        same = torch.equal(topk, r_topk)
        # the caches' formats may differ (nvfp4 against bf16): the outputs agree to the coarser one's
        # rounding, the indexer's rows (its cache is the same format in both) exactly
        tol = 0.4 if ctx.info.cache_dtype != ref.info.cache_dtype else 2e-2
        print(f"rank {rank}: {config} against {reference}: top-k rows {'bit-identical' if same else 'DIFFER'}; "
              f"layer output within {e_pre:.3f} (prefill) and {e:.3f} (decode), bound {tol}")
        if not same or not e_pre <= tol or not e <= tol:  # a NaN error fails too
            bad.append(f"rank {rank} DCP")
        torch.cuda.synchronize()
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="deepseek_v32_tp1_dcp1_i1_fp8_ds_mla")
    p.add_argument("--reference", default="glm5.2_tp1_dcp1_i1_bf16", help="the DCP = 1 configuration (torchrun)")
    p.add_argument("--hidden", type=int, default=0, help="model width (default: the model's)")
    p.add_argument("--cache-dir", default=None, help="libdsa's JIT cache (default: $DSA_CACHE_DIR or ~/.cache/dsagen)")
    a = p.parse_args()
    hidden = a.hidden or next((v for k, v in HIDDEN.items() if a.config.startswith(k + "_")), 2048)
    torch.manual_seed(0)
    if "WORLD_SIZE" in os.environ:  # under torchrun
        rank = int(os.environ["RANK"])
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
        bad = dcp_run(a.config, a.reference, hidden, a.cache_dir)
        dist.destroy_process_group()
    else:
        bad = single_gpu(a.config, hidden, a.cache_dir)
    print("dsa_layer: " + ("FAIL: " + ", ".join(bad) if bad else "ok"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
