"""GPU test of dsagen's torch side at DCP = 2 on two GPUs, one process each (torchrun):
- Context(dcp=the process group): rank 0's ncclUniqueId broadcast over the group; a group whose
  size is not the configuration's dcp refused before any collective;
- the step (prologue + index + attend) through the Context's methods at
  glm5.2_tp2_dcp2_i1_nvfp4_ds_mla against glm5.2_tp1_dcp1_i1_bf16 on each rank's GPU (the pair
  of tests/gpu/test_index.c's NCCL test): top-k rows bit-identical; the attend output (this rank's
  heads of the DCP = 1 one) within the nvfp4 cache's rounding;
- the same step at tiny_tp4_dcp2_i1_nvfp4_ds_mla against tiny_tp4_dcp1_i1_nvfp4_ds_mla (one cache
  format): top-k bit-identical, output and LSE within the fp32 merge's rounding; then captured in a
  CUDA graph (NCCL inside) and replayed: bit-identical to eager;
- examples/dsa_layer.py's DCP run (TP = DCP = 2 against TP = DCP = 1).
Each rank prints ok/FAIL lines; rank 0 ends with "N passed, N failed" summed over the ranks.
Usage: python3 -m torch.distributed.run --standalone --nproc_per_node 2 tests/gpu/test_torch_dcp.py"""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import torch_world as tw
from torch_world import World, dsagen, dsa_layer

rank = int(os.environ.get("RANK", "0"))
t = tw.Tally(f"rank {rank}: ")


def same(a, b):
    return a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def run_pair(config, single, W, graph=False):
    info, one = dsagen.config_info(config), dsagen.config_info(single)
    with dsagen.Context(config, device=rank, dcp=dist.group.WORLD, cache_dir=tw.CACHE) as ctx, \
            dsagen.Context(single, device=rank, cache_dir=tw.CACHE) as ref:
        t.ok(ctx.dcp_rank == rank, f"{config}: Context(dcp=group) is DCP rank {ctx.dcp_rank}")
        # the same requests and values on both; the reference holds every key and this rank's heads
        w = World(info, rank, W=W, rank=rank, seed=11)
        wr = World(one, rank, seed=11, head_block=rank if one.heads_local == info.heads_local else 0)
        kv, idx = w.caches()
        kr, ir = wr.caches()
        tw.history(ctx, w, kv, idx)
        tw.history(ref, wr, kr, ir)
        kv0, idx0 = kv.clone(), idx.clone()
        o, orf = w.outputs(), wr.outputs()
        tw.step(ctx, w, kv, idx, o)
        tw.step(ref, wr, kr, ir, orf)
        torch.cuda.synchronize()
        t.ok(torch.equal(o["topk"], orf["topk"]) and bool((o["topk"] >= 0).any()),
             f"{config} against {single}: top-k rows of {w.T} rows bit-identical")
        H = info.heads_local
        heads = slice(0, H) if one.heads_local == H else slice(rank * H, (rank + 1) * H)
        ro, rl = orf["out"][:, heads].float(), orf["lse"][:, heads]
        err = ((o["out"].float() - ro).abs().max() / ro.abs().max()).item()
        if info.cache_dtype == one.cache_dtype:  # the same keys: only the merge's fp32 and bf16 rounding
            lse_err = (o["lse"] - rl).abs().max().item()
            t.ok(err <= 2 ** -7 and lse_err <= 1e-3,
                 f"{config} against {single}: attend output within {err:.2e} of max |out| (bound 2^-7), LSE within "
                 f"{lse_err:.2e} (bound 1e-3)")
        else:  # nvfp4 against bf16 keys: the quantisation's error, far below a wrong merge's (about 1)
            rel = dsa_layer.rel_err(o["out"], orf["out"][:, heads])
            t.ok(rel <= 0.4, f"{config} against {single}: attend output within {rel:.3f} (relative, bound 0.4) "
                             "of the bf16 cache's")
        if graph:
            graph_ = torch.cuda.CUDAGraph()
            og = w.outputs()
            kg, ig = kv0.clone(), idx0.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                tw.step(ctx, w, kg, ig, og)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph_):
                tw.step(ctx, w, kg, ig, og)
            kg.copy_(kv0), ig.copy_(idx0)
            for x in og.values():
                x.fill_(7)
            graph_.replay()
            torch.cuda.synchronize()
            t.ok(all(same(og[f], o[f]) for f in o) and same(kg, kv),
                 f"{config}: CUDA graph of the step (NCCL inside) replayed: bit-identical to eager")
            del graph_


def main():
    if torch.cuda.device_count() < 2 or "WORLD_SIZE" not in os.environ:
        print("SKIPPED: tests/gpu/test_torch_dcp.py: needs 2 GPUs, under torchrun")
        print("0 passed, 0 failed")
        return 0
    W = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    sections = [
        lambda: t.raises(ValueError, "dcp: expected a process group of 4 ranks (the configuration's dcp), got 2",
                         dsagen.Context, "glm5.2_tp4_dcp4_i1_fp8_ds_mla", device=rank, dcp=dist.group.WORLD),
        lambda: run_pair("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "glm5.2_tp1_dcp1_i1_bf16", W),
        lambda: run_pair("tiny_tp4_dcp2_i1_nvfp4_ds_mla", "tiny_tp4_dcp1_i1_nvfp4_ds_mla", W, graph=True),
        lambda: t.ok(not dsa_layer.dcp_run("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "glm5.2_tp1_dcp1_i1_bf16",
                                           dsa_layer.HIDDEN["glm5.2"], tw.CACHE),
                     "examples/dsa_layer.py at TP = DCP = 2 against TP = DCP = 1"),
    ]
    for fn in sections:
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            t.ok(False, f"raised {type(e).__name__}: {e}")
    counts = torch.tensor([t.passed, t.failed], device="cuda")
    dist.all_reduce(counts)
    dist.destroy_process_group()
    if rank == 0:
        print(f"{counts[0].item()} passed, {counts[1].item()} failed")
    return 1 if counts[1].item() else 0


if __name__ == "__main__":
    sys.exit(main())
