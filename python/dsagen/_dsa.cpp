// dsagen._dsa: the nanobind extension over libdsa (runtime/dsa.h). Kept thin: the configuration
// queries, a context's life, and a description of any DLPack tensor (zero-copy) for the argument
// checks in checks.py. Errors come back as values; dsagen/__init__.py raises DsaError from them.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

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

private:
    dsa_ctx_t ctx_;
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
        .def("info", &Ctx::info);

    // dsa_ctx_create (config) or dsa_ctx_create_dir (dir): a Ctx, or (code, message) on failure
    m.def(
        "ctx_create",
        [](std::optional<std::string> config, std::optional<std::string> dir, int device, int64_t max_tokens,
           int64_t index_tokens, int64_t attend_tokens, std::optional<std::string> cache_dir) -> nb::object {
            dsa_options_t opts = DSA_OPTIONS_INIT;
            opts.device = device;
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
        nb::arg("index_tokens"), nb::arg("attend_tokens"), nb::arg("cache_dir").none());

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
