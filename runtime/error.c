/* Errors, host allocation and logging: the runtime's lowest layer (see error.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static _Thread_local char thread_err[DSA_ERRLEN];

const char *dsa_strerror(dsa_result_t r)
{
    switch (r) {
    case DSA_SUCCESS: return "success";
    case DSA_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case DSA_ERROR_CUDA: return "CUDA error";
    case DSA_ERROR_NVRTC: return "NVRTC compilation error";
    case DSA_ERROR_NCCL: return "NCCL error";
    case DSA_ERROR_OUT_OF_MEMORY: return "out of memory";
    case DSA_ERROR_CACHE: return "JIT cache error";
    case DSA_ERROR_UNSUPPORTED: return "unsupported";
    case DSA_ERROR_INTERNAL: return "internal error";
    }
    return "unknown result code";
}

const char *dsa_last_error(dsa_ctx_t ctx)
{
    return dsa_err_buf(ctx);
}

char *dsa_err_buf(dsa_ctx_t ctx)
{
    return ctx ? ((dsa_err_slot_t *)(void *)ctx)->msg : thread_err;
}

void dsa_err_publish(dsa_ctx_t ctx)
{
    if (ctx)
        memcpy(thread_err, dsa_err_buf(ctx), DSA_ERRLEN);
}

dsa_result_t dsa_fail(dsa_ctx_t ctx, dsa_result_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dsa_err_buf(ctx), DSA_ERRLEN, fmt, ap);
    va_end(ap);
    dsa_err_publish(ctx);
    return r;
}

const char *dsa_cu_describe(CUresult r, char *buf, size_t n)
{
    /* an unknown code: the driver answers CUDA_ERROR_INVALID_VALUE and leaves a NULL string */
    const char *name = NULL, *text = NULL;
    if (!dsa_cu.cuGetErrorName || dsa_cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) {
        snprintf(buf, n, "unknown CUresult %d", (int)r); /* the number is all there is */
        return buf;
    }
    if (!dsa_cu.cuGetErrorString || dsa_cu.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "?";
    snprintf(buf, n, "%s (%s)", name, text);
    return buf;
}

dsa_result_t dsa_cu_fail(dsa_ctx_t ctx, CUresult r, const char *what, const char *file, int line)
{
    char code[256];
    return dsa_fail(ctx, r == CUDA_ERROR_OUT_OF_MEMORY ? DSA_ERROR_OUT_OF_MEMORY : DSA_ERROR_CUDA,
                    "%s failed: %s at %s:%d", what, dsa_cu_describe(r, code, sizeof code), file, line);
}

const char *dsa_escape(const char *in, char *out, size_t n)
{
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)in; in && *c && k + 5 < n; c++)
        k += (size_t)(*c >= 0x20 && *c < 0x7f && *c != '\\' ? snprintf(out + k, n - k, "%c", *c)
                                                             : snprintf(out + k, n - k, "\\x%02x", *c));
    if (n)
        out[k < n ? k : n - 1] = '\0';
    return out;
}

long dsa_fault_after = -1;

static int inject_fault(void)
{
    long left = __atomic_load_n(&dsa_fault_after, __ATOMIC_RELAXED);
    if (left < 0)
        return 0;
    return __atomic_sub_fetch(&dsa_fault_after, 1, __ATOMIC_RELAXED) < 0;
}

void *dsa_malloc(size_t n)
{
    return inject_fault() ? NULL : malloc(n);
}

void *dsa_calloc(size_t n, size_t size)
{
    return inject_fault() ? NULL : calloc(n, size);
}

void dsa_log(int threshold, int level, const char *fmt, ...)
{
    if (threshold < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    flockfile(stderr); /* one line whole: the JIT's threads and a group's ranks log at once */
    fputs(level == DSA_LOG_WARN ? "dsa: warning: " : "dsa: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}
