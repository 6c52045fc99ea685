/* libdsa's lowest layer: error recording, the one check macro shape, host allocation (with a
 * fault injector for tests) and logging. Every other runtime file builds on this one. */
#ifndef DSA_ERROR_H
#define DSA_ERROR_H

#include <stddef.h>

#include "dsa.h"
#include "loader.h"

#define DSA_HIDDEN __attribute__((visibility("hidden")))
#define DSA_ERRLEN 16384

/* Every context starts with its last-error message (ctx.h asserts it), so this layer records
 * errors without knowing the rest of the context. */
typedef struct dsa_err_slot {
    char msg[DSA_ERRLEN];
} dsa_err_slot_t;

/* Records a formatted message as the last error of ctx (or of this thread when ctx is NULL; a
 * context's error is also copied to the thread's) and returns r. */
DSA_HIDDEN dsa_result_t dsa_fail(dsa_ctx_t ctx, dsa_result_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The message buffer of ctx (DSA_ERRLEN bytes), or of this thread when ctx is NULL. */
DSA_HIDDEN char *dsa_err_buf(dsa_ctx_t ctx);
/* Copies ctx's last error to this thread's (what dsa_last_error(NULL) reports). */
DSA_HIDDEN void dsa_err_publish(dsa_ctx_t ctx);

/* A caller's string made safe to print in a message: bytes outside printable ASCII as \xHH, cut
 * to fit out (n bytes); returns out. A bad argument must not forge lines or terminal escapes. */
DSA_HIDDEN const char *dsa_escape(const char *in, char *out, size_t n);

/* Host allocation of the runtime; dsa_fault_after counts the allocations that still succeed (-1:
 * all do), so tests can fail each one in turn. */
DSA_HIDDEN void *dsa_malloc(size_t n);
DSA_HIDDEN void *dsa_calloc(size_t n, size_t size);
DSA_HIDDEN extern long dsa_fault_after;

/* Prints to stderr when level <= threshold (the context's log_level). */
DSA_HIDDEN void dsa_log(int threshold, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* r as "NAME (description)" into buf (n bytes), or "unknown CUresult N" where the driver names no
 * such code; returns buf. The one wording of a CUDA error in libdsa's messages. */
DSA_HIDDEN const char *dsa_cu_describe(CUresult r, char *buf, size_t n);
/* The CUDA result as a libdsa one, with "what failed: NAME (text) at file:line" recorded in ctx. */
DSA_HIDDEN dsa_result_t dsa_cu_fail(dsa_ctx_t ctx, CUresult r, const char *what, const char *file, int line);

/* CU_CHECK(ctx, call): on failure records the call, the CUDA error and file:line, and jumps to the
 * enclosing function's `fail` label with rc set. The one check shape of the runtime; NCCL has
 * the same (transport_nccl.c). */
#define CU_CHECK(ctx, call)                                                                                  \
    do {                                                                                                     \
        CUresult cu_ = (call);                                                                               \
        if (cu_ != CUDA_SUCCESS) {                                                                           \
            rc = dsa_cu_fail(ctx, cu_, #call, __FILE__, __LINE__);                                           \
            goto fail;                                                                                       \
        }                                                                                                    \
    } while (0)

/* CHECK_RC(expr): expr returns a dsa_result_t that already recorded its message; on failure
 * jump to `fail` with rc set. */
#define CHECK_RC(expr)                                                                                       \
    do {                                                                                                     \
        if ((rc = (expr)) != DSA_SUCCESS)                                                                    \
            goto fail;                                                                                       \
    } while (0)

#endif
