// dsagen._dsa: the nanobind extension over libdsa (runtime/dsa.h). Kept thin: the configuration
// queries, a context's life, the per-layer calls on device addresses that Python has checked
// (dsagen/ops.py), the same calls on torch tensors read and checked here (the eager fast path, see
// "torch tensors" below), an ncclUniqueId for a DCP group, and a description of any DLPack tensor
// (zero-copy) for the argument checks in checks.py. Errors come back as values (a result code, or
// (code, message)); dsagen/__init__.py raises DsaError from them.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "dsa.h"
#include "tensor_view.h"

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

// ---- torch tensors: the eager fast path ----
// A torch.Tensor is read here in C++, not in Python code: issue 16 bounds an eager call's overhead
// at 5 us over the C call, and reading 8 to 14 tensors in Python code cost 8 to 11 us on the H200. With
// dsagen._torch_view (built against torch's headers) a tensor is read from its at::Tensor in a few
// nanoseconds; without it, through its Python attributes (shape, dtype, get_device(), data_ptr(),
// is_contiguous() or stride(): about 0.4 us a tensor, torch's own cost). No libtorch here: this
// extension builds and imports without torch, and ops.py hands over what it needs once
// (torch_setup). The fast path accepts a subset of what dsagen.checks accepts: exact
// shape and dtype, no empty dimension, the context's device, dense or row-strided where dsa.h has a
// stride (inner strides exactly dense), aligned. Anything else, and any error while reading (not a
// tensor, too few dimensions), is NOT_ACCEPTED, and ops.py runs dsagen.checks, which raises the
// ValueError naming the argument and the expected value, or accepts a call this path is too strict
// for (a size-1 dimension with an odd stride) and makes it on addresses.
constexpr int NOT_ACCEPTED = -1;

struct TorchRefs {
    PyObject *tensor = nullptr; // torch.Tensor's type (subclasses pass)
    PyObject *dtypes[DSAGEN_DT_OTHER] = {}; // torch.bfloat16, float32, int32, int64, uint8 (enum dsagen_dtype)
    dsagen_read_fn read = nullptr;           // dsagen._torch_view's reader, when it was built
    PyObject *stream = nullptr; // device index -> the current stream's address (what ops.py calls _raw_stream)
    PyObject *shape = nullptr, *dtype = nullptr, *get_device = nullptr, *is_contiguous = nullptr,
             *stride = nullptr, *data_ptr = nullptr; // interned attribute names
};
// Strong references held for the process's life: released at exit, an extension's statics would
// run after the interpreter is gone.
TorchRefs torch_refs;

// What a tensor argument must be; want[i] < 0 takes that dimension from the tensor (it must be at
// least 1) and writes it back, which is how T, N, R and max_blocks are read off the first tensor
// that carries them.
struct Want {
    int ndim;
    int64_t *shape;
    int dtype;      // enum dsagen_dtype
    unsigned align; // bytes
    int64_t mult;   // 0: dense (is_contiguous); else rows: the first stride free, >= the row, a multiple of mult
};

// Shapes: w.shape[i] < 0 takes n (at least 1), else n must equal it.
bool take(const Want &w, int i, int64_t n)
{
    if (w.shape[i] < 0 && n >= 1)
        w.shape[i] = n;
    return n == w.shape[i] && n >= 1;
}

// read_tensor through dsagen._torch_view: the same checks on the at::Tensor's own fields.
bool check_view(PyObject *o, const Want &w, long dev, std::uintptr_t &ptr, int64_t &stride)
{
    dsagen_view v;
    if (torch_refs.read(o, &v) != 0 || v.ndim != w.ndim || v.ndim > DSAGEN_VIEW_MAX_DIMS)
        return false;
    for (int i = 0; i < w.ndim; i++)
        if (!take(w, i, v.shape[i]))
            return false;
    if (v.dtype != w.dtype || v.device != dev || v.ptr % w.align)
        return false;
    ptr = v.ptr;
    int64_t row = 1;
    for (int i = 1; i < w.ndim; i++)
        row *= w.shape[i];
    if (w.mult == 0) {
        stride = row;
        return v.contiguous != 0;
    }
    int64_t inner = 1;
    for (int i = w.ndim - 1; i >= 1; i--) {
        if (v.stride[i] != inner)
            return false;
        inner *= w.shape[i];
    }
    stride = w.shape[0] > 1 ? v.stride[0] : row;
    return stride >= row && stride % w.mult == 0;
}

// o checked against w on device dev: its address into ptr, its row stride (elements) into stride.
// false when the fast path does not accept it (a Python error raised while reading is cleared).
bool read_tensor(PyObject *o, const Want &w, PyObject *dev, std::uintptr_t &ptr, int64_t &stride)
{
    const TorchRefs &r = torch_refs;
    if (!PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject *>(r.tensor)))
        return false;
    if (r.read)
        return check_view(o, w, PyLong_AsLong(dev), ptr, stride);
    bool ok = true;
    PyObject *v = PyObject_GetAttr(o, r.shape); // torch.Size, a tuple
    if (!v || !PyTuple_Check(v) || PyTuple_GET_SIZE(v) != w.ndim) {
        ok = false;
    } else {
        for (int i = 0; i < w.ndim && ok; i++) {
            ok = take(w, i, PyLong_AsLongLong(PyTuple_GET_ITEM(v, i)));
        }
    }
    Py_XDECREF(v);
    if (ok) { // dtype: the dtype objects are singletons, compared by identity as ops.py did
        v = PyObject_GetAttr(o, r.dtype);
        ok = v == r.dtypes[w.dtype];
        Py_XDECREF(v);
    }
    if (ok) { // device: get_device() is the CUDA ordinal, -1 on the CPU
        v = PyObject_CallMethodNoArgs(o, r.get_device);
        ok = v && PyObject_RichCompareBool(v, dev, Py_EQ) == 1;
        Py_XDECREF(v);
    }
    if (ok) {
        v = PyObject_CallMethodNoArgs(o, r.data_ptr);
        ptr = v ? static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(v)) : 0;
        ok = v && !PyErr_Occurred() && ptr % w.align == 0;
        Py_XDECREF(v);
    }
    int64_t row = 1;
    for (int i = 1; i < w.ndim; i++)
        row *= w.shape[i];
    if (ok && w.mult == 0) { // dense: torch's is_contiguous ignores size-1 dimensions' strides, as the checks do
        v = PyObject_CallMethodNoArgs(o, r.is_contiguous);
        ok = v == Py_True;
        Py_XDECREF(v);
        stride = row;
    } else if (ok) { // rows: the inner strides exactly dense, the first one free
        v = PyObject_CallMethodNoArgs(o, r.stride);
        ok = v && PyTuple_Check(v) && PyTuple_GET_SIZE(v) == w.ndim;
        int64_t inner = 1;
        for (int i = w.ndim - 1; i >= 1 && ok; i--) {
            ok = PyLong_AsLongLong(PyTuple_GET_ITEM(v, i)) == inner;
            inner *= w.shape[i];
        }
        stride = ok && w.shape[0] > 1 ? PyLong_AsLongLong(PyTuple_GET_ITEM(v, 0)) : row;
        ok = ok && stride >= row && stride % w.mult == 0;
        Py_XDECREF(v);
    }
    if (PyErr_Occurred()) {
        PyErr_Clear();
        ok = false;
    }
    return ok;
}

// An optional tensor: None is accepted as absent (address 0, stride 0).
bool read_optional(PyObject *o, const Want &w, PyObject *dev, std::uintptr_t &ptr, int64_t &stride)
{
    if (o == Py_None) {
        ptr = 0;
        stride = 0;
        return true;
    }
    return read_tensor(o, w, dev, ptr, stride);
}

class Ctx {
public:
    Ctx(dsa_ctx_t c, int device) : ctx_(c), device_(nb::int_(device))
    {
        info_.size = sizeof info_;
        have_info_ = dsa_ctx_config(c, &info_) == DSA_SUCCESS;
    }
    ~Ctx() { destroy(); } // no call is in flight: each holds a reference to this object
    Ctx(const Ctx &) = delete;
    Ctx &operator=(const Ctx &) = delete;
    // dsa_ctx_destroy, refused while another thread is inside a call on this context (it released
    // the GIL for it): the context's modules and workspaces must outlive that call
    void close()
    {
        if (inflight_.load() != 0)
            throw std::runtime_error("Context.close: a call on this context is still running on another thread");
        destroy();
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
    // The per-layer calls on torch tensors (the eager fast path above): the dsa_result_t, or
    // NOT_ACCEPTED when a tensor is not one the fast path takes (nothing was called then).
    int prologue_torch(nb::handle q_c, nb::handle q_c_out, nb::handle kv, nb::handle positions,
                       nb::handle slot_mapping, nb::handle q_norm_w, nb::handle kv_norm_w, nb::handle kv_cache,
                       nb::handle topk, nb::handle clear_topk, nb::handle idx_k, nb::handle idx_norm_w,
                       nb::handle idx_norm_b, nb::handle idx_cache)
    {
        const TorchRefs &r = torch_refs;
        if (!r.tensor || !have_info_)
            return NOT_ACCEPTED;
        const dsa_config_info_t &g = info_;
        PyObject *dev = device_.ptr();
        int clear = PyObject_IsTrue(clear_topk.ptr());
        if (clear < 0) {
            PyErr_Clear();
            return NOT_ACCEPTED;
        }
        int64_t tq[2] = {-1, g.q_lora_rank}, tkv[2] = {-1, g.kv_dim}, t1[1], nq[1] = {g.q_lora_rank},
                nkv[1] = {g.kv_lora_rank}, cache[3] = {-1, g.block_size, g.cache_bytes_per_token}, tk[2], td[2],
                nd[1] = {g.idx_head_dim}, page[2], unused;
        std::uintptr_t p[13];
        if (!read_tensor(q_c.ptr(), {2, tq, DSAGEN_DT_BF16, 16, 8}, dev, p[0], unused))
            return NOT_ACCEPTED;
        dsa_prologue_args_t a{};
        a.size = sizeof a;
        a.num_tokens = tq[0];
        a.q_c_stride = unused;
        t1[0] = tkv[0] = tk[0] = td[0] = tq[0];
        tk[1] = g.idx_topk;
        td[1] = g.idx_head_dim;
        bool ok = read_tensor(q_c_out.ptr(), {2, tq, DSAGEN_DT_BF16, 16, 0}, dev, p[1], unused) &&
                  read_tensor(kv.ptr(), {2, tkv, DSAGEN_DT_BF16, 16, 8}, dev, p[2], a.kv_stride) &&
                  read_tensor(positions.ptr(), {1, t1, DSAGEN_DT_I64, 8, 0}, dev, p[3], unused) &&
                  read_tensor(slot_mapping.ptr(), {1, t1, DSAGEN_DT_I64, 8, 0}, dev, p[4], unused) &&
                  read_tensor(q_norm_w.ptr(), {1, nq, DSAGEN_DT_BF16, 16, 0}, dev, p[5], unused) &&
                  read_tensor(kv_norm_w.ptr(), {1, nkv, DSAGEN_DT_BF16, 16, 0}, dev, p[6], unused) &&
                  read_tensor(kv_cache.ptr(), {3, cache, DSAGEN_DT_U8, 16, 0}, dev, p[7], unused);
        if (!ok)
            return NOT_ACCEPTED;
        a.num_cache_blocks = cache[0];
        page[0] = cache[0];
        page[1] = g.idx_page_bytes;
        // an indexer layer: idx_k with its norm and cache; without idx_k the three others are unused
        if (idx_k.is_none()) {
            p[8] = p[9] = p[10] = p[11] = 0;
            a.idx_k_stride = 0;
        } else if (!(read_tensor(idx_k.ptr(), {2, td, DSAGEN_DT_BF16, 2, 1}, dev, p[8], a.idx_k_stride) &&
                     read_tensor(idx_norm_w.ptr(), {1, nd, DSAGEN_DT_BF16, 2, 0}, dev, p[9], unused) &&
                     read_tensor(idx_norm_b.ptr(), {1, nd, DSAGEN_DT_BF16, 2, 0}, dev, p[10], unused) &&
                     read_tensor(idx_cache.ptr(), {2, page, DSAGEN_DT_U8, 16, 0}, dev, p[11], unused))) {
            return NOT_ACCEPTED;
        }
        // topk: needed with clear_topk, which clears it 16 bytes at a time
        if (topk.is_none() ? clear != 0 : !read_tensor(topk.ptr(), {2, tk, DSAGEN_DT_I32, clear ? 16u : 4u, 0}, dev, p[12], unused))
            return NOT_ACCEPTED;
        if (topk.is_none())
            p[12] = 0;
        a.q_c = addr<const void>(p[0]);
        a.q_c_out = addr<void>(p[1]);
        a.kv = addr<const void>(p[2]);
        a.positions = addr<const int64_t>(p[3]);
        a.slot_mapping = addr<const int64_t>(p[4]);
        a.q_norm_w = addr<const void>(p[5]);
        a.kv_norm_w = addr<const void>(p[6]);
        a.kv_cache = addr<void>(p[7]);
        a.idx_k = addr<const void>(p[8]);
        a.idx_norm_w = addr<const void>(p[9]);
        a.idx_norm_b = addr<const void>(p[10]);
        a.idx_cache = addr<void>(p[11]);
        a.topk = addr<int32_t>(p[12]);
        a.clear_topk = clear;
        void *stream;
        if (!current_stream(stream))
            return NOT_ACCEPTED;
        return timed([&] { return dsa_prologue(ctx_, &a, stream); });
    }
    int index_torch(nb::handle q, nb::handle weights, nb::handle positions, nb::handle req_of_token,
                    nb::handle seq_lens, nb::handle block_table, nb::handle idx_cache, nb::handle topk)
    {
        const TorchRefs &r = torch_refs;
        if (!r.tensor || !have_info_)
            return NOT_ACCEPTED;
        const dsa_config_info_t &g = info_;
        PyObject *dev = device_.ptr();
        int64_t tq[3] = {-1, g.idx_heads, g.idx_head_dim}, tw[2], t1[1], tk[2], r1[1] = {-1}, bt[2] = {-1, -1},
                page[2] = {-1, g.idx_page_bytes}, unused;
        std::uintptr_t p[8];
        dsa_index_args_t a{};
        a.size = sizeof a;
        if (!read_tensor(q.ptr(), {3, tq, DSAGEN_DT_BF16, 16, 8}, dev, p[0], a.q_stride))
            return NOT_ACCEPTED;
        tw[0] = t1[0] = tk[0] = tq[0];
        tw[1] = g.idx_heads;
        tk[1] = g.idx_topk;
        bool ok = read_tensor(weights.ptr(), {2, tw, DSAGEN_DT_F32, 4, 1}, dev, p[1], a.weights_stride) &&
                  read_tensor(positions.ptr(), {1, t1, DSAGEN_DT_I64, 8, 0}, dev, p[2], unused) &&
                  read_tensor(req_of_token.ptr(), {1, t1, DSAGEN_DT_I32, 4, 0}, dev, p[3], unused) &&
                  read_tensor(seq_lens.ptr(), {1, r1, DSAGEN_DT_I32, 4, 0}, dev, p[4], unused);
        bt[0] = r1[0];
        ok = ok && read_tensor(block_table.ptr(), {2, bt, DSAGEN_DT_I32, 4, 0}, dev, p[5], unused) &&
             read_tensor(idx_cache.ptr(), {2, page, DSAGEN_DT_U8, 16, 0}, dev, p[6], unused) &&
             read_tensor(topk.ptr(), {2, tk, DSAGEN_DT_I32, 4, 1}, dev, p[7], a.topk_stride);
        void *stream;
        if (!ok || !current_stream(stream))
            return NOT_ACCEPTED;
        a.num_tokens = tq[0];
        a.q = addr<const void>(p[0]);
        a.weights = addr<const float>(p[1]);
        a.positions = addr<const int64_t>(p[2]);
        a.req_of_token = addr<const int32_t>(p[3]);
        a.seq_lens = addr<const int32_t>(p[4]);
        a.block_table = addr<const int32_t>(p[5]);
        a.num_requests = bt[0];
        a.max_blocks = bt[1];
        a.idx_cache = addr<const void>(p[6]);
        a.num_cache_blocks = page[0];
        a.topk = addr<int32_t>(p[7]);
        return timed([&] { return dsa_index(ctx_, &a, stream); });
    }
    int attend_torch(nb::handle q_lat, nb::handle q_pe, nb::handle positions, nb::handle topk,
                     nb::handle req_of_token, nb::handle seq_lens, nb::handle block_table, nb::handle kv_cache,
                     nb::handle out, nb::handle lse)
    {
        const TorchRefs &r = torch_refs;
        if (!r.tensor || !have_info_)
            return NOT_ACCEPTED;
        const dsa_config_info_t &g = info_;
        PyObject *dev = device_.ptr();
        int64_t tl[3] = {-1, g.heads_local, g.kv_lora_rank}, tp[3], t1[1], tk[2], r1[1] = {-1}, bt[2] = {-1, -1},
                cache[3] = {-1, g.block_size, g.cache_bytes_per_token}, to[3], ts[2], unused;
        std::uintptr_t p[10];
        dsa_attend_args_t a{};
        a.size = sizeof a;
        if (!read_tensor(q_lat.ptr(), {3, tl, DSAGEN_DT_BF16, 2, 1}, dev, p[0], a.q_lat_stride))
            return NOT_ACCEPTED;
        tp[0] = t1[0] = tk[0] = to[0] = ts[0] = tl[0];
        tp[1] = to[1] = ts[1] = g.heads_local;
        tp[2] = g.qk_rope_dim;
        tk[1] = g.idx_topk;
        to[2] = g.kv_lora_rank;
        bool ok = read_tensor(q_pe.ptr(), {3, tp, DSAGEN_DT_BF16, 2, 1}, dev, p[1], a.q_pe_stride) &&
                  read_tensor(positions.ptr(), {1, t1, DSAGEN_DT_I64, 8, 0}, dev, p[2], unused) &&
                  read_tensor(topk.ptr(), {2, tk, DSAGEN_DT_I32, 4, 1}, dev, p[3], a.topk_stride) &&
                  read_tensor(req_of_token.ptr(), {1, t1, DSAGEN_DT_I32, 4, 0}, dev, p[4], unused) &&
                  read_tensor(seq_lens.ptr(), {1, r1, DSAGEN_DT_I32, 4, 0}, dev, p[5], unused);
        bt[0] = r1[0];
        ok = ok && read_tensor(block_table.ptr(), {2, bt, DSAGEN_DT_I32, 4, 0}, dev, p[6], unused) &&
             read_tensor(kv_cache.ptr(), {3, cache, DSAGEN_DT_U8, 16, 0}, dev, p[7], unused) &&
             read_tensor(out.ptr(), {3, to, DSAGEN_DT_BF16, 4, 0}, dev, p[8], unused) &&
             read_optional(lse.ptr(), {2, ts, DSAGEN_DT_F32, 4, 0}, dev, p[9], unused);
        void *stream;
        if (!ok || !current_stream(stream))
            return NOT_ACCEPTED;
        a.num_tokens = tl[0];
        a.q_lat = addr<const void>(p[0]);
        a.q_pe = addr<const void>(p[1]);
        a.positions = addr<const int64_t>(p[2]);
        a.topk = addr<const int32_t>(p[3]);
        a.req_of_token = addr<const int32_t>(p[4]);
        a.seq_lens = addr<const int32_t>(p[5]);
        a.block_table = addr<const int32_t>(p[6]);
        a.num_requests = bt[0];
        a.max_blocks = bt[1];
        a.kv_cache = addr<const void>(p[7]);
        a.num_cache_blocks = cache[0];
        a.out = addr<void>(p[8]);
        a.lse = addr<float>(p[9]);
        return timed([&] { return dsa_attend(ctx_, &a, stream); });
    }
    int64_t call_ns() const { return call_ns_; }

private:
    // call() without the GIL, counted in flight (close() refuses meanwhile; the count is raised with
    // the GIL held, where close() reads it); its time stored once the GIL is back
    template <typename F> int timed(F call)
    {
        dsa_result_t rc;
        int64_t ns;
        inflight_++;
        {
            nb::gil_scoped_release unlocked;
            auto t0 = std::chrono::steady_clock::now();
            rc = call();
            ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        }
        inflight_--;
        call_ns_ = ns;
        return static_cast<int>(rc);
    }
    void destroy()
    {
        dsa_ctx_destroy(ctx_);
        ctx_ = nullptr;
    }

    // torch's current stream on the context's device (a CUstream's address); false on an error
    bool current_stream(void *&stream) const
    {
        PyObject *v = PyObject_CallOneArg(torch_refs.stream, device_.ptr());
        stream = v ? PyLong_AsVoidPtr(v) : nullptr;
        Py_XDECREF(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
        return true;
    }

    dsa_ctx_t ctx_;
    nb::int_ device_;        // the device ordinal, compared with each tensor's get_device()
    dsa_config_info_t info_{}; // the geometry the fast path checks against, read once
    bool have_info_ = false;
    int64_t call_ns_ = 0;
    std::atomic<int> inflight_{0};
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

    // the same for a generated configuration's folder (dsa_config_info_dir)
    m.def("config_info_dir", [](const std::string &dir) -> nb::object {
        dsa_config_info_t i{};
        i.size = sizeof i;
        dsa_config_strings_t text;
        dsa_result_t rc = dsa_config_info_dir(dir.c_str(), &i, &text);
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
        // every argument may be None (nanobind refuses None for a handle without .none()): an
        // optional tensor's absence, or a missing one, which the fast path does not accept
        .def("prologue_torch", &Ctx::prologue_torch, nb::arg("q_c").none(), nb::arg("q_c_out").none(),
             nb::arg("kv").none(), nb::arg("positions").none(), nb::arg("slot_mapping").none(),
             nb::arg("q_norm_w").none(), nb::arg("kv_norm_w").none(), nb::arg("kv_cache").none(),
             nb::arg("topk").none(), nb::arg("clear_topk").none(), nb::arg("idx_k").none(),
             nb::arg("idx_norm_w").none(), nb::arg("idx_norm_b").none(), nb::arg("idx_cache").none())
        .def("index_torch", &Ctx::index_torch, nb::arg("q").none(), nb::arg("weights").none(),
             nb::arg("positions").none(), nb::arg("req_of_token").none(), nb::arg("seq_lens").none(),
             nb::arg("block_table").none(), nb::arg("idx_cache").none(), nb::arg("topk").none())
        .def("attend_torch", &Ctx::attend_torch, nb::arg("q_lat").none(), nb::arg("q_pe").none(),
             nb::arg("positions").none(), nb::arg("topk").none(), nb::arg("req_of_token").none(),
             nb::arg("seq_lens").none(), nb::arg("block_table").none(), nb::arg("kv_cache").none(),
             nb::arg("out").none(), nb::arg("lse").none())
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
            return nb::cast(new Ctx(ctx, device), nb::rv_policy::take_ownership);
        },
        nb::arg("config").none(), nb::arg("dir").none(), nb::arg("device"), nb::arg("max_tokens"),
        nb::arg("index_tokens"), nb::arg("attend_tokens"), nb::arg("cache_dir").none(),
        nb::arg("nccl_id").none() = nb::none(), nb::arg("dcp_rank") = 0);

    // The eager fast path's torch objects (see "torch tensors" above), from dsagen/ops.py once:
    // torch.Tensor, the dtypes bfloat16, float32, int32, int64 and uint8, the current-stream getter,
    // and dsagen._torch_view.read (a capsule) or None.
    m.def(
        "torch_setup",
        [](nb::handle tensor, nb::handle bf16, nb::handle f32, nb::handle i32, nb::handle i64, nb::handle u8,
           nb::handle stream, nb::handle reader) {
            if (torch_refs.tensor)
                return; // torch is imported once per process; its objects never change
            TorchRefs r;
            dsagen_read_fn read = nullptr;
            if (!reader.is_none()) {
                read = reinterpret_cast<dsagen_read_fn>(PyCapsule_GetPointer(reader.ptr(), DSAGEN_VIEW_CAPSULE));
                if (!read)
                    throw nb::python_error();
            }
            r.shape = PyUnicode_InternFromString("shape");
            r.dtype = PyUnicode_InternFromString("dtype");
            r.get_device = PyUnicode_InternFromString("get_device");
            r.is_contiguous = PyUnicode_InternFromString("is_contiguous");
            r.stride = PyUnicode_InternFromString("stride");
            r.data_ptr = PyUnicode_InternFromString("data_ptr");
            if (!PyType_Check(tensor.ptr()) || !r.shape || !r.dtype || !r.get_device || !r.is_contiguous ||
                !r.stride || !r.data_ptr)
                throw nb::type_error("torch_setup: expected torch.Tensor, five dtypes, a stream getter and a reader");
            nb::handle dtypes[DSAGEN_DT_OTHER] = {bf16, f32, i32, i64, u8};
            for (int i = 0; i < DSAGEN_DT_OTHER; i++)
                r.dtypes[i] = dtypes[i].inc_ref().ptr();
            r.stream = stream.inc_ref().ptr();
            r.read = read;
            r.tensor = tensor.inc_ref().ptr();
            torch_refs = r;
        },
        nb::arg("tensor"), nb::arg("bf16"), nb::arg("f32"), nb::arg("i32"), nb::arg("i64"), nb::arg("u8"),
        nb::arg("stream"), nb::arg("reader").none());

    // What a DLPack tensor (or a buffer-protocol array) is, without copying it: (data address, shape,
    // strides in elements, (dtype code, bits, lanes), (device type, device id), writable). DLPack's
    // dtype codes: 0 int, 1 uint, 2 float, 4 bfloat; device types: 1 CPU, 2 CUDA. writable: whether
    // it converts, without a copy, to an array that is not read-only (a call's outputs must).
    m.def("describe", [](nb::handle obj) {
        nb::ndarray<nb::ro> a;
        if (!nb::try_cast(obj, a, false))
            throw nb::type_error("expected a DLPack tensor or a buffer-protocol array");
        nb::ndarray<> w;
        const bool writable = nb::try_cast(obj, w, false);
        nb::list shape, strides;
        for (size_t i = 0; i < a.ndim(); i++) {
            shape.append(a.shape(i));
            strides.append(a.stride(i));
        }
        nb::dlpack::dtype t = a.dtype();
        return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), nb::tuple(shape), nb::tuple(strides),
                              nb::make_tuple(t.code, t.bits, t.lanes), nb::make_tuple(a.device_type(), a.device_id()),
                              writable);
    });
}
