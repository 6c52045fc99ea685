"""dsagen: libdsa (runtime/dsa.h) from Python, through the nanobind extension dsagen._dsa.

    import dsagen
    dsagen.configs()                          # the configurations linked into libdsa
    dsagen.config_info("glm5.2_tp4_dcp4_i1_fp8_ds_mla").heads_local
    with dsagen.Context("glm5.2_tp4_dcp4_i1_fp8_ds_mla", device=0) as ctx:
        ctx.info.kv_dim

Library failures raise DsaError, carrying the result code's name and dsa_last_error's text.
dsagen.checks validates the per-layer calls' tensors (any DLPack array) against a configuration.
The per-layer calls themselves (torch custom ops, CUDA graphs) are not here yet (issue 16).
"""
import dataclasses

from . import _dsa
from . import checks  # noqa: F401  (dsagen.checks)

__all__ = ["configs", "config_info", "ConfigInfo", "Context", "DsaError", "RESULT_NAMES", "checks"]

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


def _result(r):
    """A binding's result: the value, or DsaError from a (code, message) failure."""
    if isinstance(r, tuple):
        raise DsaError(*r)
    return r


def configs():
    """The names of the configurations linked into libdsa (dsa_configs)."""
    return list(_dsa.configs())


def config_info(name):
    """The ConfigInfo of a linked configuration (dsa_config_info); DsaError when there is none of that name."""
    if not isinstance(name, str):
        raise TypeError(f"config_info: expected a configuration name (str), got {type(name).__name__}")
    return ConfigInfo(**_result(_dsa.config_info(name)))


class Context:
    """A libdsa context: every kernel of one configuration compiled (or loaded from the JIT cache) for
    one device. config names a linked configuration (dsa_ctx_create); or dir names a generated
    configuration's folder (dsa_ctx_create_dir) and config is None. The keyword arguments are
    dsa_options_t's: index_tokens and attend_tokens 0 take libdsa's defaults; cache_dir None takes
    $DSA_CACHE_DIR or ~/.cache/dsagen, "" disables the cache. Raises DsaError when creation fails
    (no CUDA driver or device: DSA_ERROR_CUDA). Use close(), or the context as a context manager."""

    def __init__(self, config=None, device=0, dir=None, index_tokens=0, attend_tokens=0, max_tokens=16384,
                 cache_dir=None):
        if (config is None) == (dir is None):
            raise ValueError("Context: give exactly one of config (a linked configuration's name) and dir")
        self._ctx = None
        self._ctx = _result(_dsa.ctx_create(config, None if dir is None else str(dir), int(device), int(max_tokens),
                                            int(index_tokens), int(attend_tokens),
                                            None if cache_dir is None else str(cache_dir)))
        self.device = int(device)
        self.info = ConfigInfo(**_result(self._ctx.info()))

    @property
    def closed(self):
        return self._ctx is None or self._ctx.closed

    def close(self):
        """Destroys the libdsa context (dsa_ctx_destroy); later calls on it raise. Idempotent."""
        if self._ctx is not None:
            self._ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<dsagen.Context {self.info.name} device {self.device}{' closed' if self.closed else ''}>"
