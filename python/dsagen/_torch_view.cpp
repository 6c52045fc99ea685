// dsagen._torch_view: reads a torch.Tensor's shape, strides, dtype, device and address from its
// at::Tensor (python/dsagen/tensor_view.h says why), for the eager fast path in dsagen._dsa. Built
// against the headers of the torch on this python3 (`ninja python-torch`); optional: without it
// the fast path reads the same through Python attributes, more slowly.
#include "tensor_view.h"

#include <torch/csrc/autograd/python_variable.h>

namespace {

int dtype_of(c10::ScalarType t)
{
    switch (t) {
    case c10::ScalarType::BFloat16: return DSAGEN_DT_BF16;
    case c10::ScalarType::Float: return DSAGEN_DT_F32;
    case c10::ScalarType::Int: return DSAGEN_DT_I32;
    case c10::ScalarType::Long: return DSAGEN_DT_I64;
    case c10::ScalarType::Byte: return DSAGEN_DT_U8;
    default: return DSAGEN_DT_OTHER;
    }
}

int read(PyObject *o, dsagen_view *v)
{
    try {
        const at::Tensor &t = THPVariable_Unpack(o);
        if (!t.defined() || t.is_sparse() || t.layout() != c10::kStrided)
            return -1;
        v->ndim = static_cast<int>(t.dim());
        auto sizes = t.sizes();
        auto strides = t.strides();
        for (int i = 0; i < v->ndim && i < DSAGEN_VIEW_MAX_DIMS; i++) {
            v->shape[i] = sizes[static_cast<size_t>(i)];
            v->stride[i] = strides[static_cast<size_t>(i)];
        }
        v->dtype = dtype_of(t.scalar_type());
        v->device = t.get_device();
        v->contiguous = t.is_contiguous() ? 1 : 0;
        v->ptr = reinterpret_cast<uintptr_t>(t.data_ptr());
        return 0;
    } catch (...) { // a tensor without storage (a fake or meta one), symbolic sizes: not for the fast path
        return -1;
    }
}

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_torch_view", "torch.Tensor reads for dsagen's fast path", -1,
                      nullptr, nullptr, nullptr, nullptr, nullptr};

} // namespace

PyMODINIT_FUNC PyInit__torch_view(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return nullptr;
    PyObject *cap = PyCapsule_New(reinterpret_cast<void *>(static_cast<dsagen_read_fn>(read)), DSAGEN_VIEW_CAPSULE,
                                  nullptr);
    if (!cap || PyModule_AddObject(m, "read", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
