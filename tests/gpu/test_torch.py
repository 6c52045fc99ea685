"""GPU tests of dsagen's torch side on one GPU (python/dsagen/ops.py, examples/dsa_layer.py):
- the stages through Context's methods and through torch.ops.dsagen.* against libdsa's C calls
  (ctypes) on the same tensors, row-strided inputs included: every output bit-identical;
- the argument checks on torch tensors (dtype, device, shape, stride, alignment), libdsa's own
  errors as DsaError with dsa_last_error's text, a closed context;
- a whole step (prologue + index + attend) captured in a torch.cuda.CUDAGraph and replayed, also on
  new inputs, against eager: bit-identical;
- torch.compile(fullgraph=True) of the example layer: the dsagen ops in one graph, aot_eager
  bit-identical to eager, Inductor within rounding (tests/gpu/run.sh python runs the example itself);
- the host overhead of one eager call beside the C call's own time (median; target <= 5 us more).
Prints ok/FAIL lines and ends with "N passed, N failed". Usage (after `ninja gpu python`):
    PYTHONPATH=build/python python3 tests/gpu/test_torch.py [checks|graph|compile|overhead|all]"""
import statistics
import sys
import time

import torch

import torch_world as tw
from torch_world import World, dsagen, dsa_layer

t = tw.Tally()
CONFIGS = ["tiny_tp4_dcp1_i1_bf16", "tiny_tp4_dcp1_i1_fp8_ds_mla", "tiny_tp4_dcp1_i1_nvfp4_ds_mla",
           "glm5.2_tp1_dcp1_i1_bf16", "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla"]


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_against_c(name):
    """Every stage through the Context, through torch.ops, and through C, on the same inputs."""
    with dsagen.Context(name, device=0, cache_dir=tw.CACHE) as ctx:
        w = World(ctx.info, 0, pad=8, seed=3)
        h = ctx.handle
        # stage A over the history: the Context's method against dsa_prologue
        kv_a, idx_a = w.caches()
        kv_c, idx_c = w.caches()
        q_a = tw.history(ctx, w, kv_a, idx_a)
        q_c = torch.empty_like(q_a)
        tw.c_prologue(h, w, w.h["q_c"], q_c, w.h["kv"], w.h["idx_k"], w.hist, kv_c, idx_c)
        torch.cuda.synchronize()
        t.ok(same(q_a, q_c) and same(kv_a, kv_c) and same(idx_a, idx_c) and kv_a.any().item(),
             f"{name}: prologue over {len(w.hist['positions'])} tokens (row-strided q_c, kv, idx_k): q_c_out, "
             "MLA and indexer caches bit-identical to dsa_prologue's")
        # the step: Context methods, torch.ops, and C, each from the history's caches
        o_m, o_o, o_c = w.outputs(), w.outputs(), w.outputs()
        caches = {}
        for key, o in (("method", o_m), ("ops", o_o), ("c", o_c)):
            caches[key] = (kv_a.clone(), idx_a.clone())
        tw.step(ctx, w, *caches["method"], o_m)
        tw.step_ops(h, w, *caches["ops"], o_o)
        kv, idx = caches["c"]
        s, b = w.s, w.step
        tw.c_prologue(h, w, s["q_c"], o_c["q_c_out"], s["kv"], s["idx_k"], b, kv, idx, topk=o_c["topk"])
        tw.c_index(h, s["iq"], s["iw"], b, idx, o_c["topk"])
        tw.c_attend(h, s["q_lat"], s["q_pe"], b, o_c["topk"], kv, o_c["out"], o_c["lse"])
        torch.cuda.synchronize()
        for key, o in (("Context methods", o_m), ("torch.ops.dsagen", o_o)):
            k = "method" if key.startswith("C") else "ops"
            good = all(same(o[f], o_c[f]) for f in o) and all(same(x, y) for x, y in zip(caches[k], caches["c"]))
            t.ok(good, f"{name}: step of {w.T} rows through {key}: q_c_out, topk, out, lse and caches bit-identical "
                       "to the C calls'")
        valid = (o_c["topk"] >= 0).sum(1)
        t.ok(bool((valid > 0).all()) and bool(o_c["out"].float().abs().sum() > 0) and bool(o_c["lse"].isfinite().all()),
             f"{name}: every row has top-k rows ({valid.tolist()}) and a finite, non-zero output")


def test_checks():
    """The argument checks on torch tensors, libdsa's errors, closed contexts."""
    name = "tiny_tp4_dcp1_i1_bf16"
    ctx = dsagen.Context(name, device=0, cache_dir=tw.CACHE)
    g = ctx.info
    w = World(g, 0)
    kv, idx = w.caches()
    o = w.outputs()
    b, s = w.step, w.s
    T, N = w.T, w.num_blocks
    base = dict(q_lat=s["q_lat"], q_pe=s["q_pe"], positions=b["positions"], topk=o["topk"],
                req_of_token=b["req_of_token"], seq_lens=b["seq_lens"], block_table=b["block_table"], kv_cache=kv,
                out=o["out"], lse=o["lse"])

    def attend(**over):
        ctx.attend(**dict(base, **over))

    def attend_op(**over):
        a = dict(base, **over)
        torch.ops.dsagen.attend(ctx.handle, a["q_lat"], a["q_pe"], a["positions"], a["topk"], a["req_of_token"],
                                a["seq_lens"], a["block_table"], a["kv_cache"], a["out"], a["lse"])

    pbase = dict(q_c=s["q_c"], q_c_out=o["q_c_out"], kv=s["kv"], positions=b["positions"],
                 slot_mapping=b["slot_mapping"], q_norm_w=w.w["q_norm_w"], kv_norm_w=w.w["kv_norm_w"], kv_cache=kv)

    def prologue(**over):
        ctx.prologue(**dict(pbase, **over))

    raises = t.raises
    raises(ValueError, "q_c: expected dtype bfloat16, got float32", prologue, q_c=s["q_c"].float())
    raises(ValueError, "q_c: expected a CUDA tensor, got cpu", prologue, q_c=s["q_c"].cpu())
    raises(ValueError, f"out: expected shape ({T}, {g.heads_local}, {g.kv_lora_rank}) with T = {T}, got "
           f"({T}, {g.heads_local + 1}, {g.kv_lora_rank})", attend,
           out=torch.empty(T, g.heads_local + 1, g.kv_lora_rank, dtype=torch.bfloat16, device="cuda"))
    raises(ValueError, f"q_c: expected a row stride that is a multiple of 8 elements, got {g.q_lora_rank + 4}",
           prologue, q_c=tw.strided(s["q_c"], 4))
    raises(ValueError, f"out: expected a dense tensor (strides {(g.heads_local * g.kv_lora_rank, g.kv_lora_rank, 1)}), "
           f"got strides {(g.heads_local * g.kv_lora_rank + 8, g.kv_lora_rank, 1)}", attend, out=tw.strided(o["out"], 8))
    flat = torch.zeros(kv.numel() + 16, dtype=torch.uint8, device="cuda")
    raises(ValueError, "kv_cache: expected a 16-byte aligned address, got one 1 bytes past a boundary",
           attend, kv_cache=flat[1:1 + kv.numel()].view(kv.shape))
    raises(ValueError, "kv_cache: expected dtype uint8, got int8", attend, kv_cache=kv.view(torch.int8))
    raises(ValueError, "q_lat: expected a tensor (an object with __dlpack__), got list", attend, q_lat=[1, 2])
    raises(ValueError, "topk: expected a tensor (clear_topk is set), got None", prologue, clear_topk=True)
    raises(ValueError, "idx_norm_w: expected a tensor (idx_k is given), got None", prologue, idx_k=s["idx_k"])
    # through the dispatcher: the same exception and text
    raises(ValueError, "lse: expected dtype float32, got bfloat16", attend_op, lse=o["lse"].bfloat16())
    # a check only libdsa makes (num_requests x max_blocks < 2^31): DsaError with dsa_last_error's text, nothing written
    big = torch.empty(1, 1 << 31, dtype=torch.int32, device="cuda")  # 8 GiB, never initialised
    o["out"].fill_(7)
    e = raises(dsagen.DsaError, "DSA_ERROR_INVALID_ARGUMENT (invalid argument): dsa_attend: args->max_blocks is "
               "2147483648, must be 1..2147483647 (num_requests x max_blocks < 2^31)", attend,
               seq_lens=b["seq_lens"][:1], block_table=big)
    del big
    t.ok(e is not None and e.detail == tw.lib.dsa_last_error(tw.ctypes.c_void_p(ctx.handle)).decode() and
         bool((o["out"] == 7).all()), "DsaError.detail is dsa_last_error(ctx), and out is untouched")
    # libdsa's failure to create: a DCP configuration without a group
    e = raises(dsagen.DsaError, "DSA_ERROR_INVALID_ARGUMENT (invalid argument): dsa_ctx_create: ...",
               dsagen.Context, "tiny_tp4_dcp2_i1_bf16", device=0, cache_dir=tw.CACHE)
    t.ok(e is not None and e.detail == tw.lib.dsa_last_error(None).decode(),
         f"DsaError.detail is dsa_last_error(NULL): {e.detail if e else None}")
    # a torch.device and "cuda:0" name the same device
    with dsagen.Context(name, device=torch.device("cuda", 0), cache_dir=tw.CACHE) as c2:
        t.ok(c2.device == 0, "Context(device=torch.device('cuda', 0))")
    # a closed context: the method and the op refuse it before libdsa sees a freed pointer
    h = ctx.handle
    torch.cuda.synchronize()
    ctx.close()
    raises(ValueError, f"ctx: expected an open dsagen.Context, got <dsagen.Context {name} device 0 closed>", attend)
    raises(ValueError, f"ctx: expected the handle of an open dsagen.Context, got {h:#x} (closed, or never one)",
           attend_op)


def test_graph(name):
    """prologue + index + attend captured in one CUDA graph, replayed against eager, twice."""
    with dsagen.Context(name, device=0, cache_dir=tw.CACHE) as ctx:
        w = World(ctx.info, 0, seed=5)
        kv0, idx0 = w.caches()
        tw.history(ctx, w, kv0, idx0)
        for api in ("Context methods", "torch.ops.dsagen"):
            def run(kv, idx, o):
                if api == "Context methods":
                    tw.step(ctx, w, kv, idx, o)
                else:
                    tw.step_ops(ctx.handle, w, kv, idx, o)
            kv, idx = kv0.clone(), idx0.clone()
            o = w.outputs()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                run(kv, idx, o)  # warm-up
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run(kv, idx, o)
            for trial in range(2):
                if trial:  # new values in the captured input buffers
                    gen = torch.Generator().manual_seed(99)
                    for k in ("q_c", "kv", "idx_k", "iq", "q_lat", "q_pe"):
                        w.s[k].copy_(torch.randn(w.s[k].shape, generator=gen).to(w.s[k].dtype))
                kv.copy_(kv0), idx.copy_(idx0)
                for x in o.values():
                    x.fill_(7)
                graph.replay()
                ke, ie, oe = kv0.clone(), idx0.clone(), w.outputs()
                run(ke, ie, oe)
                torch.cuda.synchronize()
                good = all(same(o[f], oe[f]) for f in o) and same(kv, ke) and same(idx, ie)
                t.ok(good, f"{name}: CUDA graph of prologue + index + attend ({api}), replay {trial + 1}"
                           f"{' on new inputs' if trial else ''}: bit-identical to eager")
            del graph


def test_compile():
    """torch.compile(fullgraph=True) of the example layer."""
    name = "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla"
    hidden = dsa_layer.HIDDEN["deepseek_v32"]
    with dsagen.Context(name, device=0, cache_dir=tw.CACHE) as ctx:
        pages = dsa_layer.Pages(ctx.info, len(dsa_layer.LENS), max(dsa_layer.LENS) + 1)
        layer = dsa_layer.DsaAttention(ctx, hidden, pages.num_blocks)
        _, xd, batch = dsa_layer.run(layer, pages, hidden)
        kv0, idx0 = layer.kv_cache.clone(), layer.idx_cache.clone()
        y, topk = layer(xd, **batch)
        graphs = []

        def record(gm, inputs):
            graphs.append(str(gm.graph))
            return gm.forward

        torch._dynamo.reset()
        torch.compile(layer, fullgraph=True, backend=record)(xd, **batch)
        text = graphs[0] if graphs else ""
        t.ok(len(graphs) == 1 and all(f"dsagen.{op}" in text for op in ("prologue", "index", "attend")),
             f"torch.compile(fullgraph=True) traces the layer as one graph holding dsagen.prologue, index and attend "
             f"({len(graphs)} graph(s))")
        for backend in ("aot_eager", "inductor"):
            layer.kv_cache.copy_(kv0), layer.idx_cache.copy_(idx0)
            torch._dynamo.reset()
            yc, tc = torch.compile(layer, fullgraph=True, backend=backend)(xd, **batch)
            e = dsa_layer.rel_err(yc, y)
            writes = bool(layer.kv_cache.ne(kv0).any())  # the decode token's entry, written through the graph
            if backend == "aot_eager":  # functionalised, the same kernels: the same bits
                t.ok(same(yc, y) and torch.equal(tc, topk) and writes,
                     f"{name}: layer compiled with aot_eager (functionalised writes): output and top-k bit-identical, "
                     "the caches written in place")
            else:
                t.ok(e < 1e-2 and torch.equal(tc, topk) and writes,
                     f"{name}: layer compiled with Inductor: output within {e:.2e} of eager (bound 1e-2), top-k equal")


def test_overhead():
    """Host time of one eager call, tiny inputs (one decode row of a 64-token request), beside the C
    call's own time (measured inside the extension around dsa_prologue / dsa_index / dsa_attend)."""
    name = "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla"
    with dsagen.Context(name, device=0, cache_dir=tw.CACHE) as ctx:
        w = World(ctx.info, 0, lens=[64], new=[1], seed=7)
        kv, idx = w.caches()
        tw.history(ctx, w, kv, idx)
        o = w.outputs()
        b, s = w.step, w.s
        calls = {
            "prologue": lambda: ctx.prologue(s["q_c"], o["q_c_out"], s["kv"], b["positions"], b["slot_mapping"],
                                             w.w["q_norm_w"], w.w["kv_norm_w"], kv, topk=o["topk"], clear_topk=True,
                                             idx_k=s["idx_k"], idx_norm_w=w.w["idx_norm_w"],
                                             idx_norm_b=w.w["idx_norm_b"], idx_cache=idx),
            "index": lambda: ctx.index(s["iq"], s["iw"], b["positions"], b["req_of_token"], b["seq_lens"],
                                       b["block_table"], idx, o["topk"]),
            "attend": lambda: ctx.attend(s["q_lat"], s["q_pe"], b["positions"], o["topk"], b["req_of_token"],
                                         b["seq_lens"], b["block_table"], kv, o["out"], o["lse"]),
        }
        ops = {
            "prologue": lambda: torch.ops.dsagen.prologue(ctx.handle, s["q_c"], o["q_c_out"], s["kv"], b["positions"],
                                                          b["slot_mapping"], w.w["q_norm_w"], w.w["kv_norm_w"], kv,
                                                          o["topk"], True, s["idx_k"], w.w["idx_norm_w"],
                                                          w.w["idx_norm_b"], idx),
            "index": lambda: torch.ops.dsagen.index(ctx.handle, s["iq"], s["iw"], b["positions"], b["req_of_token"],
                                                    b["seq_lens"], b["block_table"], idx, o["topk"]),
            "attend": lambda: torch.ops.dsagen.attend(ctx.handle, s["q_lat"], s["q_pe"], b["positions"], o["topk"],
                                                      b["req_of_token"], b["seq_lens"], b["block_table"], kv, o["out"],
                                                      o["lse"]),
        }
        # torch's own floor for the dispatcher path: an op of the same schema, defined the same way
        # (dsagen/ops.py: a Library op, CompositeExplicitAutograd) with a kernel that does nothing
        lib = torch.library.Library("dsagen_empty", "DEF")
        for stage in calls:
            schema = str(getattr(torch.ops.dsagen, stage).default._schema)
            lib.define(stage + schema[schema.index("("):])
            lib.impl(stage, lambda *args: None, "CompositeExplicitAutograd")
        empty = {
            "prologue": lambda: torch.ops.dsagen_empty.prologue(ctx.handle, s["q_c"], o["q_c_out"], s["kv"],
                                                                b["positions"], b["slot_mapping"], w.w["q_norm_w"],
                                                                w.w["kv_norm_w"], kv, o["topk"], True, s["idx_k"],
                                                                w.w["idx_norm_w"], w.w["idx_norm_b"], idx),
            "index": lambda: torch.ops.dsagen_empty.index(ctx.handle, s["iq"], s["iw"], b["positions"],
                                                          b["req_of_token"], b["seq_lens"], b["block_table"], idx,
                                                          o["topk"]),
            "attend": lambda: torch.ops.dsagen_empty.attend(ctx.handle, s["q_lat"], s["q_pe"], b["positions"],
                                                            o["topk"], b["req_of_token"], b["seq_lens"],
                                                            b["block_table"], kv, o["out"], o["lse"]),
        }
        reader = dsagen.ops._READER
        t.ok(reader is not None, "the fast path reads tensors through dsagen._torch_view (ninja python-torch built it)")
        print(f"tensors read by {'dsagen._torch_view' if reader is not None else 'Python attributes'}; empty op: "
              "torch's own cost of a Library op of the same schema whose kernel does nothing")
        print("| stage | C call us | Context method us | + us | torch.ops.dsagen us | + us | empty op us | ops - C - empty us |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for stage in ("prologue", "index", "attend"):
            c_ns, m_ns, op_ns, e_ns = [], [], [], []
            for fn, into in ((calls[stage], m_ns), (ops[stage], op_ns), (empty[stage], e_ns)):
                for _ in range(5):
                    fn()
                for _ in range(40):  # 25 calls, then the GPU catches up: the launch queue never fills
                    torch.cuda.synchronize()
                    for _ in range(25):
                        t0 = time.perf_counter_ns()
                        fn()
                        into.append(time.perf_counter_ns() - t0)
                        if into is m_ns:
                            c_ns.append(ctx._ctx.call_ns)
            torch.cuda.synchronize()
            c, m, op, e = (statistics.median(x) / 1e3 for x in (c_ns, m_ns, op_ns, e_ns))
            print(f"| {stage} | {c:.1f} | {m:.1f} | {m - c:.1f} | {op:.1f} | {op - c:.1f} | {e:.1f} | {op - c - e:.1f} |")
            t.ok(m - c <= 5.0, f"{name} {stage}: an eager call costs {m - c:.1f} us more than the C call ({c:.1f} us) "
                               f"(target <= 5); through the dispatcher {op - c:.1f} us more, of which {e:.1f} us "
                               "is torch's for an empty op of the same schema")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if not torch.cuda.is_available():
        print("SKIPPED: tests/gpu/test_torch.py: no CUDA device")
        print("0 passed, 0 failed")
        return 0
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, python {sys.version.split()[0]}", flush=True)
    torch.manual_seed(0)
    sections = {
        "checks": lambda: [test_against_c(n) for n in CONFIGS] + [test_checks()],
        "graph": lambda: [test_graph(n) for n in ("tiny_tp4_dcp1_i1_fp8_ds_mla", "glm5.2_tp1_dcp1_i1_bf16")],
        "compile": test_compile,
        "overhead": test_overhead,
    }
    for key, fn in sections.items():
        if what in (key, "all"):
            try:
                fn()
            except Exception as e:  # noqa: BLE001  (one section's crash is a failure, the rest still run)
                import traceback
                traceback.print_exc()
                t.ok(False, f"section {key} raised {type(e).__name__}: {e}")
    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
