"""dsagen.ops: libdsa's per-layer calls on torch tensors, as torch custom ops.

Three ops in the namespace dsagen, one per stage (runtime/dsa.h):

    torch.ops.dsagen.prologue(ctx, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w,
                              kv_cache, topk, clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)
    torch.ops.dsagen.index(ctx, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)
    torch.ops.dsagen.attend(ctx, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table,
                            kv_cache, out, lse)

ctx is a dsagen.Context's handle (Context.handle, an int). Each op writes only into the tensors its
schema marks as mutated (prologue: q_c_out, kv_cache, topk, idx_cache; index: topk; attend: out,
lse) and returns nothing; the fake implementation does nothing, so torch.compile(fullgraph=True)
traces a call without a graph break and functionalises the writes. The calls enqueue on
torch.cuda.current_stream() of the context's device with no allocation or synchronisation, so a
CUDA graph being captured records them.

Context.prologue / index / attend take the same tensors (keywords with defaults) and are what a
layer calls: in eager mode they check and call libdsa directly, without the dispatcher (the per-call
overhead that tests/gpu/test_torch.py measures); under torch.compile they call the ops.

Checks: a fast path in the extension (dsagen._dsa, Ctx.*_torch) reads every tensor's shape, dtype,
device, strides and address in C++ and accepts the usual call (exact shapes and dtypes, the
context's device, dense or row-strided as dsa.h allows, aligned); anything else goes to
dsagen.checks, which raises the ValueError naming the argument and the expected value (its
docstring lists them), or accepts a call the fast path is too strict for (a size-1 dimension with
an odd stride). libdsa's own failures raise dsagen.DsaError with dsa_last_error's text.

Registration: each op is defined on a torch.library.Library from its schema (inferred from the
annotated function, as torch.library.custom_op would) with its Python kernel for
CompositeExplicitAutograd, and a fake implementation. torch.library.custom_op would add its own
Python layers around every call (about 17 us for an empty op of ten tensors on a CPU where a plain
Library op costs about 5.6 us); the schema, the mutations and torch.compile's view of the op are
the same.
"""
from typing import Optional

import torch

from . import DsaError, _OPEN, _dsa, checks

NOT_ACCEPTED = -1  # a fast path's answer (python/dsagen/_dsa.cpp): not a call it takes; ask dsagen.checks

try:  # the stream's address without building a torch.cuda.Stream (what Inductor's own code calls)
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(device):
        return torch.cuda.current_stream(device).cuda_stream

try:  # the fast path's tensor reader, built against this torch (`ninja python-torch`); optional
    from . import _torch_view
    _READER = _torch_view.read
except ImportError:
    _READER = None  # the fast path reads Python attributes instead, about 0.4 us a tensor

# what the extension's fast path reads tensors against (once per process)
_dsa.torch_setup(torch.Tensor, torch.bfloat16, torch.float32, torch.int32, torch.int64, torch.uint8, _raw_stream,
                 _READER)


def live(handle):
    """The open Context of a handle (the ops' first argument)."""
    ref = _OPEN.get(handle)
    c = ref() if ref is not None else None
    if c is None:
        raise ValueError(f"ctx: expected the handle of an open dsagen.Context, got {handle:#x} (closed, or never one)")
    return c


def _failed(c, rc):
    if c.closed:
        return ValueError(f"ctx: expected an open dsagen.Context, got {c!r}")
    return DsaError(rc, c._ctx.last_error())


def _ptr(d, name):
    return d[name] or 0


# ---- stage A ----
# Each stage: <stage>_eager calls the extension's fast path and, when it returns nonzero, _<stage>_slow:
# NOT_ACCEPTED sends the tensors through dsagen.checks (the exact message, or the call on addresses);
# a dsa_result_t raises.

def prologue_eager(c, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk=None,
                   clear_topk=False, idx_k=None, idx_norm_w=None, idx_norm_b=None, idx_cache=None):
    """dsa_prologue on c (a Context) now, on the current stream."""
    rc = c._ctx.prologue_torch(q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                               clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)
    if rc:
        _prologue_slow(c, rc, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                       clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)


def _prologue_slow(c, rc, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk, clear_topk,
                   idx_k, idx_norm_w, idx_norm_b, idx_cache):
    if rc == NOT_ACCEPTED:
        d = checks.check_prologue(c.info, q_c=q_c, q_c_out=q_c_out, kv=kv, positions=positions,
                                  slot_mapping=slot_mapping, q_norm_w=q_norm_w, kv_norm_w=kv_norm_w,
                                  kv_cache=kv_cache, topk=topk, clear_topk=clear_topk, idx_k=idx_k,
                                  idx_norm_w=idx_norm_w, idx_norm_b=idx_norm_b, idx_cache=idx_cache,
                                  device_index=c.device)
        rc = c._ctx.prologue(d["q_c"], d["q_c_out"], d["kv"], _ptr(d, "idx_k"), d["positions"], d["slot_mapping"],
                             d["q_norm_w"], d["kv_norm_w"], _ptr(d, "idx_norm_w"), _ptr(d, "idx_norm_b"),
                             d["kv_cache"], _ptr(d, "idx_cache"), _ptr(d, "topk"), d["clear_topk"], d["num_tokens"],
                             d["num_cache_blocks"], d["q_c_stride"], d["kv_stride"], d["idx_k_stride"],
                             _raw_stream(c.device))
    if rc:
        raise _failed(c, rc)


# ---- stage B ----

def index_eager(c, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    """dsa_index on c now, on the current stream."""
    rc = c._ctx.index_torch(q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)
    if rc:
        _index_slow(c, rc, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)


def _index_slow(c, rc, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    if rc == NOT_ACCEPTED:
        d = checks.check_index(c.info, q=q, weights=weights, positions=positions, req_of_token=req_of_token,
                               seq_lens=seq_lens, block_table=block_table, idx_cache=idx_cache, topk=topk,
                               device_index=c.device)
        rc = c._ctx.index(d["q"], d["weights"], d["positions"], d["req_of_token"], d["seq_lens"], d["block_table"],
                          d["idx_cache"], d["topk"], d["num_tokens"], d["num_requests"], d["max_blocks"],
                          d["num_cache_blocks"], d["q_stride"], d["weights_stride"], d["topk_stride"],
                          _raw_stream(c.device))
    if rc:
        raise _failed(c, rc)


# ---- stage C ----

def attend_eager(c, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse=None):
    """dsa_attend on c now, on the current stream."""
    rc = c._ctx.attend_torch(q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)
    if rc:
        _attend_slow(c, rc, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)


def _attend_slow(c, rc, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse):
    if rc == NOT_ACCEPTED:
        d = checks.check_attend(c.info, q_lat=q_lat, q_pe=q_pe, positions=positions, topk=topk,
                                req_of_token=req_of_token, seq_lens=seq_lens, block_table=block_table,
                                kv_cache=kv_cache, out=out, lse=lse, device_index=c.device)
        rc = c._ctx.attend(d["q_lat"], d["q_pe"], d["positions"], d["topk"], d["req_of_token"], d["seq_lens"],
                           d["block_table"], d["kv_cache"], d["out"], _ptr(d, "lse"), d["num_tokens"],
                           d["num_requests"], d["max_blocks"], d["num_cache_blocks"], d["q_lat_stride"],
                           d["q_pe_stride"], d["topk_stride"], _raw_stream(c.device))
    if rc:
        raise _failed(c, rc)


# ---- the custom ops: schemas from the annotations (torch.library.infer_schema, as custom_op infers
# them), writes declared in mutates_args; the kernel for every device (CompositeExplicitAutograd), so
# a CPU tensor gets the checks' message; the fake implementation does nothing ----

_LIB = torch.library.Library("dsagen", "DEF")  # the definitions live as long as this object: the process


def _define(fn, mutates_args):
    """Defines dsagen::<name> (fn's name less "_op") from fn's annotations with fn as its kernel, and
    an empty fake implementation (every op writes only into its arguments)."""
    name = fn.__name__[:-len("_op")]
    _LIB.define(name + torch.library.infer_schema(fn, mutates_args=mutates_args))
    _LIB.impl(name, fn, "CompositeExplicitAutograd")
    torch.library.register_fake(f"dsagen::{name}", lambda *args: None, lib=_LIB)
    return fn


def prologue_op(ctx: int, q_c: torch.Tensor, q_c_out: torch.Tensor, kv: torch.Tensor, positions: torch.Tensor,
                slot_mapping: torch.Tensor, q_norm_w: torch.Tensor, kv_norm_w: torch.Tensor, kv_cache: torch.Tensor,
                topk: Optional[torch.Tensor], clear_topk: bool, idx_k: Optional[torch.Tensor],
                idx_norm_w: Optional[torch.Tensor], idx_norm_b: Optional[torch.Tensor],
                idx_cache: Optional[torch.Tensor]) -> None:
    prologue_eager(live(ctx), q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                   clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)


def index_op(ctx: int, q: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor, req_of_token: torch.Tensor,
             seq_lens: torch.Tensor, block_table: torch.Tensor, idx_cache: torch.Tensor, topk: torch.Tensor) -> None:
    index_eager(live(ctx), q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)


def attend_op(ctx: int, q_lat: torch.Tensor, q_pe: torch.Tensor, positions: torch.Tensor, topk: torch.Tensor,
              req_of_token: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor, kv_cache: torch.Tensor,
              out: torch.Tensor, lse: Optional[torch.Tensor]) -> None:
    attend_eager(live(ctx), q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)


_define(prologue_op, ("q_c_out", "kv_cache", "topk", "idx_cache"))
_define(index_op, ("topk",))
_define(attend_op, ("out", "lse"))


# ---- what Context's methods call: the op under torch.compile, the fast path in eager mode ----

def prologue(c, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk, clear_topk, idx_k,
             idx_norm_w, idx_norm_b, idx_cache):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.prologue(c.handle, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w,
                                  kv_cache, topk, clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)
        return
    rc = c._ctx.prologue_torch(q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                               clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)
    if rc:
        _prologue_slow(c, rc, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                       clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)


def index(c, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.index(c.handle, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)
        return
    rc = c._ctx.index_torch(q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)
    if rc:
        _index_slow(c, rc, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)


def attend(c, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.attend(c.handle, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table,
                                kv_cache, out, lse)
        return
    rc = c._ctx.attend_torch(q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)
    if rc:
        _attend_slow(c, rc, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)
