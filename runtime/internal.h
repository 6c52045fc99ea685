/* libdsa internals: the context, error recording and the check macros that turn every CUDA and
 * NVRTC return into a dsa_result_t at the call site and jump to the function's cleanup. */
#ifndef DSA_INTERNAL_H
#define DSA_INTERNAL_H

#include "loader.h"
#include <stdarg.h>

#include "dsa.h"
#include "dsa_plan.h"

#define DSA_HIDDEN __attribute__((visibility("hidden")))
#define DSA_ERRLEN 16384

typedef struct dsa_kernel {
    CUmodule module;
    CUfunction fn;
    dsa_kernel_info_t info;
} dsa_kernel_t;

/* The DCP transport behind one small interface: NCCL in production, in-process in tests. */
typedef struct dsa_transport dsa_transport_t;
struct dsa_transport {
    int rank, size;
    /* recv = the size send buffers of bytes each, in rank order */
    dsa_result_t (*allgather)(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv, size_t bytes,
                              CUstream stream);
    /* send: size blocks of bytes, block p for rank p; recv: size blocks, block p from rank p */
    dsa_result_t (*alltoall)(dsa_transport_t *t, dsa_ctx_t ctx, CUdeviceptr send, CUdeviceptr recv, size_t bytes,
                             CUstream stream);
    void (*destroy)(dsa_transport_t *t);
};

/* Sets up ctx->dcp from the options (NULL transport at dcp 1); records the error in ctx. */
DSA_HIDDEN dsa_result_t dsa_transport_create(dsa_ctx_t ctx);

struct dsa_ctx {
    const dsa_plan_t *plan;
    dsa_options_t opts;
    char target[16];
    CUdevice dev;
    CUcontext cu;
    dsa_kernel_t *kernels;
    dsa_kernel_info_t *info;
    CUdeviceptr rope_cos, rope_sin; /* [max_positions, qk_rope_dim / 2] fp32 */
    CUdeviceptr rejected;           /* 2 x u64 */
    dsa_transport_t *dcp;           /* NULL at dcp 1 */
    CUfunction pack_fn, attend_fn, merge_fn;
    unsigned attend_smem;           /* dynamic shared memory of attend_fn */
    int64_t ws_tokens;              /* tokens per attend chunk: the workspaces below hold this many */
    CUdeviceptr ws_q, ws_qg;        /* packed query; gathered query (dcp > 1) */
    CUdeviceptr ws_po_send, ws_po_recv, ws_pl_send, ws_pl_recv; /* partials (dcp > 1) */
    char err[DSA_ERRLEN];
};

/* Records a formatted message as the last error of ctx (or of this thread when ctx is NULL) and
 * returns r. */
DSA_HIDDEN dsa_result_t dsa_fail(dsa_ctx_t ctx, dsa_result_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Host allocation of the runtime, with a fault injector for tests: dsa_fault_after counts the
 * allocations that still succeed (-1: all do). */
DSA_HIDDEN void *dsa_malloc(size_t n);
DSA_HIDDEN void *dsa_calloc(size_t n, size_t size);
DSA_HIDDEN extern long dsa_fault_after;

/* Prints to stderr when level <= threshold (the context's log_level). */
DSA_HIDDEN void dsa_log(int threshold, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
DSA_HIDDEN char *dsa_thread_err(void);

/* CU_CHECK(ctx, call): on failure records "call failed: NAME (text) at file:line" and jumps to
 * the enclosing function's `fail` label with rc set. */
#define CU_CHECK(ctx, call)                                                                                  \
    do {                                                                                                     \
        CUresult cu_ = (call);                                                                               \
        if (cu_ != CUDA_SUCCESS) {                                                                           \
            const char *n_ = "?", *s_ = "?";                                                                 \
            dsa_cu.cuGetErrorName(cu_, &n_);                                                                        \
            dsa_cu.cuGetErrorString(cu_, &s_);                                                                      \
            rc = dsa_fail(ctx, cu_ == CUDA_ERROR_OUT_OF_MEMORY ? DSA_ERROR_OUT_OF_MEMORY : DSA_ERROR_CUDA,    \
                          "%s failed: %s (%s) at %s:%d", #call, n_, s_, __FILE__, __LINE__);                 \
            goto fail;                                                                                       \
        }                                                                                                    \
    } while (0)

/* JIT, no GPU needed: compiles (NVRTC, one thread per kernel) or loads from the disk cache every
 * kernel of plan for target. cache_dir NULL: $DSA_CACHE_DIR or ~/.cache/dsagen; "": no cache.
 * out has plan->nkernels entries; each cubin is malloc'd, the caller frees it. */
typedef struct dsa_jit_out {
    char *cubin;
    size_t len;
    dsa_kernel_info_t info;
} dsa_jit_out_t;
DSA_HIDDEN dsa_result_t dsa_jit_compile(const dsa_plan_t *plan, const char *target, const char *cache_dir,
                                        int log_level, dsa_jit_out_t *out, char *err, size_t errlen);

/* JIT for a context: dsa_jit_compile, then load the modules on ctx's device. */
DSA_HIDDEN dsa_result_t dsa_jit_load(dsa_ctx_t ctx);

/* The kernel library's headers, embedded by the build (tools/embed --table; the list is the
 * build's), by the names the kernels include them with. */
#define DSA_MAX_HEADERS 63
typedef struct dsa_embedded {
    const char *name, *text;
    const size_t *len;
} dsa_header_t;
extern const dsa_header_t dsa_headers[];
extern const int dsa_headers_count;

/* Rope of the plan: per-pair frequencies (qk_rope_dim / 2 <= 128) and the cos/sin scale, from
 * which the rope table kernel computes cos/sin of every position. */
DSA_HIDDEN void dsa_rope_freqs(const dsa_plan_t *p, double *freq, double *mscale);

#endif
