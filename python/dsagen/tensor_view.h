// dsagen's tensor view: what the eager fast path (python/dsagen/_dsa.cpp) needs of one torch.Tensor,
// read by dsagen._torch_view (python/dsagen/_torch_view.cpp, built against torch's headers) in a
// few nanoseconds instead of five Python attribute reads. Shared by the two extensions, which meet
// only through the C function in a PyCapsule: _dsa.cpp includes no torch header.
#ifndef DSAGEN_TENSOR_VIEW_H
#define DSAGEN_TENSOR_VIEW_H

#include <Python.h>
#include <stdint.h>

#define DSAGEN_VIEW_MAX_DIMS 4
#define DSAGEN_VIEW_CAPSULE "dsagen._torch_view.read"

// The dtypes the per-layer calls take; DSAGEN_DT_OTHER for any other.
enum dsagen_dtype { DSAGEN_DT_BF16, DSAGEN_DT_F32, DSAGEN_DT_I32, DSAGEN_DT_I64, DSAGEN_DT_U8, DSAGEN_DT_OTHER };

struct dsagen_view {
    uintptr_t ptr;                           // data_ptr()
    int64_t shape[DSAGEN_VIEW_MAX_DIMS];     // the first min(ndim, 4) sizes
    int64_t stride[DSAGEN_VIEW_MAX_DIMS];    // and strides, in elements
    int ndim;                                // dim()
    int dtype;                               // enum dsagen_dtype
    int device;                              // get_device(): the CUDA ordinal, -1 on the CPU
    int contiguous;                          // is_contiguous()
};

// Fills v from o, which the caller has checked is a torch.Tensor (or a subclass). 0 on success;
// -1 when a read failed (no Python error is left set).
typedef int (*dsagen_read_fn)(PyObject *o, struct dsagen_view *v);

#endif
