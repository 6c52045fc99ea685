"""What tests/gpu/test_torch.py and test_torch_dcp.py share: a world of requests and random step
inputs for one configuration (every size from dsagen.config_info), the three stages through the
Context's methods and, beside them, through libdsa's C calls by ctypes (tests/bench/dsa_ctypes.py)
on the same tensors, and the ok/FAIL counting."""
import ctypes
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "tests", "bench"),
                os.path.join(ROOT, "examples")]

import dsagen  # noqa: E402
import dsa_ctypes  # noqa: E402
import dsa_layer  # noqa: E402

CACHE = os.environ.get("DSA_TEST_CACHE") or None  # libdsa's JIT cache (tests/gpu/run.sh sets a fresh one)
lib = dsa_ctypes.load()


class Tally:
    def __init__(self, prefix=""):
        self.passed = self.failed = 0
        self.prefix = prefix

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{self.prefix}{'ok  ' if cond else 'FAIL'} {what}", flush=True)
        return cond

    def raises(self, exc, msg, fn, *args, **kw):
        """fn(...) raises exactly exc with exactly msg (msg ending in "..." : starting with the rest)."""
        try:
            fn(*args, **kw)
        except Exception as e:  # noqa: BLE001
            text = str(e)
            good = type(e) is exc and (text.startswith(msg[:-3]) if msg.endswith("...") else text == msg)
            self.ok(good, f"raises {exc.__name__}({msg!r})" + ("" if good else f": got {type(e).__name__}({text!r})"))
            return e
        self.ok(False, f"raises {exc.__name__}({msg!r}): nothing raised")
        return None


def lens_for(info):
    """Requests longer and shorter than idx_topk, one of a single token (as tests/gpu/test_index.c)."""
    K = info.idx_topk
    return [min(n, info.max_positions - 1) for n in (K + K // 2 + 37, K // 3 + 5, 1, K + 11)]


def bf16(gen, *shape, dev, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16).to(dev)


def strided(t, pad):
    """A copy of t [T, ...] whose rows sit `pad` elements apart beyond their width: a row-strided view."""
    T = t.shape[0]
    row = t[0].numel()
    wide = torch.zeros(T, row + pad, dtype=t.dtype, device=t.device)
    wide[:, :row] = t.reshape(T, row)
    return wide[:, :row].view(t.shape)


class World:
    """One configuration's inputs on DCP rank `rank` of W: the history (every token of every request)
    and the step's rows (the last new[r] positions of request r), random activations and weights
    seeded alike on every rank, and the rank's caches (zero)."""

    def __init__(self, info, device, W=1, rank=0, seed=0, lens=None, new=None, pad=0, head_block=None):
        g = self.info = info
        self.lens = lens or lens_for(info)
        self.new = new or [min(n, k) for n, k in zip(self.lens, (5, 3, 1, 4))]
        dev = self.dev = torch.device("cuda", device)
        self.pages = dsa_layer.Pages(info, len(self.lens), max(self.lens) + 1, W=W, rank=rank, device=dev, seed=seed)
        gen = torch.Generator().manual_seed(seed)
        self.hist = self.pages.step(self.lens, self.lens)
        self.step = self.pages.step(self.lens, self.new)
        Th, T = len(self.hist["positions"]), len(self.step["positions"])
        # the history's tokens, row-strided where dsa.h allows it (pad elements, a multiple of 8)
        self.h = dict(q_c=strided(bf16(gen, Th, g.q_lora_rank, dev=dev), pad),
                      kv=strided(bf16(gen, Th, g.kv_dim, dev=dev), pad),
                      idx_k=strided(bf16(gen, Th, g.idx_head_dim, dev=dev), pad))
        self.w = dict(q_norm_w=bf16(gen, g.q_lora_rank, dev=dev, scale=0.1) + 1,
                      kv_norm_w=bf16(gen, g.kv_lora_rank, dev=dev, scale=0.1) + 1,
                      idx_norm_w=bf16(gen, g.idx_head_dim, dev=dev, scale=0.1) + 1,
                      idx_norm_b=bf16(gen, g.idx_head_dim, dev=dev, scale=0.1))
        # the step: its own prologue inputs, the indexer's queries and weights, the attend queries
        # (drawn for every head of the model; this rank takes block head_block of heads_local, as TP does)
        self.s = dict(q_c=bf16(gen, T, g.q_lora_rank, dev=dev), kv=bf16(gen, T, g.kv_dim, dev=dev),
                      idx_k=bf16(gen, T, g.idx_head_dim, dev=dev),
                      iq=strided(bf16(gen, T, g.idx_heads, g.idx_head_dim, dev=dev), pad),
                      iw=strided(torch.randn(T, g.idx_heads, generator=gen).to(dev), pad))
        hb = head_block if head_block is not None else rank  # a DCP=1 reference on rank r: head_block r
        hs = slice(hb * g.heads_local, (hb + 1) * g.heads_local)
        self.s["q_lat"] = strided(bf16(gen, T, g.heads, g.kv_lora_rank, dev=dev)[:, hs].contiguous(), pad)
        self.s["q_pe"] = strided(bf16(gen, T, g.heads, g.qk_rope_dim, dev=dev)[:, hs].contiguous(), pad)
        self.num_blocks = self.pages.num_blocks
        self.T = T

    def caches(self):
        g = self.info
        return (torch.zeros(self.num_blocks, g.block_size, g.cache_bytes_per_token, dtype=torch.uint8, device=self.dev),
                torch.zeros(self.num_blocks, g.idx_page_bytes, dtype=torch.uint8, device=self.dev))

    def outputs(self, T=None):
        g, T = self.info, T or self.T
        return dict(q_c_out=torch.full((T, g.q_lora_rank), 7, dtype=torch.bfloat16, device=self.dev),
                    topk=torch.full((T, g.idx_topk), 7, dtype=torch.int32, device=self.dev),
                    out=torch.full((T, g.heads_local, g.kv_lora_rank), 7, dtype=torch.bfloat16, device=self.dev),
                    lse=torch.full((T, g.heads_local), 7, dtype=torch.float32, device=self.dev))


# ---- the stages through the Context's methods ----

def history(ctx, w, kv_cache, idx_cache):
    """The prologue over the history: fills this rank's caches."""
    Th = len(w.hist["positions"])
    q_out = torch.empty(Th, w.info.q_lora_rank, dtype=torch.bfloat16, device=w.dev)
    ctx.prologue(w.h["q_c"], q_out, w.h["kv"], w.hist["positions"], w.hist["slot_mapping"], w.w["q_norm_w"],
                 w.w["kv_norm_w"], kv_cache, idx_k=w.h["idx_k"], idx_norm_w=w.w["idx_norm_w"],
                 idx_norm_b=w.w["idx_norm_b"], idx_cache=idx_cache)
    return q_out


def step(ctx, w, kv_cache, idx_cache, o, index=True):
    """The step on its rows: prologue (topk cleared), index, attend, into the outputs o."""
    b, s = w.step, w.s
    ctx.prologue(s["q_c"], o["q_c_out"], s["kv"], b["positions"], b["slot_mapping"], w.w["q_norm_w"],
                 w.w["kv_norm_w"], kv_cache, topk=o["topk"], clear_topk=True, idx_k=s["idx_k"],
                 idx_norm_w=w.w["idx_norm_w"], idx_norm_b=w.w["idx_norm_b"], idx_cache=idx_cache)
    if index:
        ctx.index(s["iq"], s["iw"], b["positions"], b["req_of_token"], b["seq_lens"], b["block_table"], idx_cache,
                  o["topk"])
    ctx.attend(s["q_lat"], s["q_pe"], b["positions"], o["topk"], b["req_of_token"], b["seq_lens"],
               b["block_table"], kv_cache, o["out"], o["lse"])


def step_ops(handle, w, kv_cache, idx_cache, o):
    """The same step through the registered ops, torch.ops.dsagen.* (the dispatcher)."""
    b, s = w.step, w.s
    torch.ops.dsagen.prologue(handle, s["q_c"], o["q_c_out"], s["kv"], b["positions"], b["slot_mapping"],
                              w.w["q_norm_w"], w.w["kv_norm_w"], kv_cache, o["topk"], True, s["idx_k"],
                              w.w["idx_norm_w"], w.w["idx_norm_b"], idx_cache)
    torch.ops.dsagen.index(handle, s["iq"], s["iw"], b["positions"], b["req_of_token"], b["seq_lens"],
                           b["block_table"], idx_cache, o["topk"])
    torch.ops.dsagen.attend(handle, s["q_lat"], s["q_pe"], b["positions"], o["topk"], b["req_of_token"],
                            b["seq_lens"], b["block_table"], kv_cache, o["out"], o["lse"])


# ---- the same stages through libdsa's C calls (ctypes), on the same tensors ----

def _stride(t):
    return t.stride(0) if t.shape[0] > 1 else 0


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _check(rc, handle, what):
    if rc != 0:
        raise RuntimeError(f"{what}: {lib.dsa_last_error(ctypes.c_void_p(handle)).decode()}")


def c_prologue(handle, w, q_c, q_c_out, kv, idx_k, batch, kv_cache, idx_cache, topk=None):
    a = dsa_ctypes.PrologueArgs()
    a.size = ctypes.sizeof(a)
    a.num_tokens = q_c.shape[0]
    for f, t in (("q_c", q_c), ("q_c_out", q_c_out), ("kv", kv), ("idx_k", idx_k), ("positions", batch["positions"]),
                 ("slot_mapping", batch["slot_mapping"]), ("q_norm_w", w.w["q_norm_w"]),
                 ("kv_norm_w", w.w["kv_norm_w"]), ("idx_norm_w", w.w["idx_norm_w"]), ("idx_norm_b", w.w["idx_norm_b"]),
                 ("kv_cache", kv_cache), ("idx_cache", idx_cache), ("topk", topk)):
        setattr(a, f, None if t is None else t.data_ptr())
    a.num_cache_blocks = kv_cache.shape[0]
    a.clear_topk = 0 if topk is None else 1
    a.q_c_stride, a.kv_stride, a.idx_k_stride = _stride(q_c), _stride(kv), _stride(idx_k)
    _check(lib.dsa_prologue(ctypes.c_void_p(handle), ctypes.byref(a), _stream()), handle, "dsa_prologue")


def c_index(handle, q, weights, batch, idx_cache, topk):
    a = dsa_ctypes.IndexArgs()
    a.size = ctypes.sizeof(a)
    a.num_tokens = q.shape[0]
    for f, t in (("q", q), ("weights", weights), ("positions", batch["positions"]),
                 ("req_of_token", batch["req_of_token"]), ("seq_lens", batch["seq_lens"]),
                 ("block_table", batch["block_table"]), ("idx_cache", idx_cache), ("topk", topk)):
        setattr(a, f, t.data_ptr())
    a.num_requests, a.max_blocks = batch["block_table"].shape
    a.num_cache_blocks = idx_cache.shape[0]
    a.q_stride, a.weights_stride, a.topk_stride = _stride(q), _stride(weights), _stride(topk)
    _check(lib.dsa_index(ctypes.c_void_p(handle), ctypes.byref(a), _stream()), handle, "dsa_index")


def c_attend(handle, q_lat, q_pe, batch, topk, kv_cache, out, lse):
    a = dsa_ctypes.AttendArgs()
    a.size = ctypes.sizeof(a)
    a.num_tokens = q_lat.shape[0]
    for f, t in (("q_lat", q_lat), ("q_pe", q_pe), ("positions", batch["positions"]), ("topk", topk),
                 ("req_of_token", batch["req_of_token"]), ("seq_lens", batch["seq_lens"]),
                 ("block_table", batch["block_table"]), ("kv_cache", kv_cache), ("out", out), ("lse", lse)):
        setattr(a, f, None if t is None else t.data_ptr())
    a.num_requests, a.max_blocks = batch["block_table"].shape
    a.num_cache_blocks = kv_cache.shape[0]
    a.q_lat_stride, a.q_pe_stride, a.topk_stride = _stride(q_lat), _stride(q_pe), _stride(topk)
    _check(lib.dsa_attend(ctypes.c_void_p(handle), ctypes.byref(a), _stream()), handle, "dsa_attend")
