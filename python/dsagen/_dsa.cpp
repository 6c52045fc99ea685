// dsagen._dsa: the nanobind extension over libdsa (runtime/dsa.h). Kept thin: the configuration
// queries, a context's life, the per-layer calls on device addresses that Python has checked
// (dsagen/ops.py), an ncclUniqueId for a DCP group, and a description of any DLPack tensor
// (zero-copy) for the argument checks in checks.py. Errors come back as values (a result code, or
// (code, message)); dsagen/__init__.py raises DsaError from them.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "dsa.h"

namespace nb = nanobind;

namespace {

nb::dict info_dict(const dsa_config_info_t &i)
{
    nb::dict d;
    d["name"] = i.name ? i.name : "";
    d["target"] = i.target ? i.target : "";
    d["heads"] = i.heads;
    d["q_lora_rank"] = i.q_lora_rank;
    d["kv_lora_rank"] = i.kv_lora_rank;
    d["qk_nope_dim"] = i.qk_nope_dim;
    d["qk_rope_dim"] = i.qk_rope_dim;
    d["v_head_dim"] = i.v_head_dim;
    d["kv_dim"] = i.kv_dim;
    d["block_size"] = i.block_size;
    d["max_positions"] = i.max_positions;
    d["idx_heads"] = i.idx_heads;
    d["idx_head_dim"] = i.idx_head_dim;
    d["idx_topk"] = i.idx_topk;
    d["rope_interleaved"] = i.rope_interleaved;
    d["rms_norm_eps"] = i.rms_norm_eps;
    d["softmax_scale"] = i.softmax_scale;
    d["tp"] = i.tp;
    d["dcp"] = i.dcp;
    d["interleave"] = i.interleave;
    d["heads_local"] = i.heads_local;
    d["heads_gathered"] = i.heads_gathered;
    d["cache_dtype"] = static_cast<int>(i.cache_dtype);
    d["cache_dtype_name"] = i.cache_dtype_name ? i.cache_dtype_name : "";
    d["fp8_scale_pow2"] = i.fp8_scale_pow2;
    d["cache_bytes_per_token"] = i.cache_bytes_per_token;
    d["cache_scale_offset"] = i.cache_scale_offset;
    d["cache_rope_offset"] = i.cache_rope_offset;
    d["idx_bytes_per_token"] = i.idx_bytes_per_token;
    d["idx_page_bytes"] = i.idx_page_bytes;
    return d;
}

// (code, text of dsa_last_error) for a failure, for DsaError
nb::tuple failure(dsa_result_t rc, dsa_ctx_t ctx)
{
    return nb::make_tuple(static_cast<int>(rc), std::string(dsa_last_error(ctx)));
}

// A Python int that is a device address, as libdsa's const pointer type (0: NULL).
template <typename T> T *addr(std::uintptr_t a) { return reinterpret_cast<T *>(a); }

class Ctx {
public:
    explicit Ctx(dsa_ctx_t c) : ctx_(c) {}
    ~Ctx() { close(); }
    Ctx(const Ctx &) = delete;
    Ctx &operator=(const Ctx &) = delete;
    void close()
    {
        dsa_ctx_destroy(ctx_);
        ctx_ = nullptr;
    }
    bool closed() const { return ctx_ == nullptr; }
    std::uintptr_t handle() const { return reinterpret_cast<std::uintptr_t>(ctx_); }
    nb::object info() const
    {
        dsa_config_info_t i{};
        i.size = sizeof i;
        dsa_result_t rc = dsa_ctx_config(ctx_, &i);
        if (rc != DSA_SUCCESS)
            return failure(rc, ctx_);
        return info_dict(i);
    }
    std::string last_error() const { return dsa_last_error(ctx_); }

    // The per-layer calls: every pointer a device address, every count and stride as dsa.h has it,
    // the stream a CUstream's address (torch's current stream). They return the dsa_result_t; on
    // failure last_error() has the text. The GIL is released around the call: with a DCP group the
    // first call sets up NCCL's connections, which waits for the other ranks. call_ns is the C
    // call's own time on the host (two clock reads), for the per-call overhead measurement.
    int prologue(std::uintptr_t q_c, std::uintptr_t q_c_out, std::uintptr_t kv, std::uintptr_t idx_k,
                 std::uintptr_t positions, std::uintptr_t slot_mapping, std::uintptr_t q_norm_w,
                 std::uintptr_t kv_norm_w, std::uintptr_t idx_norm_w, std::uintptr_t idx_norm_b,
                 std::uintptr_t kv_cache, std::uintptr_t idx_cache, std::uintptr_t topk, int clear_topk,
                 int64_t num_tokens, int64_t num_cache_blocks, int64_t q_c_stride, int64_t kv_stride,
                 int64_t idx_k_stride, std::uintptr_t stream)
    {
        dsa_prologue_args_t a{};
        a.size = sizeof a;
        a.num_tokens = num_tokens;
        a.q_c = addr<const void>(q_c);
        a.q_c_out = addr<void>(q_c_out);
        a.kv = addr<const void>(kv);
        a.idx_k = addr<const void>(idx_k);
        a.positions = addr<const int64_t>(positions);
        a.slot_mapping = addr<const int64_t>(slot_mapping);
        a.q_norm_w = addr<const void>(q_norm_w);
        a.kv_norm_w = addr<const void>(kv_norm_w);
        a.idx_norm_w = addr<const void>(idx_norm_w);
        a.idx_norm_b = addr<const void>(idx_norm_b);
        a.kv_cache = addr<void>(kv_cache);
        a.idx_cache = addr<void>(idx_cache);
        a.num_cache_blocks = num_cache_blocks;
        a.topk = addr<int32_t>(topk);
        a.clear_topk = clear_topk;
        a.q_c_stride = q_c_stride;
        a.kv_stride = kv_stride;
        a.idx_k_stride = idx_k_stride;
        return timed([&] { return dsa_prologue(ctx_, &a, addr<void>(stream)); });
    }
    int index(std::uintptr_t q, std::uintptr_t weights, std::uintptr_t positions, std::uintptr_t req_of_token,
              std::uintptr_t seq_lens, std::uintptr_t block_table, std::uintptr_t idx_cache, std::uintptr_t topk,
              int64_t num_tokens, int64_t num_requests, int64_t max_blocks, int64_t num_cache_blocks,
              int64_t q_stride, int64_t weights_stride, int64_t topk_stride, std::uintptr_t stream)
    {
        dsa_index_args_t a{};
        a.size = sizeof a;
        a.num_tokens = num_tokens;
        a.q = addr<const void>(q);
        a.weights = addr<const float>(weights);
        a.positions = addr<const int64_t>(positions);
        a.req_of_token = addr<const int32_t>(req_of_token);
        a.seq_lens = addr<const int32_t>(seq_lens);
        a.block_table = addr<const int32_t>(block_table);
        a.num_requests = num_requests;
        a.max_blocks = max_blocks;
        a.idx_cache = addr<const void>(idx_cache);
        a.num_cache_blocks = num_cache_blocks;
        a.topk = addr<int32_t>(topk);
        a.q_stride = q_stride;
        a.weights_stride = weights_stride;
        a.topk_stride = topk_stride;
        return timed([&] { return dsa_index(ctx_, &a, addr<void>(stream)); });
    }
    int attend(std::uintptr_t q_lat, std::uintptr_t q_pe, std::uintptr_t positions, std::uintptr_t topk,
               std::uintptr_t req_of_token, std::uintptr_t seq_lens, std::uintptr_t block_table,
               std::uintptr_t kv_cache, std::uintptr_t out, std::uintptr_t lse, int64_t num_tokens,
               int64_t num_requests, int64_t max_blocks, int64_t num_cache_blocks, int64_t q_lat_stride,
               int64_t q_pe_stride, int64_t topk_stride, std::uintptr_t stream)
    {
        dsa_attend_args_t a{};
        a.size = sizeof a;
        a.num_tokens = num_tokens;
        a.q_lat = addr<const void>(q_lat);
        a.q_pe = addr<const void>(q_pe);
        a.positions = addr<const int64_t>(positions);
        a.topk = addr<const int32_t>(topk);
        a.req_of_token = addr<const int32_t>(req_of_token);
        a.seq_lens = addr<const int32_t>(seq_lens);
        a.block_table = addr<const int32_t>(block_table);
        a.num_requests = num_requests;
        a.max_blocks = max_blocks;
        a.kv_cache = addr<const void>(kv_cache);
        a.num_cache_blocks = num_cache_blocks;
        a.out = addr<void>(out);
        a.lse = addr<float>(lse);
        a.q_lat_stride = q_lat_stride;
        a.q_pe_stride = q_pe_stride;
        a.topk_stride = topk_stride;
        return timed([&] { return dsa_attend(ctx_, &a, addr<void>(stream)); });
    }
    int64_t call_ns() const { return call_ns_; }

private:
    template <typename F> int timed(F call)
    {
        dsa_result_t rc;
        {
            nb::gil_scoped_release unlocked;
            auto t0 = std::chrono::steady_clock::now();
            rc = call();
            call_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                           .count();
        }
        return static_cast<int>(rc);
    }

    dsa_ctx_t ctx_;
    int64_t call_ns_ = 0;
};

} // namespace

NB_MODULE(_dsa, m)
{
    m.doc() = "libdsa through nanobind (see the dsagen package)";

    m.def("configs", [] {
        nb::list names;
        for (const char *const *p = dsa_configs(); *p; p++)
            names.append(*p);
        return names;
    });

    m.def("strerror", [](int rc) { return std::string(dsa_strerror(static_cast<dsa_result_t>(rc))); });

    // a dict of every dsa_config_info_t field, or (code, message) on failure
    m.def("config_info", [](const std::string &name) -> nb::object {
        dsa_config_info_t i{};
        i.size = sizeof i;
        dsa_result_t rc = dsa_config_info(name.c_str(), &i);
        if (rc != DSA_SUCCESS)
            return failure(rc, nullptr);
        return info_dict(i);
    });

    nb::class_<Ctx>(m, "Ctx")
        .def("close", &Ctx::close)
        .def_prop_ro("closed", &Ctx::closed)
        .def_prop_ro("handle", &Ctx::handle)
        .def("info", &Ctx::info)
        .def("last_error", &Ctx::last_error)
        .def("prologue", &Ctx::prologue)
        .def("index", &Ctx::index)
        .def("attend", &Ctx::attend)
        .def_prop_ro("call_ns", &Ctx::call_ns);

    // dsa_nccl_unique_id: the id's bytes, or (code, message) on failure
    m.def("nccl_unique_id", []() -> nb::object {
        char id[DSA_NCCL_UNIQUE_ID_BYTES];
        dsa_result_t rc = dsa_nccl_unique_id(id, sizeof id);
        if (rc != DSA_SUCCESS)
            return failure(rc, nullptr);
        return nb::bytes(id, sizeof id);
    });

    // dsa_ctx_create (config) or dsa_ctx_create_dir (dir): a Ctx, or (code, message) on failure
    m.def(
        "ctx_create",
        [](std::optional<std::string> config, std::optional<std::string> dir, int device, int64_t max_tokens,
           int64_t index_tokens, int64_t attend_tokens, std::optional<std::string> cache_dir,
           std::optional<nb::bytes> nccl_id, int dcp_rank) -> nb::object {
            dsa_options_t opts = DSA_OPTIONS_INIT;
            opts.device = device;
            if (nccl_id) { // a DCP group over NCCL: the id rank 0 made, this rank's place in the group
                if (nccl_id->size() != DSA_NCCL_UNIQUE_ID_BYTES)
                    return nb::make_tuple(static_cast<int>(DSA_ERROR_INVALID_ARGUMENT),
                                          "Context: an ncclUniqueId has " + std::to_string(DSA_NCCL_UNIQUE_ID_BYTES) +
                                              " bytes, got " + std::to_string(nccl_id->size()));
                opts.nccl_id = nccl_id->c_str();
                opts.dcp_rank = dcp_rank;
            }
            opts.max_tokens = max_tokens;
            opts.index_tokens = index_tokens;
            opts.attend_tokens = attend_tokens;
            opts.cache_dir = cache_dir ? cache_dir->c_str() : nullptr;
            dsa_ctx_t ctx = nullptr;
            dsa_result_t rc;
            {
                nb::gil_scoped_release unlocked; // compiling kernels takes seconds
                rc = dir ? dsa_ctx_create_dir(dir->c_str(), &opts, &ctx)
                         : dsa_ctx_create(config ? config->c_str() : "", &opts, &ctx);
            }
            if (rc != DSA_SUCCESS)
                return failure(rc, nullptr); // dsa_last_error(NULL) is per thread: this one
            return nb::cast(new Ctx(ctx), nb::rv_policy::take_ownership);
        },
        nb::arg("config").none(), nb::arg("dir").none(), nb::arg("device"), nb::arg("max_tokens"),
        nb::arg("index_tokens"), nb::arg("attend_tokens"), nb::arg("cache_dir").none(),
        nb::arg("nccl_id").none() = nb::none(), nb::arg("dcp_rank") = 0);

    // What a DLPack tensor (or a buffer-protocol array) is, without copying it:
    // (data address, shape, strides in elements, (dtype code, bits, lanes), (device type, device id)).
    // DLPack's dtype codes: 0 int, 1 uint, 2 float, 4 bfloat; device types: 1 CPU, 2 CUDA.
    m.def("describe", [](nb::ndarray<nb::ro> a) {
        nb::list shape, strides;
        for (size_t i = 0; i < a.ndim(); i++) {
            shape.append(a.shape(i));
            strides.append(a.stride(i));
        }
        nb::dlpack::dtype t = a.dtype();
        return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), nb::tuple(shape), nb::tuple(strides),
                              nb::make_tuple(t.code, t.bits, t.lanes), nb::make_tuple(a.device_type(), a.device_id()));
    });
}
