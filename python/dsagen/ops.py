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

Checks: a fast path accepts the usual call (exact shapes and dtypes, the context's device, dense or
row-strided as dsa.h allows, aligned); anything else goes to dsagen.checks, which raises the
ValueError naming the argument and the expected value (its docstring lists them), or accepts a
call the fast path is too strict for (a size-1 dimension with an odd stride). libdsa's own
failures raise dsagen.DsaError with dsa_last_error's text.
"""
from typing import Optional

import torch

from . import DsaError, _OPEN, checks

_BF16, _F32, _I32, _I64, _U8 = torch.bfloat16, torch.float32, torch.int32, torch.int64, torch.uint8

try:  # the stream's address without building a torch.cuda.Stream (what Inductor's own code calls)
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older torch
    def _raw_stream(device):
        return torch.cuda.current_stream(device).cuda_stream


class Geometry:
    """What the fast checks compare against, from a context's ConfigInfo, computed once."""

    def __init__(self, g):
        self.q, self.kvd, self.kvl, self.d = g.q_lora_rank, g.kv_dim, g.kv_lora_rank, g.idx_head_dim
        self.bs, self.bpt, self.page, self.k = g.block_size, g.cache_bytes_per_token, g.idx_page_bytes, g.idx_topk
        self.ih, self.h, self.r = g.idx_heads, g.heads_local, g.qk_rope_dim
        self.norm_q, self.norm_kv, self.norm_idx = (self.q,), (self.kvl,), (self.d,)


def _dense(t, shape, dtype, dev, align):
    """t has exactly shape and dtype, lies on cuda:dev, is dense, and its address is a multiple of align."""
    return (t.shape == shape and t.dtype is dtype and t.get_device() == dev and t.is_contiguous()
            and t.data_ptr() % align == 0)


def _strided(t, shape, dtype, dev, align, inner, row, mult):
    """Like _dense for a tensor whose first stride may exceed its row (row elements, a multiple of
    mult) while the inner strides are inner: that stride, or -1 when the fast path does not accept t."""
    if t.shape != shape or t.dtype is not dtype or t.get_device() != dev or t.data_ptr() % align:
        return -1
    st = t.stride()
    if st[1:] != inner:
        return -1
    s = st[0] if shape[0] > 1 else row
    return s if s >= row and s % mult == 0 else -1


def live(handle):
    """The open Context of a handle (the ops' first argument)."""
    c = _OPEN.get(handle)
    if c is None:
        raise ValueError(f"ctx: expected the handle of an open dsagen.Context, got {handle:#x} (closed, or never one)")
    if c._ops is None:
        c._torch()  # its Geometry
    return c


def _failed(c, rc):
    if c.closed:
        return ValueError(f"ctx: expected an open dsagen.Context, got {c!r}")
    return DsaError(rc, c._ctx.last_error())


def _ptr(d, name):
    return d[name] or 0


# ---- stage A ----

def prologue_eager(c, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk=None,
                   clear_topk=False, idx_k=None, idx_norm_w=None, idx_norm_b=None, idx_cache=None):
    """dsa_prologue on c (a Context) now, on the current stream."""
    g, dev, a = c.geometry, c.device, None
    try:
        T, N = q_c.shape[0], kv_cache.shape[0]
        if T > 0 and N > 0:
            sq = _strided(q_c, (T, g.q), _BF16, dev, 16, (1,), g.q, 8)
            skv = _strided(kv, (T, g.kvd), _BF16, dev, 16, (1,), g.kvd, 8)
            ok = (sq >= 0 and skv >= 0 and _dense(q_c_out, (T, g.q), _BF16, dev, 16)
                  and _dense(positions, (T,), _I64, dev, 8) and _dense(slot_mapping, (T,), _I64, dev, 8)
                  and _dense(q_norm_w, g.norm_q, _BF16, dev, 16) and _dense(kv_norm_w, g.norm_kv, _BF16, dev, 16)
                  and _dense(kv_cache, (N, g.bs, g.bpt), _U8, dev, 16))
            if idx_k is None:
                sk, ik = 0, (0, 0, 0, 0)
            else:
                sk = _strided(idx_k, (T, g.d), _BF16, dev, 2, (1,), g.d, 1)
                ok = (ok and sk >= 0 and _dense(idx_norm_w, g.norm_idx, _BF16, dev, 2)
                      and _dense(idx_norm_b, g.norm_idx, _BF16, dev, 2)
                      and _dense(idx_cache, (N, g.page), _U8, dev, 16))
                ik = (idx_k.data_ptr(), idx_norm_w.data_ptr(), idx_norm_b.data_ptr(), idx_cache.data_ptr())
            if topk is None:
                ok = ok and not clear_topk
                tk = 0
            else:
                ok = ok and _dense(topk, (T, g.k), _I32, dev, 16 if clear_topk else 4)
                tk = topk.data_ptr()
            if ok:
                a = (q_c.data_ptr(), q_c_out.data_ptr(), kv.data_ptr(), ik[0], positions.data_ptr(),
                     slot_mapping.data_ptr(), q_norm_w.data_ptr(), kv_norm_w.data_ptr(), ik[1], ik[2],
                     kv_cache.data_ptr(), ik[3], tk, 1 if clear_topk else 0, T, N, sq, skv, sk)
    except (AttributeError, TypeError, IndexError):  # not a tensor, too few dimensions: the checks say which
        a = None
    if a is None:
        d = checks.check_prologue(c.info, q_c=q_c, q_c_out=q_c_out, kv=kv, positions=positions,
                                  slot_mapping=slot_mapping, q_norm_w=q_norm_w, kv_norm_w=kv_norm_w,
                                  kv_cache=kv_cache, topk=topk, clear_topk=clear_topk, idx_k=idx_k,
                                  idx_norm_w=idx_norm_w, idx_norm_b=idx_norm_b, idx_cache=idx_cache,
                                  device_index=dev)
        a = (d["q_c"], d["q_c_out"], d["kv"], _ptr(d, "idx_k"), d["positions"], d["slot_mapping"], d["q_norm_w"],
             d["kv_norm_w"], _ptr(d, "idx_norm_w"), _ptr(d, "idx_norm_b"), d["kv_cache"], _ptr(d, "idx_cache"),
             _ptr(d, "topk"), d["clear_topk"], d["num_tokens"], d["num_cache_blocks"], d["q_c_stride"],
             d["kv_stride"], d["idx_k_stride"])
    rc = c._ctx.prologue(*a, _raw_stream(dev))
    if rc:
        raise _failed(c, rc)


# ---- stage B ----

def index_eager(c, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    """dsa_index on c now, on the current stream."""
    g, dev, a = c.geometry, c.device, None
    try:
        T, R, MB, N = q.shape[0], seq_lens.shape[0], block_table.shape[1], idx_cache.shape[0]
        if T > 0 and R > 0 and MB > 0 and N > 0:
            sq = _strided(q, (T, g.ih, g.d), _BF16, dev, 16, (g.d, 1), g.ih * g.d, 8)
            sw = _strided(weights, (T, g.ih), _F32, dev, 4, (1,), g.ih, 1)
            st = _strided(topk, (T, g.k), _I32, dev, 4, (1,), g.k, 1)
            if (sq >= 0 and sw >= 0 and st >= 0 and _dense(positions, (T,), _I64, dev, 8)
                    and _dense(req_of_token, (T,), _I32, dev, 4) and _dense(seq_lens, (R,), _I32, dev, 4)
                    and _dense(block_table, (R, MB), _I32, dev, 4) and _dense(idx_cache, (N, g.page), _U8, dev, 16)):
                a = (q.data_ptr(), weights.data_ptr(), positions.data_ptr(), req_of_token.data_ptr(),
                     seq_lens.data_ptr(), block_table.data_ptr(), idx_cache.data_ptr(), topk.data_ptr(), T, R, MB, N,
                     sq, sw, st)
    except (AttributeError, TypeError, IndexError):
        a = None
    if a is None:
        d = checks.check_index(c.info, q=q, weights=weights, positions=positions, req_of_token=req_of_token,
                               seq_lens=seq_lens, block_table=block_table, idx_cache=idx_cache, topk=topk,
                               device_index=dev)
        a = (d["q"], d["weights"], d["positions"], d["req_of_token"], d["seq_lens"], d["block_table"],
             d["idx_cache"], d["topk"], d["num_tokens"], d["num_requests"], d["max_blocks"], d["num_cache_blocks"],
             d["q_stride"], d["weights_stride"], d["topk_stride"])
    rc = c._ctx.index(*a, _raw_stream(dev))
    if rc:
        raise _failed(c, rc)


# ---- stage C ----

def attend_eager(c, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse=None):
    """dsa_attend on c now, on the current stream."""
    g, dev, a = c.geometry, c.device, None
    try:
        T, R, MB, N = q_lat.shape[0], seq_lens.shape[0], block_table.shape[1], kv_cache.shape[0]
        if T > 0 and R > 0 and MB > 0 and N > 0:
            sl = _strided(q_lat, (T, g.h, g.kvl), _BF16, dev, 2, (g.kvl, 1), g.h * g.kvl, 1)
            sp = _strided(q_pe, (T, g.h, g.r), _BF16, dev, 2, (g.r, 1), g.h * g.r, 1)
            st = _strided(topk, (T, g.k), _I32, dev, 4, (1,), g.k, 1)
            ok = (sl >= 0 and sp >= 0 and st >= 0 and _dense(positions, (T,), _I64, dev, 8)
                  and _dense(req_of_token, (T,), _I32, dev, 4) and _dense(seq_lens, (R,), _I32, dev, 4)
                  and _dense(block_table, (R, MB), _I32, dev, 4) and _dense(kv_cache, (N, g.bs, g.bpt), _U8, dev, 16)
                  and _dense(out, (T, g.h, g.kvl), _BF16, dev, 4)
                  and (lse is None or _dense(lse, (T, g.h), _F32, dev, 4)))
            if ok:
                a = (q_lat.data_ptr(), q_pe.data_ptr(), positions.data_ptr(), topk.data_ptr(), req_of_token.data_ptr(),
                     seq_lens.data_ptr(), block_table.data_ptr(), kv_cache.data_ptr(), out.data_ptr(),
                     0 if lse is None else lse.data_ptr(), T, R, MB, N, sl, sp, st)
    except (AttributeError, TypeError, IndexError):
        a = None
    if a is None:
        d = checks.check_attend(c.info, q_lat=q_lat, q_pe=q_pe, positions=positions, topk=topk,
                                req_of_token=req_of_token, seq_lens=seq_lens, block_table=block_table,
                                kv_cache=kv_cache, out=out, lse=lse, device_index=dev)
        a = (d["q_lat"], d["q_pe"], d["positions"], d["topk"], d["req_of_token"], d["seq_lens"], d["block_table"],
             d["kv_cache"], d["out"], _ptr(d, "lse"), d["num_tokens"], d["num_requests"], d["max_blocks"],
             d["num_cache_blocks"], d["q_lat_stride"], d["q_pe_stride"], d["topk_stride"])
    rc = c._ctx.attend(*a, _raw_stream(dev))
    if rc:
        raise _failed(c, rc)


# ---- the custom ops: schemas from the annotations, writes declared in mutates_args ----

@torch.library.custom_op("dsagen::prologue", mutates_args=("q_c_out", "kv_cache", "topk", "idx_cache"))
def prologue_op(ctx: int, q_c: torch.Tensor, q_c_out: torch.Tensor, kv: torch.Tensor, positions: torch.Tensor,
                slot_mapping: torch.Tensor, q_norm_w: torch.Tensor, kv_norm_w: torch.Tensor, kv_cache: torch.Tensor,
                topk: Optional[torch.Tensor], clear_topk: bool, idx_k: Optional[torch.Tensor],
                idx_norm_w: Optional[torch.Tensor], idx_norm_b: Optional[torch.Tensor],
                idx_cache: Optional[torch.Tensor]) -> None:
    prologue_eager(live(ctx), q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                   clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)


@prologue_op.register_fake
def _prologue_fake(ctx, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk, clear_topk,
                   idx_k, idx_norm_w, idx_norm_b, idx_cache):
    return None  # writes only into its arguments


@torch.library.custom_op("dsagen::index", mutates_args=("topk",))
def index_op(ctx: int, q: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor, req_of_token: torch.Tensor,
             seq_lens: torch.Tensor, block_table: torch.Tensor, idx_cache: torch.Tensor, topk: torch.Tensor) -> None:
    index_eager(live(ctx), q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)


@index_op.register_fake
def _index_fake(ctx, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    return None


@torch.library.custom_op("dsagen::attend", mutates_args=("out", "lse"))
def attend_op(ctx: int, q_lat: torch.Tensor, q_pe: torch.Tensor, positions: torch.Tensor, topk: torch.Tensor,
              req_of_token: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor, kv_cache: torch.Tensor,
              out: torch.Tensor, lse: Optional[torch.Tensor]) -> None:
    attend_eager(live(ctx), q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)


@attend_op.register_fake
def _attend_fake(ctx, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse):
    return None


# ---- what Context's methods call: the op under torch.compile, the direct path in eager mode ----

def prologue(c, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk, clear_topk, idx_k,
             idx_norm_w, idx_norm_b, idx_cache):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.prologue(c.handle, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w,
                                  kv_cache, topk, clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)
    else:
        prologue_eager(c, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk,
                       clear_topk, idx_k, idx_norm_w, idx_norm_b, idx_cache)


def index(c, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.index(c.handle, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)
    else:
        index_eager(c, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)


def attend(c, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse):
    if torch.compiler.is_compiling():
        torch.ops.dsagen.attend(c.handle, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table,
                                kv_cache, out, lse)
    else:
        attend_eager(c, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)
