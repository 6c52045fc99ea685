"""Argument checks for libdsa's per-layer calls (runtime/dsa.h: dsa_prologue, dsa_index, dsa_attend),
in Python, before any pointer reaches the library.

A tensor is anything with __dlpack__ / __dlpack_device__ (torch, CuPy, JAX) or the buffer protocol
(numpy); it is described through dsagen._dsa.describe without a copy. Each check_* function takes
the configuration's info (dsagen.ConfigInfo, e.g. Context.info) and the call's tensors as keyword
arguments, and returns a dict of what the C call needs: num_tokens (and num_requests, max_blocks,
num_cache_blocks), each tensor's data address (None for an absent optional one) and the row strides
in elements. Every failure is a ValueError naming the argument and the expected value:

    shape      "q_c: expected shape (T, 256) with T = 4, got (4, 255)"
    dtype      "q_c: expected dtype bfloat16, got float32"
    device     "q_c: expected a CUDA tensor, got cpu"
    stride     "q_c: expected a row stride that is a multiple of 8 elements, got 260"
               "q_c_out: expected a dense tensor (strides (256, 1)), got strides (512, 1)"
    alignment  "q_c: expected a 16-byte aligned address, got one 2 bytes past a boundary"

Checks run in that order per argument, arguments in the order of the C struct.

bfloat16: numpy has no bfloat16, so a numpy array of dtype uint16 passes as bf16 bits (numpy is how
the CPU tests build arguments); a DLPack bfloat16 (torch.bfloat16) passes everywhere; any other 16-bit
type does not. Byte tensors (the caches) are uint8 (torch: cache.view(torch.uint8) is free).

device: "cuda" (the default) for the real calls; "cpu" checks everything else, for tests and dry
runs on a machine without a GPU. All tensors must be on the same device id, and on device_index
when it is given (a context's device: "q_c: expected a tensor on cuda:0 (the context's device), got
cuda:1").

A torch tensor is read from its own attributes, not through DLPack: torch's __dlpack__ may order
streams (an event on the current stream), which a CUDA graph being captured must not see. These
checks are the reference for dsagen.ops, whose fast path accepts a subset of what they accept and
asks them for the message when it does not accept a call.
"""
from . import _dsa

_KDLCPU, _KDLCUDA = 1, 2
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                 13: "cuda_managed", 14: "oneapi"}
# (DLPack code, bits) -> name; codes: 0 int, 1 uint, 2 float, 4 bfloat
_DTYPES = {"bfloat16": (4, 16), "float32": (2, 32), "int32": (0, 32), "int64": (0, 64), "uint8": (1, 8)}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}
_DTYPE_NAMES.update({(2, 16): "float16", (2, 64): "float64", (1, 16): "uint16", (0, 16): "int16", (0, 8): "int8",
                     (1, 32): "uint32", (1, 64): "uint64", (6, 8): "bool", (1, 1): "bool"})


class Tensor:
    """What a DLPack or buffer-protocol array is: ptr (data address), shape, strides (elements),
    dtype (name), device (name) and device_id, and whether it is a numpy array."""

    __slots__ = ("name", "ptr", "shape", "strides", "dtype", "itemsize", "device", "device_id", "is_numpy",
                 "writable")

    def __init__(self, name, obj):
        if _is_torch(obj):
            self._from_torch(name, obj)
            return
        try:
            ptr, shape, strides, (code, bits, lanes), (dev, dev_id), self.writable = _dsa.describe(obj)
        except TypeError:
            raise ValueError(f"{name}: expected a tensor (an object with __dlpack__), got {type(obj).__name__}") \
                from None
        self.name, self.ptr, self.shape, self.strides = name, ptr, tuple(shape), tuple(strides)
        self.dtype = _DTYPE_NAMES.get((code, bits), f"dlpack({code}, {bits})") if lanes == 1 else "vector"
        self.itemsize = max(bits // 8, 1)
        self.device, self.device_id = _DEVICE_NAMES.get(dev, f"dlpack device {dev}"), dev_id
        self.is_numpy = type(obj).__module__ == "numpy"

    def _from_torch(self, name, t):
        self.name, self.ptr, self.shape, self.strides = name, t.data_ptr(), tuple(t.shape), tuple(t.stride())
        self.dtype = str(t.dtype).replace("torch.", "")
        self.itemsize = t.element_size()
        dev = t.device
        self.device, self.device_id = dev.type, dev.index if dev.index is not None else 0
        self.is_numpy = False
        self.writable = True  # torch has no read-only tensors


def _is_torch(obj):
    """Whether obj is a torch.Tensor (or a subclass), without importing torch."""
    return any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in type(obj).__mro__)


def dtype_matches(t, want):
    """Whether Tensor t has dtype want ("bfloat16", "float32", ...). numpy's uint16 is bfloat16's bits."""
    if want == "bfloat16" and t.is_numpy and t.dtype == "uint16":
        return True
    return t.dtype == want


class _Checker:
    def __init__(self, info, device, device_index=None):
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device: expected 'cuda' or 'cpu', got {device!r}")
        self.info, self.device, self.device_id, self.out = info, device, device_index, {}
        self.fixed = device_index is not None

    def tensor(self, name, obj, shape, dtype, align, dense=True, stride_mult=None, what=None, output=False):
        """Checks one tensor. shape: the expected shape; dense: every stride the dense one (else the outer
        stride free, at least the dense one, the rest dense); stride_mult: the outer stride's multiple;
        align: bytes; output: the call writes it, so it may not be read-only. Returns the outer stride in
        elements."""
        t = Tensor(name, obj)
        if output and not t.writable:
            raise ValueError(f"{name}: expected a writable tensor (the call writes it), got a read-only one")
        if t.shape != tuple(shape):
            raise ValueError(f"{name}: expected shape {_shape(shape)}{what or ''}, got {_shape(t.shape)}")
        if not dtype_matches(t, dtype):
            raise ValueError(f"{name}: expected dtype {dtype}, got {t.dtype}")
        if t.device != self.device:
            raise ValueError(f"{name}: expected a {'CUDA' if self.device == 'cuda' else 'CPU'} tensor, got {t.device}")
        if self.device_id is None:
            self.device_id = t.device_id
        elif t.device_id != self.device_id and self.fixed:
            raise ValueError(f"{name}: expected a tensor on {self.device}:{self.device_id} (the context's device), "
                             f"got {t.device}:{t.device_id}")
        elif t.device_id != self.device_id:
            raise ValueError(f"{name}: expected device {self.device}:{self.device_id} (the other tensors'), "
                             f"got {t.device}:{t.device_id}")
        want = _dense(shape)
        got = t.strides
        rows = shape[0] if shape else 0
        # size-1 and empty dimensions' strides are meaningless (torch and numpy vary them)
        same = all(g == w or n <= 1 for g, w, n in zip(got, want, shape))
        if dense or len(shape) == 1:
            if not same:
                raise ValueError(f"{name}: expected a dense tensor (strides {tuple(want)}), got strides {got}")
            stride = want[0] if want else 1
        else:
            inner_ok = all(g == w or n <= 1 for g, w, n in zip(got[1:], want[1:], shape[1:]))
            stride = got[0] if rows > 1 else want[0]
            if not inner_ok or stride < want[0]:
                raise ValueError(f"{name}: expected dense rows (strides (>= {want[0]}, {', '.join(map(str, want[1:]))}))"
                                 f", got strides {got}")
            if stride_mult and stride % stride_mult:
                raise ValueError(f"{name}: expected a row stride that is a multiple of {stride_mult} elements, "
                                 f"got {stride}")
        if t.ptr % align and _numel(shape):
            raise ValueError(f"{name}: expected a {align}-byte aligned address, got one {t.ptr % align} bytes past "
                             "a boundary")
        self.out[name] = t.ptr
        return stride

    def absent(self, name):
        self.out[name] = None


def _shape(s):
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def _dense(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _rows(name, obj, ndim_min=1):
    """The first dimension of a tensor argument that defines a count (num_tokens, ...)."""
    t = Tensor(name, obj)
    if len(t.shape) < ndim_min:
        raise ValueError(f"{name}: expected at least {ndim_min} dimension(s), got shape {_shape(t.shape)}")
    return t.shape


def check_prologue(info, *, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache,
                   topk=None, clear_topk=False, idx_k=None, idx_norm_w=None, idx_norm_b=None, idx_cache=None,
                   device="cuda", device_index=None):
    """dsa_prologue's tensors (dsa_prologue_args_t). T is q_c's first dimension, num_cache_blocks
    kv_cache's. idx_k, idx_norm_w, idx_norm_b and idx_cache go together (an indexer layer); topk is
    needed with clear_topk."""
    c = _Checker(info, device, device_index)
    g = info
    T = _rows("q_c", q_c)[0]
    tw = f" with T = {T}"
    c.out["num_tokens"] = T
    c.out["q_c_stride"] = c.tensor("q_c", q_c, (T, g.q_lora_rank), "bfloat16", 16, dense=False, stride_mult=8, what=tw)
    c.tensor("q_c_out", q_c_out, (T, g.q_lora_rank), "bfloat16", 16, what=tw, output=True)
    c.out["kv_stride"] = c.tensor("kv", kv, (T, g.kv_dim), "bfloat16", 16, dense=False, stride_mult=8, what=tw)
    if idx_k is not None:
        for n, v in (("idx_norm_w", idx_norm_w), ("idx_norm_b", idx_norm_b), ("idx_cache", idx_cache)):
            if v is None:
                raise ValueError(f"{n}: expected a tensor (idx_k is given), got None")
        c.out["idx_k_stride"] = c.tensor("idx_k", idx_k, (T, g.idx_head_dim), "bfloat16", 2, dense=False, what=tw)
    else:
        c.absent("idx_k")
        c.out["idx_k_stride"] = 0
    c.tensor("positions", positions, (T,), "int64", 8, what=tw)
    c.tensor("slot_mapping", slot_mapping, (T,), "int64", 8, what=tw)
    c.tensor("q_norm_w", q_norm_w, (g.q_lora_rank,), "bfloat16", 16)
    c.tensor("kv_norm_w", kv_norm_w, (g.kv_lora_rank,), "bfloat16", 16)
    if idx_k is not None:
        c.tensor("idx_norm_w", idx_norm_w, (g.idx_head_dim,), "bfloat16", 2)
        c.tensor("idx_norm_b", idx_norm_b, (g.idx_head_dim,), "bfloat16", 2)
    else:
        c.absent("idx_norm_w")
        c.absent("idx_norm_b")
    N = _rows("kv_cache", kv_cache)[0]
    c.out["num_cache_blocks"] = N
    c.tensor("kv_cache", kv_cache, (N, g.block_size, g.cache_bytes_per_token), "uint8", 16,
             what=f" with num_cache_blocks = {N}", output=True)
    if idx_k is not None:
        c.tensor("idx_cache", idx_cache, (N, g.idx_page_bytes), "uint8", 16, what=f" with num_cache_blocks = {N}",
                 output=True)
    else:
        c.absent("idx_cache")
    if clear_topk:
        if topk is None:
            raise ValueError("topk: expected a tensor (clear_topk is set), got None")
        c.tensor("topk", topk, (T, g.idx_topk), "int32", 16, what=tw, output=True)
    elif topk is not None:
        c.tensor("topk", topk, (T, g.idx_topk), "int32", 4, what=tw)
    else:
        c.absent("topk")
    c.out["clear_topk"] = 1 if clear_topk else 0
    return c.out


def _requests(c, req_of_token, seq_lens, block_table, T, tw):
    c.tensor("req_of_token", req_of_token, (T,), "int32", 4, what=tw)
    R = _rows("seq_lens", seq_lens)[0]
    c.tensor("seq_lens", seq_lens, (R,), "int32", 4)
    bt = _rows("block_table", block_table, 2)
    c.tensor("block_table", block_table, (R, bt[1]), "int32", 4, what=f" with num_requests = {R}")
    c.out["num_requests"], c.out["max_blocks"] = R, bt[1]


def check_index(info, *, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk,
                device="cuda", device_index=None):
    """dsa_index's tensors (dsa_index_args_t). T is q's first dimension, num_requests seq_lens',
    max_blocks block_table's second, num_cache_blocks idx_cache's first."""
    c = _Checker(info, device, device_index)
    g = info
    T = _rows("q", q)[0]
    tw = f" with T = {T}"
    c.out["num_tokens"] = T
    c.out["q_stride"] = c.tensor("q", q, (T, g.idx_heads, g.idx_head_dim), "bfloat16", 16, dense=False,
                                 stride_mult=8, what=tw)
    c.out["weights_stride"] = c.tensor("weights", weights, (T, g.idx_heads), "float32", 4, dense=False, what=tw)
    c.tensor("positions", positions, (T,), "int64", 8, what=tw)
    _requests(c, req_of_token, seq_lens, block_table, T, tw)
    N = _rows("idx_cache", idx_cache)[0]
    c.out["num_cache_blocks"] = N
    c.tensor("idx_cache", idx_cache, (N, g.idx_page_bytes), "uint8", 16, what=f" with num_cache_blocks = {N}")
    c.out["topk_stride"] = c.tensor("topk", topk, (T, g.idx_topk), "int32", 4, dense=False, what=tw, output=True)
    return c.out


def check_attend(info, *, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out,
                 lse=None, device="cuda", device_index=None):
    """dsa_attend's tensors (dsa_attend_args_t). T is q_lat's first dimension, num_requests seq_lens',
    max_blocks block_table's second, num_cache_blocks kv_cache's first. lse is optional."""
    c = _Checker(info, device, device_index)
    g = info
    T = _rows("q_lat", q_lat)[0]
    tw = f" with T = {T}"
    c.out["num_tokens"] = T
    c.out["q_lat_stride"] = c.tensor("q_lat", q_lat, (T, g.heads_local, g.kv_lora_rank), "bfloat16", 2,
                                     dense=False, what=tw)
    c.out["q_pe_stride"] = c.tensor("q_pe", q_pe, (T, g.heads_local, g.qk_rope_dim), "bfloat16", 2, dense=False,
                                    what=tw)
    c.tensor("positions", positions, (T,), "int64", 8, what=tw)
    c.out["topk_stride"] = c.tensor("topk", topk, (T, g.idx_topk), "int32", 4, dense=False, what=tw)
    _requests(c, req_of_token, seq_lens, block_table, T, tw)
    N = _rows("kv_cache", kv_cache)[0]
    c.out["num_cache_blocks"] = N
    c.tensor("kv_cache", kv_cache, (N, g.block_size, g.cache_bytes_per_token), "uint8", 16,
             what=f" with num_cache_blocks = {N}")
    c.tensor("out", out, (T, g.heads_local, g.kv_lora_rank), "bfloat16", 4, what=tw, output=True)
    if lse is not None:
        c.tensor("lse", lse, (T, g.heads_local), "float32", 4, what=tw, output=True)
    else:
        c.absent("lse")
    return c.out
