"""dsagen: libdsa (runtime/dsa.h) from Python, through the nanobind extension dsagen._dsa.

    import dsagen
    dsagen.configs()                          # the configurations linked into libdsa
    dsagen.config_info("glm5.2_tp4_dcp4_i1_fp8_ds_mla").heads_local
    with dsagen.Context("glm5.2_tp4_dcp1_i1_fp8_ds_mla", device=0) as ctx:  # dcp > 1 also takes dcp=
        ctx.info.kv_dim

Library failures raise DsaError, carrying the result code's name and dsa_last_error's text.
dsagen.checks validates the per-layer calls' tensors (any DLPack array) against a configuration.

The per-layer calls run on torch tensors: Context.prologue, Context.index and Context.attend, on
torch.cuda.current_stream(), and the torch custom ops torch.ops.dsagen.{prologue,index,attend}
behind them (dsagen.ops; torch.compile and CUDA graphs). torch is imported only by those: this
package imports, queries configurations and checks arguments without it.
"""
import dataclasses
import os
import sys
import weakref

from . import _dsa
from . import checks  # noqa: F401  (dsagen.checks)

__all__ = ["configs", "config_info", "ConfigInfo", "Context", "DsaError", "RESULT_NAMES", "checks", "nccl_unique_id"]

# dsa_result_t, by value
RESULT_NAMES = ("DSA_SUCCESS", "DSA_ERROR_INVALID_ARGUMENT", "DSA_ERROR_CUDA", "DSA_ERROR_NVRTC", "DSA_ERROR_NCCL",
                "DSA_ERROR_OUT_OF_MEMORY", "DSA_ERROR_CACHE", "DSA_ERROR_UNSUPPORTED", "DSA_ERROR_INTERNAL")


class DsaError(RuntimeError):
    """A libdsa call failed. code: the dsa_result_t value; code_name: its name (e.g. "DSA_ERROR_CUDA");
    detail: dsa_last_error's text. str(): "DSA_ERROR_CUDA (CUDA error): <detail>"."""

    def __init__(self, code, detail):
        self.code = code
        self.code_name = RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else f"dsa_result_t {code}"
        self.detail = detail
        super().__init__(f"{self.code_name} ({_dsa.strerror(code)}): {detail}")


@dataclasses.dataclass(frozen=True)
class ConfigInfo:
    """dsa_config_info_t, field by field (runtime/dsa.h says what each is)."""
    name: str
    target: str
    heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_dim: int
    qk_rope_dim: int
    v_head_dim: int
    kv_dim: int
    block_size: int
    max_positions: int
    idx_heads: int
    idx_head_dim: int
    idx_topk: int
    rope_interleaved: int
    rms_norm_eps: float
    softmax_scale: float
    tp: int
    dcp: int
    interleave: int
    heads_local: int
    heads_gathered: int
    cache_dtype: int
    cache_dtype_name: str
    fp8_scale_pow2: int
    cache_bytes_per_token: int
    cache_scale_offset: int
    cache_rope_offset: int
    idx_bytes_per_token: int
    idx_page_bytes: int


# Open contexts by handle (dsa_ctx_t's address): the custom ops receive the handle, an int, since
# a torch op's schema cannot carry a Python object. Weak references: a context nobody holds is
# destroyed, and its entry removed. A plain dict of weakref.ref, not a WeakValueDictionary, whose
# get() is Python code on every op call.
_OPEN = {}


def _register(ctx):
    handle = ctx.handle

    def gone(ref):
        if _OPEN.get(handle) is ref:
            del _OPEN[handle]
    _OPEN[handle] = weakref.ref(ctx, gone)


def _result(r):
    """A binding's result: the value, or DsaError from a (code, message) failure."""
    if isinstance(r, tuple):
        raise DsaError(*r)
    return r


def configs():
    """The names of the configurations linked into libdsa (dsa_configs)."""
    return list(_dsa.configs())


def _text(where, value):
    """value, a str that libdsa takes as a C string: a NUL inside would end it early (another name or
    path than the one given), so it is refused."""
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected a str, got {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{where}: contains a NUL character: {value!r}")
    return value


def config_info(name=None, *, dir=None):
    """The ConfigInfo of a linked configuration (dsa_config_info), or with dir of a generated
    configuration's folder (dsa_config_info_dir: its plan read and checked as Context(dir=) reads it,
    nothing compiled). DsaError when there is no configuration of that name or the folder's plan is
    refused."""
    if (name is None) == (dir is None):
        raise ValueError("config_info: give exactly one of name (a linked configuration's name) and dir")
    if dir is not None:
        dir = _text("config_info: dir", os.fspath(dir) if isinstance(dir, os.PathLike) else dir)
        return ConfigInfo(**_result(_dsa.config_info_dir(dir)))
    if not isinstance(name, str):
        raise TypeError(f"config_info: expected a configuration name (str), got {type(name).__name__}")
    return ConfigInfo(**_result(_dsa.config_info(_text("config_info", name))))


def nccl_unique_id():
    """A new ncclUniqueId (128 bytes) from the NCCL libdsa opens (dsa_nccl_unique_id); Context(dcp=...)
    makes and shares one itself. DsaError (DSA_ERROR_NCCL) when NCCL cannot be opened."""
    return _result(_dsa.nccl_unique_id())


def _device_index(device):
    """A CUDA device ordinal from an int, "cuda:N", "cuda" (torch's current device) or a torch.device."""
    if isinstance(device, int) and not isinstance(device, bool):
        if not 0 <= device < 2**31:
            raise ValueError(f"device: expected a CUDA device ordinal, 0 to 2^31 - 1, got {device}")
        return device
    text = str(device)
    if text.startswith("cuda:") and text[5:].isdigit():
        return _device_index(int(text[5:]))
    if text == "cuda":
        import torch
        return torch.cuda.current_device()
    raise ValueError(f"device: expected a CUDA device (an int, 'cuda:N' or a torch.device), got {device!r}")


def _count(where, value):
    """A token count of dsa_options_t: an int, 0 to 2^63 - 1 (libdsa checks its own bounds)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{where}: expected an int, got {type(value).__name__}")
    if not 0 <= value < 2**63:
        raise ValueError(f"{where}: expected 0 to 2^63 - 1, got {value}")
    return value


def _dcp_id(group, device, want):
    """The ncclUniqueId of a DCP group over a torch.distributed process group: rank 0 of the group
    makes it (dsa_nccl_unique_id) and broadcasts it (or its failure, so that no rank waits for an id
    that never comes). want: the configuration's dcp (of a linked one, or of a folder's plan.txt).
    Returns (id, rank in the group)."""
    import torch.distributed as dist
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    if size != want:
        raise ValueError(f"dcp: expected a process group of {want} ranks (the configuration's dcp), got {size}")
    box = [_dsa.nccl_unique_id() if rank == 0 else None]
    kw = {"device": f"cuda:{device}"} if dist.get_backend(group) == "nccl" else {}
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0), group=group, **kw)
    if isinstance(box[0], tuple):
        raise DsaError(*box[0])
    return box[0], rank


class Context:
    """A libdsa context: every kernel of one configuration compiled (or loaded from the JIT cache) for
    one device. config names a linked configuration (dsa_ctx_create); or dir names a generated
    configuration's folder (dsa_ctx_create_dir) and config is None. device: an int, "cuda:N" or a
    torch.device. dcp: None, or for a configuration with dcp > 1 the torch.distributed process group
    of its DCP ranks (every rank creates its Context with the same arguments but its own device;
    rank 0 of the group makes an ncclUniqueId, broadcasts it over the group, and libdsa creates its
    own communicator from it). The other keyword arguments are dsa_options_t's: index_tokens and
    attend_tokens 0 take libdsa's defaults; cache_dir None takes $DSA_CACHE_DIR or ~/.cache/dsagen,
    "" disables the cache. Raises DsaError when creation fails (no CUDA driver or device:
    DSA_ERROR_CUDA). Use close(), or the context as a context manager.

    handle is the context's address, the first argument of the torch.ops.dsagen ops."""

    def __init__(self, config=None, device=0, dir=None, index_tokens=0, attend_tokens=0, max_tokens=16384,
                 cache_dir=None, dcp=None):
        if (config is None) == (dir is None):
            raise ValueError("Context: give exactly one of config (a linked configuration's name) and dir")
        self._ctx = None
        self.handle = 0
        if config is not None:
            _text("config", config)
        if dir is not None:
            dir = _text("dir", os.fspath(dir) if isinstance(dir, os.PathLike) else dir)
        if cache_dir is not None:
            cache_dir = _text("cache_dir", os.fspath(cache_dir) if isinstance(cache_dir, os.PathLike) else cache_dir)
        counts = [_count(k, v) for k, v in
                  (("max_tokens", max_tokens), ("index_tokens", index_tokens), ("attend_tokens", attend_tokens))]
        device = _device_index(device)
        nccl_id, rank = None, 0
        if dcp is not None:
            want = config_info(config).dcp if config is not None else config_info(dir=dir).dcp
            if want != 1:  # a group of one at dcp 1 needs no communicator
                nccl_id, rank = _dcp_id(dcp, device, want)
        self._ctx = _result(_dsa.ctx_create(config, dir, device, *counts, cache_dir, nccl_id, rank))
        self.device = device
        self.dcp_rank = rank
        self.info = ConfigInfo(**_result(self._ctx.info()))
        self.handle = self._ctx.handle
        self._ops = None
        _register(self)
        if "torch" in sys.modules:  # torch.compile may trace a call before any eager one: import ops now
            try:
                self._torch()
            except ImportError:
                pass

    @property
    def closed(self):
        return self._ctx is None or self._ctx.closed

    def close(self):
        """Destroys the libdsa context (dsa_ctx_destroy); later calls on it raise. Idempotent. Call it
        after the device work that uses it has finished (torch.cuda.synchronize())."""
        if self._ctx is not None:
            self._ctx.close()  # RuntimeError while another thread is inside a call on it: nothing changed
            ref = _OPEN.get(self.handle)
            if ref is not None and ref() is self:  # after a close, a new context may have this address
                del _OPEN[self.handle]

    def _torch(self):
        """dsagen.ops (imports torch), once per context."""
        if self._ops is None:
            try:
                from . import ops
            except ImportError as e:
                raise ImportError(f"dsagen: the per-layer calls need torch ({e})") from e
            self._ops = ops
        return self._ops

    def prologue(self, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, *, topk=None,
                 clear_topk=False, idx_k=None, idx_norm_w=None, idx_norm_b=None, idx_cache=None):
        """Stage A (dsa_prologue) on torch tensors, on the current stream: q_c_out = RMSNorm(q_c) for every
        token; each token whose slot is this rank's written into kv_cache (and, with idx_k, its indexer key
        into idx_cache); topk's rows set to -1 with clear_topk. Shapes as runtime/dsa.h states them
        (dsagen.checks lists the checks)."""
        ops = self._ops if self._ops is not None else self._torch()
        ops.prologue(self, q_c, q_c_out, kv, positions, slot_mapping, q_norm_w, kv_norm_w, kv_cache, topk, clear_topk,
                     idx_k, idx_norm_w, idx_norm_b, idx_cache)

    def index(self, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk):
        """Stage B (dsa_index) on torch tensors, on the current stream: each row's top-k request positions
        into topk (ascending, -1 padded), the same rows on every rank of the DCP group."""
        ops = self._ops if self._ops is not None else self._torch()
        ops.index(self, q, weights, positions, req_of_token, seq_lens, block_table, idx_cache, topk)

    def attend(self, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse=None):
        """Stage C (dsa_attend) on torch tensors, on the current stream: sparse MLA of each row over its
        top-k keys (with dcp > 1: over the group, merged), into out [T, heads_local, kv_lora_rank] bf16
        and, when given, lse [T, heads_local] fp32."""
        ops = self._ops if self._ops is not None else self._torch()
        ops.attend(self, q_lat, q_pe, positions, topk, req_of_token, seq_lens, block_table, kv_cache, out, lse)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<dsagen.Context {self.info.name} device {self.device}{' closed' if self.closed else ''}>"
