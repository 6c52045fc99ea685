"""CPU tests of the Python package dsagen (python/dsagen, built by `ninja python` into build/python):
the configuration queries against libdsa read through tests/bench/dsa_ctypes.py, Context creation
without a GPU, and every argument check's exception and message, on numpy arrays.
Prints FAIL lines and ends with "N passed, N failed"; tests/run.sh runs it."""
import os
import pathlib
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))

import dsagen  # noqa: E402
from dsagen import checks  # noqa: E402
import dsa_ctypes  # noqa: E402

passed = failed = 0


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}")


def raises(exc, msg, fn, *args, **kw):
    """fn(...) raises exactly exc with exactly msg."""
    try:
        fn(*args, **kw)
    except Exception as e:  # noqa: BLE001
        ok(type(e) is exc and str(e) == msg, f"want {exc.__name__}({msg!r}), got {type(e).__name__}({str(e)!r})")
        return e
    ok(False, f"want {exc.__name__}({msg!r}), nothing raised")
    return None


def aligned(shape, dtype, offset=0, row_pad=0):
    """A zeroed numpy array whose data starts offset bytes past a 64-byte boundary; row_pad extra elements
    per row (a strided view of a wider array)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    full = shape[:-1] + (shape[-1] + row_pad,) if shape else shape
    n = int(np.prod(full)) * dtype.itemsize
    buf = np.zeros(n + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    a = buf[start:start + n].view(dtype).reshape(full)
    return a[..., :shape[-1]] if row_pad else a


BF16 = np.uint16  # numpy has no bfloat16: uint16 arrays are bf16 bits (dsagen.checks)

# ---- configurations ----
lib = dsa_ctypes.load(os.path.join(ROOT, "build", "libdsa.so"))
names = dsagen.configs()
ok(names == dsa_ctypes.configs(lib), f"configs(): {names}")
ok("glm5.2_tp4_dcp4_i1_fp8_ds_mla" in names and "tiny_tp4_dcp1_i1_bf16" in names, "configs() lists shipped configs")
fields = [f for f, _ in dsa_ctypes.ConfigInfo._fields_ if f != "size"]
ok(sorted(fields) == sorted(f.name for f in __import__("dataclasses").fields(dsagen.ConfigInfo)),
   "ConfigInfo has every dsa_config_info_t field")
for n in names:
    a = dsagen.config_info(n)
    b = dsa_ctypes.config_info(lib, n)
    for f in fields:
        want = getattr(b, f)
        want = want.decode() if isinstance(want, bytes) else want
        if isinstance(want, float):
            good = abs(getattr(a, f) - want) <= 1e-6 * abs(want)
        else:
            good = getattr(a, f) == want
        if not good:
            ok(False, f"config_info({n}).{f}: {getattr(a, f)!r} != {want!r}")
            break
    else:
        ok(True, "")
info = dsagen.config_info("tiny_tp4_dcp1_i1_bf16")
try:
    info.heads = 3
    ok(False, "ConfigInfo is frozen")
except Exception:  # noqa: BLE001
    ok(True, "")
e = raises(dsagen.DsaError, "DSA_ERROR_INVALID_ARGUMENT (invalid argument): dsa_config_info: no configuration named "
           "'nope' in this library (dsa_configs() lists them)", dsagen.config_info, "nope")
ok(isinstance(e, RuntimeError) and e.code == 1 and e.code_name == "DSA_ERROR_INVALID_ARGUMENT", "DsaError fields")

# ---- contexts without a GPU: DsaError, not a crash ----
has_gpu = os.path.exists("/dev/nvidia0")
if not has_gpu:
    # the loader's own words after "(" vary by machine: the message is exact up to them
    want = "DSA_ERROR_CUDA (CUDA error): dsa_ctx_create: no CUDA driver on this machine (cannot load libcuda.so.1"
    try:
        dsagen.Context("tiny_tp4_dcp1_i1_bf16", cache_dir="")
        ok(False, "Context without a GPU did not raise")
    except dsagen.DsaError as e1:
        ok(str(e1).startswith(want) and e1.code_name == "DSA_ERROR_CUDA" and isinstance(e1, RuntimeError),
           f"Context without a GPU: want {want}..., got {e1}")
    with_dir = os.path.join(ROOT, "out", "tiny_tp4_dcp1_i1_bf16")
    try:
        dsagen.Context(dir=with_dir, cache_dir="")
        ok(False, "Context(dir=...) without a GPU did not raise")
    except dsagen.DsaError as e2:
        ok(e2.code_name == "DSA_ERROR_CUDA" and "no CUDA driver" in str(e2), f"Context(dir=...): {e2}")
e = raises(dsagen.DsaError, "DSA_ERROR_INVALID_ARGUMENT (invalid argument): dsa_ctx_create: no configuration named "
           "'nope' in this library (dsa_configs() lists them)", dsagen.Context, "nope")
raises(ValueError, "Context: give exactly one of config (a linked configuration's name) and dir", dsagen.Context)

# ---- argument checks ----
g = info
T, N, R, MB = 4, 3, 2, 5


def prologue(**over):
    a = dict(q_c=aligned((T, g.q_lora_rank), BF16), q_c_out=aligned((T, g.q_lora_rank), BF16),
             kv=aligned((T, g.kv_dim), BF16), positions=aligned((T,), np.int64), slot_mapping=aligned((T,), np.int64),
             q_norm_w=aligned((g.q_lora_rank,), BF16), kv_norm_w=aligned((g.kv_lora_rank,), BF16),
             kv_cache=aligned((N, g.block_size, g.cache_bytes_per_token), np.uint8),
             topk=aligned((T, g.idx_topk), np.int32), clear_topk=True, idx_k=aligned((T, g.idx_head_dim), BF16),
             idx_norm_w=aligned((g.idx_head_dim,), BF16), idx_norm_b=aligned((g.idx_head_dim,), BF16),
             idx_cache=aligned((N, g.idx_page_bytes), np.uint8), device="cpu")
    a.update(over)
    return checks.check_prologue(g, **a)


def index(**over):
    a = dict(q=aligned((T, g.idx_heads, g.idx_head_dim), BF16), weights=aligned((T, g.idx_heads), np.float32),
             positions=aligned((T,), np.int64), req_of_token=aligned((T,), np.int32), seq_lens=aligned((R,), np.int32),
             block_table=aligned((R, MB), np.int32), idx_cache=aligned((N, g.idx_page_bytes), np.uint8),
             topk=aligned((T, g.idx_topk), np.int32), device="cpu")
    a.update(over)
    return checks.check_index(g, **a)


def attend(**over):
    a = dict(q_lat=aligned((T, g.heads_local, g.kv_lora_rank), BF16),
             q_pe=aligned((T, g.heads_local, g.qk_rope_dim), BF16), positions=aligned((T,), np.int64),
             topk=aligned((T, g.idx_topk), np.int32), req_of_token=aligned((T,), np.int32),
             seq_lens=aligned((R,), np.int32), block_table=aligned((R, MB), np.int32),
             kv_cache=aligned((N, g.block_size, g.cache_bytes_per_token), np.uint8),
             out=aligned((T, g.heads_local, g.kv_lora_rank), BF16), lse=aligned((T, g.heads_local), np.float32),
             device="cpu")
    a.update(over)
    return checks.check_attend(g, **a)


# valid sets pass and give what the C call needs
r = prologue()
ok(r["num_tokens"] == T and r["num_cache_blocks"] == N and r["q_c_stride"] == g.q_lora_rank
   and r["kv_stride"] == g.kv_dim and r["clear_topk"] == 1 and r["q_c"] % 16 == 0, f"check_prologue: {r}")
r = prologue(q_c=aligned((T, g.q_lora_rank), BF16, row_pad=8), idx_k=None, idx_norm_w=None, idx_norm_b=None,
             idx_cache=None, topk=None, clear_topk=False)
ok(r["q_c_stride"] == g.q_lora_rank + 8 and r["idx_k"] is None and r["topk"] is None, f"check_prologue strided: {r}")
r = index()
ok(r["num_tokens"] == T and r["num_requests"] == R and r["max_blocks"] == MB and r["topk_stride"] == g.idx_topk,
   f"check_index: {r}")
r = attend(lse=None, q_lat=aligned((T, g.heads_local, g.kv_lora_rank), BF16, row_pad=0))
ok(r["num_tokens"] == T and r["lse"] is None and r["q_lat_stride"] == g.heads_local * g.kv_lora_rank,
   f"check_attend: {r}")

# device: numpy arrays are on the CPU; the real calls want CUDA
raises(ValueError, "q_c: expected a CUDA tensor, got cpu", prologue, device="cuda")
raises(ValueError, "q: expected a CUDA tensor, got cpu", index, device="cuda")
raises(ValueError, "q_lat: expected a CUDA tensor, got cpu", attend, device="cuda")
raises(ValueError, "device: expected 'cuda' or 'cpu', got 'gpu'", attend, device="gpu")

# shape
raises(ValueError, f"q_c_out: expected shape ({T}, {g.q_lora_rank}) with T = {T}, got ({T}, {g.q_lora_rank - 1})",
       prologue, q_c_out=aligned((T, g.q_lora_rank - 1), BF16))
raises(ValueError, f"kv: expected shape ({T}, {g.kv_dim}) with T = {T}, got ({T + 1}, {g.kv_dim})",
       prologue, kv=aligned((T + 1, g.kv_dim), BF16))
raises(ValueError, f"q_norm_w: expected shape ({g.q_lora_rank},), got ({g.q_lora_rank}, 1)",
       prologue, q_norm_w=aligned((g.q_lora_rank, 1), BF16))
raises(ValueError, f"idx_cache: expected shape ({N}, {g.idx_page_bytes}) with num_cache_blocks = {N}, "
       f"got ({N}, {g.idx_page_bytes + 1})", prologue, idx_cache=aligned((N, g.idx_page_bytes + 1), np.uint8))
raises(ValueError, f"q: expected shape ({T}, {g.idx_heads}, {g.idx_head_dim}) with T = {T}, "
       f"got ({T}, {g.idx_heads * g.idx_head_dim})", index, q=aligned((T, g.idx_heads * g.idx_head_dim), BF16))
raises(ValueError, f"block_table: expected shape ({R}, {MB + 1}) with num_requests = {R}, got ({R + 1}, {MB + 1})",
       index, block_table=aligned((R + 1, MB + 1), np.int32))
raises(ValueError, f"out: expected shape ({T}, {g.heads_local}, {g.kv_lora_rank}) with T = {T}, "
       f"got ({T}, {g.heads}, {g.kv_lora_rank})", attend, out=aligned((T, g.heads, g.kv_lora_rank), BF16))
raises(ValueError, "block_table: expected at least 2 dimension(s), got shape (10,)",
       attend, block_table=aligned((10,), np.int32))

# dtype (bf16 is numpy's uint16; float16 is not bf16)
raises(ValueError, "q_c: expected dtype bfloat16, got float32", prologue, q_c=aligned((T, g.q_lora_rank), np.float32))
raises(ValueError, "kv: expected dtype bfloat16, got float16", prologue, kv=aligned((T, g.kv_dim), np.float16))
raises(ValueError, "positions: expected dtype int64, got int32", prologue, positions=aligned((T,), np.int32))
raises(ValueError, "weights: expected dtype float32, got float64", index, weights=aligned((T, g.idx_heads), np.float64))
raises(ValueError, "kv_cache: expected dtype uint8, got int8",
       attend, kv_cache=aligned((N, g.block_size, g.cache_bytes_per_token), np.int8))
raises(ValueError, "topk: expected dtype int32, got int64", attend, topk=aligned((T, g.idx_topk), np.int64))
raises(ValueError, "q_c: expected a tensor (an object with __dlpack__), got list", prologue, q_c=[[0] * 4] * 4)

# strides: row strides of q_c, kv, q multiples of 8; dense where dsa.h has no stride
raises(ValueError, "q_c: expected a row stride that is a multiple of 8 elements, got 260",
       prologue, q_c=aligned((T, g.q_lora_rank), BF16, row_pad=4))
raises(ValueError, f"kv: expected a row stride that is a multiple of 8 elements, got {g.kv_dim + 2}",
       prologue, kv=aligned((T, g.kv_dim), BF16, row_pad=2))
qw = g.idx_heads * g.idx_head_dim
raises(ValueError, f"q: expected a row stride that is a multiple of 8 elements, got {qw + 4}",
       index, q=np.lib.stride_tricks.as_strided(aligned((T, qw + 4), BF16), (T, g.idx_heads, g.idx_head_dim),
                                                ((qw + 4) * 2, g.idx_head_dim * 2, 2)))
raises(ValueError, f"q_c_out: expected a dense tensor (strides ({g.q_lora_rank}, 1)), got strides ({2 * g.q_lora_rank}, 1)",
       prologue, q_c_out=aligned((2 * T, g.q_lora_rank), BF16)[::2])
raises(ValueError, f"q_c: expected dense rows (strides (>= {g.q_lora_rank}, 1)), got strides ({2 * g.q_lora_rank}, 2)",
       prologue, q_c=aligned((T, 2 * g.q_lora_rank), BF16)[:, ::2])
raises(ValueError, "positions: expected a dense tensor (strides (1,)), got strides (2,)",
       attend, positions=aligned((2 * T,), np.int64)[::2])
raises(ValueError, f"q_lat: expected dense rows (strides (>= {g.heads_local * g.kv_lora_rank}, {g.kv_lora_rank}, 1)), "
       f"got strides ({g.heads_local * g.kv_lora_rank}, 1, {g.heads_local})",
       attend, q_lat=aligned((T, g.kv_lora_rank, g.heads_local), BF16).transpose(0, 2, 1))
raises(ValueError, f"topk: expected dense rows (strides (>= {g.idx_topk}, 1)), got strides (1, {T})",
       index, topk=aligned((g.idx_topk, T), np.int32).T)
r = attend(topk=aligned((T, g.idx_topk), np.int32, row_pad=3))
ok(r["topk_stride"] == g.idx_topk + 3, f"attend topk_stride: {r['topk_stride']}")

# alignment: 16 bytes for q_c, q_c_out, kv, the norms' weights, the caches, topk (cleared), q; element otherwise
raises(ValueError, "q_c: expected a 16-byte aligned address, got one 2 bytes past a boundary",
       prologue, q_c=aligned((T, g.q_lora_rank), BF16, offset=2))
raises(ValueError, "kv_norm_w: expected a 16-byte aligned address, got one 8 bytes past a boundary",
       prologue, kv_norm_w=aligned((g.kv_lora_rank,), BF16, offset=8))
raises(ValueError, "kv_cache: expected a 16-byte aligned address, got one 1 bytes past a boundary",
       prologue, kv_cache=aligned((N, g.block_size, g.cache_bytes_per_token), np.uint8, offset=1))
raises(ValueError, "topk: expected a 16-byte aligned address, got one 4 bytes past a boundary",
       prologue, topk=aligned((T, g.idx_topk), np.int32, offset=4))
r = prologue(topk=aligned((T, g.idx_topk), np.int32, offset=4), clear_topk=False)
ok(r["clear_topk"] == 0, "topk need not be 16-byte aligned without clear_topk")
raises(ValueError, "q: expected a 16-byte aligned address, got one 8 bytes past a boundary",
       index, q=aligned((T, g.idx_heads, g.idx_head_dim), BF16, offset=8))
raises(ValueError, "idx_cache: expected a 16-byte aligned address, got one 4 bytes past a boundary",
       index, idx_cache=aligned((N, g.idx_page_bytes), np.uint8, offset=4))
raises(ValueError, "out: expected a 4-byte aligned address, got one 2 bytes past a boundary",
       attend, out=aligned((T, g.heads_local, g.kv_lora_rank), BF16, offset=2))
raises(ValueError, "positions: expected a 8-byte aligned address, got one 4 bytes past a boundary",
       attend, positions=aligned((T,), np.int64, offset=4))
# a misaligned view by slicing: q_c[:, 1:] of a wider array starts 2 bytes in
wide = aligned((T, g.q_lora_rank + 8), BF16)
raises(ValueError, "q_c: expected a 16-byte aligned address, got one 2 bytes past a boundary",
       prologue, q_c=wide[:, 1:g.q_lora_rank + 1])

# a call's outputs may not be read-only (a kernel would write them); its inputs may
def read_only(a):
    a.flags.writeable = False
    return a


for fn, name, shape, dtype in ((attend, "out", (T, g.heads_local, g.kv_lora_rank), BF16),
                               (attend, "lse", (T, g.heads_local), np.float32),
                               (index, "topk", (T, g.idx_topk), np.int32),
                               (prologue, "q_c_out", (T, g.q_lora_rank), BF16),
                               (prologue, "kv_cache", (N, g.block_size, g.cache_bytes_per_token), np.uint8),
                               (prologue, "idx_cache", (N, g.idx_page_bytes), np.uint8),
                               (prologue, "topk", (T, g.idx_topk), np.int32)):
    raises(ValueError, f"{name}: expected a writable tensor (the call writes it), got a read-only one", fn,
           **{name: read_only(aligned(shape, dtype))})
ok(attend(q_lat=read_only(aligned((T, g.heads_local, g.kv_lora_rank), BF16)))["num_tokens"] == T,
   "a read-only input is accepted")

# optional arguments that go together
raises(ValueError, "idx_cache: expected a tensor (idx_k is given), got None", prologue, idx_cache=None)
raises(ValueError, "topk: expected a tensor (clear_topk is set), got None", prologue, topk=None)

# a context's device: every tensor on it (device_index), named in the message
raises(ValueError, "q_c: expected a tensor on cpu:1 (the context's device), got cpu:0", prologue, device_index=1)
ok(attend(device_index=0)["num_tokens"] == T, "device_index 0 accepts tensors on device 0")

# the torch side is optional: importing dsagen imports no torch (CI has none)
ok("torch" not in sys.modules, "import dsagen imported torch")
raises(ValueError, "device: expected a CUDA device (an int, 'cuda:N' or a torch.device), got 'cpu'",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", device="cpu")
ok(dsagen._device_index("cuda:3") == 3 and dsagen._device_index(2) == 2, "device as 'cuda:N' and int")
# what would reach libdsa cut or wrapped is refused before, naming the argument
raises(ValueError, "device: expected a CUDA device ordinal, 0 to 2^31 - 1, got 2147483648",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", device=2**31)
raises(ValueError, "device: expected a CUDA device ordinal, 0 to 2^31 - 1, got 4294967296",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", device="cuda:4294967296")
raises(ValueError, "device: expected a CUDA device ordinal, 0 to 2^31 - 1, got -1",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", device=-1)
raises(ValueError, "max_tokens: expected 0 to 2^63 - 1, got 9223372036854775808",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", max_tokens=2**63)
raises(TypeError, "index_tokens: expected an int, got float", dsagen.Context, "tiny_tp4_dcp1_i1_bf16",
       index_tokens=1.5)
raises(TypeError, "config: expected a str, got int", dsagen.Context, 5)
# a NUL would end the C string early: another name or path than the one given
raises(ValueError, "config_info: contains a NUL character: 'deepseek_v32_tp1_dcp1_i1_fp8_ds_mla\\x00garbage'",
       dsagen.config_info, "deepseek_v32_tp1_dcp1_i1_fp8_ds_mla\0garbage")
raises(ValueError, "config: contains a NUL character: 'tiny_tp4_dcp1_i1_bf16\\x00junk'",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16\0junk")
raises(ValueError, "dir: contains a NUL character: 'out/tiny_tp4_dcp1_i1_bf16\\x00zzz'",
       dsagen.Context, dir="out/tiny_tp4_dcp1_i1_bf16\0zzz")
raises(ValueError, "cache_dir: contains a NUL character: '/tmp/a\\x00b'",
       dsagen.Context, "tiny_tp4_dcp1_i1_bf16", cache_dir="/tmp/a\0b")
# a folder's dcp, read before a DCP group's collective (Context(dir=..., dcp=group) checks the group's size)
# libdsa's own reading of the folder (dsa_config_info_dir): the same ConfigInfo as the linked copy
for n in ("glm5.2_tp4_dcp4_i1_fp8_ds_mla", "tiny_tp4_dcp1_i1_bf16"):
    d = dsagen.config_info(dir=pathlib.Path("out") / n)
    ok(d == dsagen.config_info(n), f"config_info(dir=out/{n}): {d} != config_info({n!r})")
ok(dsagen.config_info(dir="out/glm5.2_tp4_dcp4_i1_fp8_ds_mla").dcp == 4, "the dcp of a folder")
raises(dsagen.DsaError, "DSA_ERROR_INVALID_ARGUMENT (invalid argument): dsa_config_info_dir: "
       "/nonexistent/plan.txt: No such file or directory", dsagen.config_info, dir="/nonexistent")
raises(ValueError, "config_info: give exactly one of name (a linked configuration's name) and dir",
       dsagen.config_info)
raises(ValueError, "config_info: give exactly one of name (a linked configuration's name) and dir",
       dsagen.config_info, "tiny_tp4_dcp1_i1_bf16", dir="out/tiny_tp4_dcp1_i1_bf16")
raises(ValueError, "config_info: dir: contains a NUL character: 'out\\x00x'", dsagen.config_info, dir="out\0x")

# dsagen.nccl_unique_id: 128 bytes from the NCCL libdsa opens, or DsaError saying why there is none
try:
    uid = dsagen.nccl_unique_id()
    ok(isinstance(uid, bytes) and len(uid) == 128 and any(uid), f"nccl_unique_id: {uid!r}")
    ok(uid != dsagen.nccl_unique_id(), "two ncclUniqueIds are the same")
except dsagen.DsaError as e3:
    ok(e3.code_name == "DSA_ERROR_NCCL" and e3.detail.startswith("dsa_nccl_unique_id: "), f"nccl_unique_id: {e3}")
    print(f"SKIPPED: nccl_unique_id here: {e3}")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
