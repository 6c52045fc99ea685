/* libdsa internals: the context, error recording and the check macros that turn every CUDA and
 * NVRTC return into a dsa_result_t at the call site and jump to the function's cleanup. */
#ifndef DSA_INTERNAL_H
#define DSA_INTERNAL_H

#include <cuda.h>
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
    char err[DSA_ERRLEN];
};

/* Records a formatted message as the last error of ctx (or of this thread when ctx is NULL) and
 * returns r. */
DSA_HIDDEN dsa_result_t dsa_fail(dsa_ctx_t ctx, dsa_result_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
DSA_HIDDEN void dsa_log(const dsa_ctx_t ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CU_CHECK(ctx, call): on failure records "call failed: NAME (text) at file:line" and jumps to
 * the enclosing function's `fail` label with rc set. */
#define CU_CHECK(ctx, call)                                                                                  \
    do {                                                                                                     \
        CUresult cu_ = (call);                                                                               \
        if (cu_ != CUDA_SUCCESS) {                                                                           \
            const char *n_ = "?", *s_ = "?";                                                                 \
            cuGetErrorName(cu_, &n_);                                                                        \
            cuGetErrorString(cu_, &s_);                                                                      \
            rc = dsa_fail(ctx, cu_ == CUDA_ERROR_OUT_OF_MEMORY ? DSA_ERROR_OUT_OF_MEMORY : DSA_ERROR_CUDA,    \
                          "%s failed: %s (%s) at %s:%d", #call, n_, s_, __FILE__, __LINE__);                 \
            goto fail;                                                                                       \
        }                                                                                                    \
    } while (0)

/* JIT: compiles or loads every kernel of ctx's plan into ctx->kernels. */
DSA_HIDDEN dsa_result_t dsa_jit_load(dsa_ctx_t ctx);

/* Kernel headers embedded from runtime/kernels (build/runtime/kernel_headers.c). */
extern const char dsa_hdr_abi[], dsa_hdr_numerics[], dsa_hdr_prologue[];
extern const size_t dsa_hdr_abi_len, dsa_hdr_numerics_len, dsa_hdr_prologue_len;

/* Rope cos/sin table of the plan: [max_positions, qk_rope_dim / 2] each, fp32. */
DSA_HIDDEN void dsa_rope_table(const dsa_plan_t *p, float *cos_out, float *sin_out);

#endif
