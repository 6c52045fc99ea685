/* dlopen of the CUDA driver, NVRTC and NCCL (see loader.h). */
#include "loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

dsa_cu_api_t dsa_cu;
dsa_nvrtc_api_t dsa_nvrtc;
dsa_nccl_api_t dsa_nccl;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int cu_state, nvrtc_state, nccl_state; /* 0 not tried, 1 loaded, -1 failed */
static char cu_err[512], nvrtc_err[512], nccl_err[512];

static int open_lib(const char *const *names, void **h, char *err, size_t n)
{
    for (const char *const *p = names; *p; p++)
        if ((*h = dlopen(*p, RTLD_NOW | RTLD_LOCAL)))
            return 0;
    snprintf(err, n, "cannot load %s: %s", names[0], dlerror());
    return -1;
}

int dsa_load_cuda(char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    if (cu_state == 0) {
        static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
        void *h;
        cu_state = open_lib(names, &h, cu_err, sizeof cu_err) == 0 ? 1 : -1;
#define X(name)                                                                                              \
    if (cu_state == 1 && !(*(void **)&dsa_cu.name = dlsym(h, DSA_STR(name)))) {                             \
        snprintf(cu_err, sizeof cu_err, "libcuda.so.1 lacks %s: driver too old", DSA_STR(name));           \
        cu_state = -1;                                                                                       \
    }
        DSA_CU_FUNCS(X)
#undef X
    }
    int rc = cu_state == 1 ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "%s", cu_err);
    pthread_mutex_unlock(&lock);
    return rc;
}

int dsa_load_nvrtc(char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    if (nvrtc_state == 0) {
        const char *forced = getenv("DSA_NVRTC_LIBRARY"); /* tests: a fake NVRTC */
        const char *const names[] = {forced ? forced : "libnvrtc.so.13", forced ? NULL : "libnvrtc.so.12",
                                     "libnvrtc.so", NULL};
        void *h;
        nvrtc_state = open_lib(names, &h, nvrtc_err, sizeof nvrtc_err) == 0 ? 1 : -1;
#define X(name)                                                                                              \
    if (nvrtc_state == 1 && !(*(void **)&dsa_nvrtc.name = dlsym(h, #name))) {                              \
        snprintf(nvrtc_err, sizeof nvrtc_err, "the NVRTC library lacks %s", #name);                        \
        nvrtc_state = -1;                                                                                    \
    }
        DSA_NVRTC_FUNCS(X)
#undef X
    }
    int rc = nvrtc_state == 1 ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "%s", nvrtc_err);
    pthread_mutex_unlock(&lock);
    return rc;
}

int dsa_load_nccl(char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    if (nccl_state == 0) {
        static const char *const names[] = {"libnccl.so.2", "libnccl.so", NULL};
        void *h;
        nccl_state = open_lib(names, &h, nccl_err, sizeof nccl_err) == 0 ? 1 : -1;
#define X(name)                                                                                              \
    if (nccl_state == 1 && !(*(void **)&dsa_nccl.name = dlsym(h, #name))) {                                \
        snprintf(nccl_err, sizeof nccl_err, "libnccl.so.2 lacks %s", #name);                               \
        nccl_state = -1;                                                                                     \
    }
        DSA_NCCL_FUNCS(X)
#undef X
    }
    int rc = nccl_state == 1 ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "%s", nccl_err);
    pthread_mutex_unlock(&lock);
    return rc;
}
