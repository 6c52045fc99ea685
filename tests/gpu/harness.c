/* The GPU tests' shared set-up (see harness.h). */
#include "harness.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/ref.h"

void harness_ck(CUresult r, const char *call, const char *file, int line)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL, *text = NULL; /* an unknown code: the driver leaves them NULL */
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    if (cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "?";
    printf("FAIL %s:%d: %s: %s (%s)\n", file, line, call, name, text);
    exit(1);
}

unsigned harness_rng = 12345;

float frand(void)
{
    harness_rng = harness_rng * 1664525u + 1013904223u;
    return (float)((harness_rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

uint32_t irand(uint32_t n)
{
    harness_rng = harness_rng * 1664525u + 1013904223u;
    return (harness_rng >> 4) % n;
}

void fill_bf16(uint16_t *x, size_t n, float scale, float offset)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ref_bf16_encode(offset + frand() * scale);
}

void harness_start(const char *what)
{
    if (cuInit(0) != CUDA_SUCCESS) {
        printf("SKIPPED: %s: no CUDA device\n", what);
        exit(0);
    }
    CUdevice dev;
    CUcontext cu;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
}

void harness_use_device(int ordinal)
{
    CUdevice dev;
    CUcontext cu;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, ordinal));
    CK(cuDevicePrimaryCtxRetain(&cu, dev));
    CK(cuCtxSetCurrent(cu));
}

CUdeviceptr harness_alloc(size_t n, const char *file, int line)
{
    CUdeviceptr d = 0;
    harness_ck(cuMemAlloc(&d, n ? n : 1), "cuMemAlloc", file, line);
    return d;
}

CUdeviceptr harness_up(const void *h, size_t n, const char *file, int line)
{
    CUdeviceptr d = harness_alloc(n, file, line);
    if (n)
        harness_ck(cuMemcpyHtoD(d, h, n), "cuMemcpyHtoD", file, line);
    return d;
}

dsa_options_t harness_options(void)
{
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = getenv("DSA_TEST_CACHE");
    return o;
}

int harness_config(const char *name, dsa_config_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
    dsa_result_t r = dsa_config_info(name, info);
    if (r != DSA_SUCCESS) {
        printf("FAIL %s: dsa_config_info: %s: %s\n", name, dsa_strerror(r), dsa_last_error(NULL));
        return -1;
    }
    return 0;
}

int harness_geo(const char *name, geo_t *g)
{
    dsa_config_info_t info;
    if (harness_config(name, &info) != 0)
        return -1;
    /* the plan's symbol, as dsa.h documents it: dsa_plan_ and the name with every character other
     * than a-z, A-Z, 0-9 as '_' */
    char sym[256];
    int n = snprintf(sym, sizeof sym, "dsa_plan_%s", info.name);
    for (char *p = sym + 9; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    const dsa_plan_t *plan = n < (int)sizeof sym ? (const dsa_plan_t *)dlsym(RTLD_DEFAULT, sym) : NULL;
    if (!plan) {
        printf("FAIL %s: libdsa exports no %s\n", name, sym);
        return -1;
    }
    if (geo_from(&info, plan, g) != 0) {
        printf("FAIL %s: %s is not a plan of ABI %d with the rope and indexer values of its config.h\n", name, sym,
               DSA_PLAN_ABI);
        return -1;
    }
    return 0;
}

static int count_gpus(void)
{
    int c = 0;
    if (cuInit(0) == CUDA_SUCCESS)
        cuDeviceGetCount(&c);
    return c;
}

int harness_have_gpus(const char *what, int W)
{
    int n = ranks_count_devices(count_gpus);
    if (n < W) {
        printf("SKIPPED: %s: needs %d GPUs, this machine has %d\n", what, W, n);
        return 0;
    }
    return 1;
}

typedef struct rank_job {
    int W;
    int (*fn)(int rank, int W, void *arg);
    void *arg;
} rank_job_t;

static int run_rank(int rank, int fd, void *arg)
{
    (void)fd;
    const rank_job_t *j = arg;
    harness_use_device(rank);
    return j->fn(rank, j->W, j->arg);
}

int harness_run_ranks(int W, int (*fn)(int rank, int W, void *arg), void *arg)
{
    rank_job_t job = {W, fn, arg};
    ranks_t g;
    int started = ranks_fork(&g, W, 0, 120, run_rank, &job);
    if (started != 0)
        printf("FAIL: cannot start %d rank processes\n", W);
    return ranks_wait(&g) | (started != 0);
}
