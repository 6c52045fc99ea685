"""The ctypes binding of libdsa that the benchmarks share: runtime/dsa.h's structs, field by field,
the calls they use, and a configuration's description from the library (dsa_config_info), so that
no benchmark encodes a head count, a dimension, a format or a byte size.

The structs must match dsa.h exactly. `python3 tests/bench/dsa_ctypes.py --check PROGRAM` compares
them with what the C compiler lays out (PROGRAM: build/tests/dsa_ctypes_layout, built from
tests/bench/dsa_ctypes_layout.c by `ninja runtime`; tests/run.sh runs the check).

Usage: `import dsa_ctypes; lib = dsa_ctypes.load(); info = dsa_ctypes.config_info(lib, name)`.
"""
import ctypes
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# dsa_cache_dtype_t
CACHE_BF16, CACHE_FP8_DS_MLA, CACHE_NVFP4_DS_MLA = 0, 1, 2


class Options(ctypes.Structure):
    """dsa_options_t"""
    _fields_ = [("size", ctypes.c_size_t), ("cache_dir", ctypes.c_char_p), ("max_tokens", ctypes.c_int64),
                ("device", ctypes.c_int), ("log_level", ctypes.c_int), ("target", ctypes.c_char_p),
                ("nccl_comm", ctypes.c_void_p), ("nccl_id", ctypes.c_void_p), ("inproc_group", ctypes.c_void_p),
                ("dcp_rank", ctypes.c_int), ("attend_tokens", ctypes.c_int64), ("index_tokens", ctypes.c_int64)]


class PrologueArgs(ctypes.Structure):
    """dsa_prologue_args_t"""
    _fields_ = [("size", ctypes.c_size_t), ("num_tokens", ctypes.c_int64)] + [
        (n, ctypes.c_void_p) for n in ("q_c", "q_c_out", "kv", "idx_k", "positions", "slot_mapping", "q_norm_w",
                                       "kv_norm_w", "idx_norm_w", "idx_norm_b", "kv_cache", "idx_cache")
    ] + [("num_cache_blocks", ctypes.c_int64), ("topk", ctypes.c_void_p), ("clear_topk", ctypes.c_int),
         ("q_c_stride", ctypes.c_int64), ("kv_stride", ctypes.c_int64), ("idx_k_stride", ctypes.c_int64)]


class AttendArgs(ctypes.Structure):
    """dsa_attend_args_t"""
    _fields_ = [("size", ctypes.c_size_t), ("num_tokens", ctypes.c_int64)] + [
        (n, ctypes.c_void_p) for n in ("q_lat", "q_pe", "positions", "topk", "req_of_token", "seq_lens", "block_table")
    ] + [("num_requests", ctypes.c_int64), ("max_blocks", ctypes.c_int64), ("kv_cache", ctypes.c_void_p),
         ("num_cache_blocks", ctypes.c_int64), ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p),
         ("q_lat_stride", ctypes.c_int64), ("q_pe_stride", ctypes.c_int64), ("topk_stride", ctypes.c_int64)]


class IndexArgs(ctypes.Structure):
    """dsa_index_args_t"""
    _fields_ = [("size", ctypes.c_size_t), ("num_tokens", ctypes.c_int64)] + [
        (n, ctypes.c_void_p) for n in ("q", "weights", "positions", "req_of_token", "seq_lens", "block_table")
    ] + [("num_requests", ctypes.c_int64), ("max_blocks", ctypes.c_int64), ("idx_cache", ctypes.c_void_p),
         ("num_cache_blocks", ctypes.c_int64), ("topk", ctypes.c_void_p), ("q_stride", ctypes.c_int64),
         ("weights_stride", ctypes.c_int64), ("topk_stride", ctypes.c_int64)]


class ConfigInfo(ctypes.Structure):
    """dsa_config_info_t"""
    _fields_ = [("size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("target", ctypes.c_char_p)] + [
        (n, ctypes.c_int) for n in ("heads", "q_lora_rank", "kv_lora_rank", "qk_nope_dim", "qk_rope_dim", "v_head_dim",
                                    "kv_dim", "block_size", "max_positions", "idx_heads", "idx_head_dim", "idx_topk",
                                    "rope_interleaved")
    ] + [("rms_norm_eps", ctypes.c_float), ("softmax_scale", ctypes.c_float)] + [
        (n, ctypes.c_int) for n in ("tp", "dcp", "interleave", "heads_local", "heads_gathered", "cache_dtype")
    ] + [("cache_dtype_name", ctypes.c_char_p)] + [
        (n, ctypes.c_int) for n in ("fp8_scale_pow2", "cache_bytes_per_token", "cache_scale_offset",
                                    "cache_rope_offset", "idx_bytes_per_token", "idx_page_bytes")
    ]


# What dsa_config_info does not report (the rope's theta and YaRN values, the indexer key's rope
# style and order, Hadamard, norm eps) is in the configuration's config.h, one of the generated files
# that libdsa embeds in the plan it exports as dsa_plan_<name> (runtime/dsa_plan.h).
PLAN_ABI = 5  # DSA_PLAN_ABI


class Source(ctypes.Structure):
    """dsa_source_t"""
    _fields_ = [("name", ctypes.c_char_p), ("text", ctypes.c_char_p), ("len", ctypes.POINTER(ctypes.c_size_t))]


class Plan(ctypes.Structure):
    """dsa_plan_t: a linked configuration's generated files"""
    _fields_ = [("abi", ctypes.c_int), ("name", ctypes.c_char_p), ("nfiles", ctypes.c_int),
                ("files", ctypes.POINTER(Source))]


# (struct name in the C program, class, whether the class covers only the struct's first fields)
STRUCTS = [("dsa_options_t", Options, False), ("dsa_prologue_args_t", PrologueArgs, False),
           ("dsa_attend_args_t", AttendArgs, False), ("dsa_index_args_t", IndexArgs, False), ("dsa_config_info_t", ConfigInfo, False),
           ("dsa_source_t", Source, False), ("dsa_plan_t", Plan, False)]


def load(path=None):
    """libdsa (build/libdsa.so by default) with the argument types of the calls the benchmarks make."""
    lib = ctypes.CDLL(path or os.path.join(ROOT, "build", "libdsa.so"))
    lib.dsa_ctx_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
    lib.dsa_ctx_destroy.argtypes = [ctypes.c_void_p]
    lib.dsa_prologue.argtypes = [ctypes.c_void_p, ctypes.POINTER(PrologueArgs), ctypes.c_void_p]
    lib.dsa_attend.argtypes = [ctypes.c_void_p, ctypes.POINTER(AttendArgs), ctypes.c_void_p]
    lib.dsa_index.argtypes = [ctypes.c_void_p, ctypes.POINTER(IndexArgs), ctypes.c_void_p]
    lib.dsa_last_error.argtypes = [ctypes.c_void_p]
    lib.dsa_last_error.restype = ctypes.c_char_p
    lib.dsa_inproc_group_create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.dsa_inproc_group_destroy.argtypes = [ctypes.c_void_p]
    lib.dsa_index_topk_splits.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    lib.dsa_index_topk_splits.restype = ctypes.c_int64
    lib.dsa_config_info.argtypes = [ctypes.c_char_p, ctypes.POINTER(ConfigInfo)]
    lib.dsa_ctx_config.argtypes = [ctypes.c_void_p, ctypes.POINTER(ConfigInfo)]
    lib.dsa_ctx_create_dir.argtypes = [ctypes.c_char_p, ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p)]
    lib.dsa_testing_attend_splits.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.dsa_testing_force_attend_splits.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_attend_cluster_merge.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_attend_merges_in_cluster.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.dsa_testing_force_index_score.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_force_index_topk.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_index_topk_cap.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_index_topk_bit_keys.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_index_score_bins.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_testing_programmatic_launch.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.dsa_configs.restype = ctypes.POINTER(ctypes.c_char_p)
    return lib


def configs(lib):
    """Names of the configurations linked into lib."""
    p, out = lib.dsa_configs(), []
    while p[len(out)] is not None:
        out.append(p[len(out)].decode())
    return out


def config_info(lib, name):
    """dsa_config_info of configuration name; exits with libdsa's message when it has none."""
    info = ConfigInfo()
    info.size = ctypes.sizeof(ConfigInfo)
    if lib.dsa_config_info(name.encode(), ctypes.byref(info)) != 0:
        sys.exit(f"dsa_config_info({name}): {lib.dsa_last_error(None).decode()}")
    return info


def config_h(lib, name):
    """The text of configuration name's config.h as libdsa embeds it (for what dsa_config_info lacks)."""
    plan = Plan.in_dll(lib, "dsa_plan_" + re.sub(r"[^A-Za-z0-9]", "_", name))
    if plan.abi != PLAN_ABI or plan.name.decode() != name:
        sys.exit(f"dsa_plan_{name}: plan ABI {plan.abi}, this binding knows {PLAN_ABI}")
    for i in range(plan.nfiles):
        if plan.files[i].name == b"config.h":
            return plan.files[i].text.decode()
    sys.exit(f"dsa_plan_{name} carries no config.h")


def config_define(text, macro):
    """The number of `#define MACRO value` in config.h text (a trailing f of a float literal dropped)."""
    m = re.search(r"^#define " + re.escape(macro) + r" (\S+)", text, re.M)
    if not m:
        sys.exit(f"config.h has no {macro}")
    return float(m.group(1).rstrip("f"))


def check(program):
    """Compares every struct here with the C layout that program prints; returns the differences."""
    out = subprocess.run([program], check=True, capture_output=True, text=True).stdout.split("\n")
    c = {}
    for line in out:
        w = line.split()
        if len(w) == 3 and w[0] == "size":
            c[w[1]] = {"size": int(w[2]), "fields": []}
        elif len(w) == 4 and w[0] == "field":
            c[w[1]]["fields"].append((w[2], int(w[3].split(":")[0]), int(w[3].split(":")[1])))
        elif len(w) == 2 and w[0] == "plan_abi" and int(w[1]) != PLAN_ABI:
            return [f"DSA_PLAN_ABI is {w[1]}, this binding knows {PLAN_ABI}"]
    bad = []
    for name, cls, prefix in STRUCTS:
        if name not in c:
            bad.append(f"{name}: not printed by {program}")
            continue
        py = [(f, getattr(cls, f).offset, getattr(cls, f).size) for f, _ in cls._fields_]
        cf = c[name]["fields"][:len(py)] if prefix else c[name]["fields"]
        if py != cf:
            bad.append(f"{name}: fields (name, offset, size) differ:\n  C:      {cf}\n  ctypes: {py}")
        if not prefix and ctypes.sizeof(cls) != c[name]["size"]:
            bad.append(f"{name}: {ctypes.sizeof(cls)} bytes in ctypes, {c[name]['size']} in C")
    return bad


def check_configs(lib):
    """Reads every linked configuration as the benchmarks do (dsa_config_info, the plan's config.h)
    and compares the two; returns the differences."""
    bad = []
    names = configs(lib)
    if not names:
        bad.append("libdsa lists no configuration")
    for name in names:
        info, h = config_info(lib, name), config_h(lib, name)
        want = {"DSA_HEADS_LOCAL": info.heads_local, "DSA_KV_DIM": info.kv_dim, "DSA_IDX_TOPK": info.idx_topk,
                "DSA_BLOCK_SIZE": info.block_size, "DSA_CACHE_DTYPE": info.cache_dtype, "DSA_DCP": info.dcp,
                "DSA_CACHE_BYTES_PER_TOKEN": info.cache_bytes_per_token, "DSA_IDX_PAGE_BYTES": info.idx_page_bytes,
                "DSA_CACHE_ROPE_OFFSET": info.cache_rope_offset, "DSA_Q_LORA_RANK": info.q_lora_rank}
        for macro, value in want.items():
            if config_define(h, macro) != value:
                bad.append(f"{name}: {macro} is {config_define(h, macro)} in config.h, {value} from dsa_config_info")
        if info.name.decode() != name or ctypes.c_float(config_define(h, "DSA_SOFTMAX_SCALE")).value != info.softmax_scale:
            bad.append(f"{name}: dsa_config_info reports {info.name.decode()}, scale {info.softmax_scale}")
        for macro in ("DSA_ROPE_THETA", "DSA_IDX_ROPE_INTERLEAVED", "DSA_IDX_ROPE_FIRST", "DSA_IDX_HADAMARD",
                      "DSA_IDX_NORM_EPS"):
            config_define(h, macro)  # exits when absent
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--check":
        sys.exit("usage: dsa_ctypes.py --check PROGRAM")
    problems = check(sys.argv[2])
    if not problems:  # the layout is right: read every configuration through it
        problems = check_configs(load())
    for p in problems:
        print(f"FAIL {p}")
    print(f"{'FAIL' if problems else 'ok  '} ctypes structs of tests/bench/dsa_ctypes.py against runtime/dsa.h, "
          f"and every configuration read through them")
    sys.exit(1 if problems else 0)
