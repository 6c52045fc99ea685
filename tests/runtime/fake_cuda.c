/* A fake CUDA driver for tests (loaded through DSA_CUDA_LIBRARY): FAKE_CUDA_DEVICES devices (default
 * 1, at most 8), each of compute capability 9.0 with 132 multiprocessors, so that sm_90a
 * configurations create. Device memory is host memory (cuMemAlloc mallocs, filled with 0xa5 as
 * uninitialised memory would be garbage; copies are memcpy, sets memset), modules are what the fake
 * NVRTC (fake_nvrtc.c) makes, launches do nothing and succeed, events and the one stream are
 * dummies. Work "on the stream" is only what the fake NCCL leaves pending (fakes.h): the
 * synchronous calls wait for it, for at most FAKE_CUDA_HANG_S seconds (default 20), after which
 * the fake says that the code under test would hang there and aborts the process.
 *
 * Fault injection: FAKE_CUDA_FAIL_ALLOC=N or N@D: on device D (every device without @D), the
 * cuMemAlloc calls after the first N since its primary context was retained (from none) fail with
 * CUDA_ERROR_OUT_OF_MEMORY. FAKE_CUDA_LAUNCH_ERROR=CODE: every kernel launch returns CODE (a
 * CUresult, named or not). Read at each call. */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakes.h"

#define MAX_DEVICES 8

struct CUctx_st {
    int dev;
    int refs;       /* primary context retains */
    long allocs;    /* cuMemAlloc calls that succeeded since refs went from 0 */
    long pending;   /* stream work not complete (fake_cuda_pend) */
};

typedef struct alloc {
    void *p;
    struct alloc *next;
} alloc_t;

struct CUfunc_st {
    char name[192];
};

struct CUmod_st {
    int nfn, nglobal;
    struct CUfunc_st *fn;
    struct {
        char name[192];
        unsigned value;
    } *global;
};

struct CUevent_st {
    int dummy;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle;

void fake_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

__attribute__((constructor)) static void init_idle(void) { fake_cond_init_monotonic(&idle); }
static struct CUctx_st ctxs[MAX_DEVICES];
static alloc_t *allocs;
static long live, bad_frees;
static __thread CUcontext stack[16];
static __thread int depth;

static int devices(void)
{
    const char *e = getenv("FAKE_CUDA_DEVICES");
    const int n = e ? atoi(e) : 1;
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

CUcontext fake_cuda_current(void)
{
    return depth ? stack[depth - 1] : NULL;
}

int fake_cuda_device_of(CUcontext ctx)
{
    return ctx ? ctx->dev : -1;
}

void fake_cuda_pend(CUcontext ctx, int delta)
{
    pthread_mutex_lock(&lock);
    ctx->pending += delta;
    if (ctx->pending == 0)
        pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&lock);
}

long fake_cuda_live_allocs(void)
{
    pthread_mutex_lock(&lock);
    const long n = live;
    pthread_mutex_unlock(&lock);
    return n;
}

long fake_cuda_bad_frees(void)
{
    pthread_mutex_lock(&lock);
    const long n = bad_frees;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Waits until the current context's stream work is complete (what a synchronous call does on the
 * device), or aborts the process after FAKE_CUDA_HANG_S seconds: the real call would never return. */
static CUresult wait_idle(const char *what)
{
    CUcontext c = fake_cuda_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    const char *e = getenv("FAKE_CUDA_HANG_S");
    const int limit = e && atoi(e) > 0 ? atoi(e) : 20;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += limit;
    pthread_mutex_lock(&lock);
    while (c->pending > 0)
        if (pthread_cond_timedwait(&idle, &lock, &until) == ETIMEDOUT && c->pending > 0) {
            fprintf(stderr,
                    "fake CUDA: %s on device %d waited %d s for stream work that never completes (an NCCL "
                    "collective whose peers never join): the code under test would hang here\n",
                    what, c->dev, limit);
            abort();
        }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags)
{
    return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    *count = devices();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (ordinal < 0 || ordinal >= devices())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
    if (dev < 0 || dev >= devices())
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (dev < 0 || dev >= devices())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    struct CUctx_st *c = &ctxs[dev];
    c->dev = dev;
    if (c->refs++ == 0)
        c->allocs = 0;
    pthread_mutex_unlock(&lock);
    *ctx = c;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    if (dev < 0 || dev >= devices())
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    const CUresult r = ctxs[dev].refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS)
        ctxs[dev].refs--;
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
    if (!ctx || depth == (int)(sizeof stack / sizeof stack[0]))
        return CUDA_ERROR_INVALID_VALUE;
    stack[depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *ctx)
{
    if (!depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    *ctx = stack[--depth];
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    return wait_idle("cuCtxSynchronize");
}

CUresult cuStreamQuery(CUstream stream)
{
    (void)stream; /* one stream a context: NCCL's work and the context's are in one queue */
    CUcontext c = fake_cuda_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    const long pending = c->pending;
    pthread_mutex_unlock(&lock);
    return pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* How many of the device's allocations succeed before they fail (FAKE_CUDA_FAIL_ALLOC), -1: all. */
static long alloc_limit(int dev)
{
    const char *e = getenv("FAKE_CUDA_FAIL_ALLOC");
    if (!e || !*e)
        return -1;
    char *end;
    const long n = strtol(e, &end, 10);
    if (*end == '@' && atoi(end + 1) != dev)
        return -1;
    return n;
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    CUcontext c = fake_cuda_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    const long limit = alloc_limit(c->dev);
    pthread_mutex_lock(&lock);
    const int refuse = limit >= 0 && c->allocs >= limit;
    pthread_mutex_unlock(&lock);
    alloc_t *a = refuse ? NULL : malloc(sizeof *a);
    void *m = a ? malloc(bytes) : NULL;
    if (!m) {
        free(a);
        /* FAKE_CUDA_ALLOC_ERROR: the code a refusal returns (default out of memory), e.g. one the
         * driver has no name for */
        const char *code = getenv("FAKE_CUDA_ALLOC_ERROR");
        return code && *code ? (CUresult)atoi(code) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(m, 0xa5, bytes);
    pthread_mutex_lock(&lock);
    c->allocs++;
    a->p = m;
    a->next = allocs;
    allocs = a;
    live++;
    pthread_mutex_unlock(&lock);
    *p = (CUdeviceptr)(uintptr_t)m;
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p)
{
    alloc_t *found = NULL;
    pthread_mutex_lock(&lock);
    for (alloc_t **a = &allocs; *a; a = &(*a)->next)
        if ((*a)->p == (void *)(uintptr_t)p) {
            found = *a;
            *a = found->next;
            live--;
            break;
        }
    if (!found)
        bad_frees++;
    pthread_mutex_unlock(&lock);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;
    free(found->p);
    free(found);
    return CUDA_SUCCESS;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    CUresult r = wait_idle("cuMemcpy");
    if (r == CUDA_SUCCESS)
        memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return r;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    CUresult r = wait_idle("cuMemcpyHtoD");
    if (r == CUDA_SUCCESS)
        memcpy((void *)(uintptr_t)dst, src, n);
    return r;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
    CUresult r = wait_idle("cuMemcpyDtoH");
    if (r == CUDA_SUCCESS)
        memcpy(dst, (const void *)(uintptr_t)src, n);
    return r;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n)
{
    CUresult r = wait_idle("cuMemsetD8");
    if (r == CUDA_SUCCESS)
        memset((void *)(uintptr_t)dst, v, n);
    return r;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream stream)
{
    (void)stream;
    memset((void *)(uintptr_t)dst, v, n);
    return CUDA_SUCCESS;
}

/* The fake NVRTC's cubin: "FAKECUBIN\n", then "entry NAME" and "global NAME" lines. */
CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    const char *s = image;
    if (!s || strncmp(s, "FAKECUBIN\n", 10))
        return CUDA_ERROR_INVALID_IMAGE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    int nfn = 0, nglobal = 0;
    for (const char *l = s + 10; *l; l = strchr(l, '\n') + 1) {
        nfn += !strncmp(l, "entry ", 6);
        nglobal += !strncmp(l, "global ", 7);
        if (!strchr(l, '\n'))
            break;
    }
    if (m) {
        m->fn = calloc((size_t)nfn + 1, sizeof *m->fn);
        m->global = calloc((size_t)nglobal + 1, sizeof *m->global);
    }
    if (!m || !m->fn || !m->global) {
        if (m) {
            free(m->fn);
            free(m->global);
        }
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (const char *l = s + 10; *l;) {
        const char *nl = strchr(l, '\n');
        const int len = nl ? (int)(nl - l) : (int)strlen(l);
        if (!strncmp(l, "entry ", 6))
            snprintf(m->fn[m->nfn++].name, sizeof m->fn[0].name, "%.*s", len - 6, l + 6);
        if (!strncmp(l, "global ", 7)) {
            char *name = m->global[m->nglobal].name;
            snprintf(name, sizeof m->global[0].name, "%.*s", len - 7, l + 7);
            /* the numbers the runtime reads from the attend and index modules: a 256-thread sparse
             * MLA of 64 KiB of shared memory, no cluster merge, no grouped index score */
            m->global[m->nglobal++].value = strstr(name, "_attend_threads_") ? 256
                                            : strstr(name, "_attend_smem_")  ? 65536
                                                                             : 0;
        }
        if (!nl)
            break;
        l = nl + 1;
    }
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m)
{
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    free(m->fn);
    free(m->global);
    free(m);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *fn, CUmodule m, const char *name)
{
    for (int i = 0; m && i < m->nfn; i++)
        if (!strcmp(m->fn[i].name, name)) {
            *fn = &m->fn[i];
            return CUDA_SUCCESS;
        }
    return m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetGlobal(CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name)
{
    for (int i = 0; m && i < m->nglobal; i++)
        if (!strcmp(m->global[i].name, name)) {
            *p = (CUdeviceptr)(uintptr_t)&m->global[i].value;
            *bytes = sizeof m->global[i].value;
            return CUDA_SUCCESS;
        }
    return m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetAttribute(int *v, CUfunction_attribute attr, CUfunction fn)
{
    if (!fn)
        return CUDA_ERROR_INVALID_HANDLE;
    *v = attr == CU_FUNC_ATTRIBUTE_NUM_REGS ? 64 : 0;
    return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction fn, CUfunction_attribute attr, int v)
{
    (void)attr, (void)v;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction fn, int threads, size_t smem)
{
    (void)threads, (void)smem;
    *n = 1;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveClusters(int *n, CUfunction fn, const CUlaunchConfig *config)
{
    (void)config;
    *n = 1;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* A launch's result where its function and context are good: FAKE_CUDA_LAUNCH_ERROR, else success. */
static CUresult launch_result(void)
{
    const char *e = getenv("FAKE_CUDA_LAUNCH_ERROR");
    return e ? (CUresult)atoi(e) : CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream stream, void **args, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)stream, (void)args, (void)extra;
    return !f ? CUDA_ERROR_INVALID_HANDLE : fake_cuda_current() ? launch_result() : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **args, void **extra)
{
    (void)config, (void)args, (void)extra;
    return !f ? CUDA_ERROR_INVALID_HANDLE : fake_cuda_current() ? launch_result() : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned smem, CUstream stream, void **args)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)stream, (void)args;
    return !f ? CUDA_ERROR_INVALID_HANDLE : fake_cuda_current() ? launch_result() : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent e, CUstream stream)
{
    (void)stream;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
    *ms = 0;
    return start && end ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventDestroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}

static const struct {
    CUresult r;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
};

CUresult cuGetErrorName(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == r) {
            *s = errors[i].name;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].r == r) {
            *s = errors[i].text;
            return CUDA_SUCCESS;
        }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
