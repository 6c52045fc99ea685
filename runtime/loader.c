/* dlopen of the CUDA driver, NVRTC and NCCL (see loader.h): one loader, three symbol tables. */
#include "loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

dsa_cu_api_t dsa_cu;
dsa_nvrtc_api_t dsa_nvrtc;
dsa_nccl_api_t dsa_nccl;

#define SYMBOL_NAME(name) DSA_STR(name), /* the versioned name cuda.h maps it to, e.g. cuMemAlloc_v2 */
static const char *const cu_names[] = {DSA_CU_FUNCS(SYMBOL_NAME) NULL};
static const char *const nvrtc_names[] = {DSA_NVRTC_FUNCS(SYMBOL_NAME) NULL};
static const char *const nccl_names[] = {DSA_NCCL_FUNCS(SYMBOL_NAME) NULL};
static const char *const nccl_optional[] = {DSA_NCCL_OPTIONAL_FUNCS(SYMBOL_NAME) NULL};
#undef SYMBOL_NAME

/* Where each symbol goes, in the order of the names (the dlsym idiom of POSIX: function pointers
 * stored through void *). */
#define SLOT(api) (void **)&api,
#define CU_SLOT(name) SLOT(dsa_cu.name)
#define NVRTC_SLOT(name) SLOT(dsa_nvrtc.name)
#define NCCL_SLOT(name) SLOT(dsa_nccl.name)
static void **const cu_slots[] = {DSA_CU_FUNCS(CU_SLOT)};
static void **const nvrtc_slots[] = {DSA_NVRTC_FUNCS(NVRTC_SLOT)};
static void **const nccl_slots[] = {DSA_NCCL_FUNCS(NCCL_SLOT)};
static void **const nccl_optional_slots[] = {DSA_NCCL_OPTIONAL_FUNCS(NCCL_SLOT)};

typedef struct library {
    const char *const *symbols; /* NULL-terminated */
    void **const *slots;
    const char *const *optional; /* NULL-terminated or NULL: left NULL where the library lacks them */
    void **const *optional_slots;
    int state;                  /* 0 not tried, 1 loaded, -1 failed (remembered: one attempt) */
    char err[512];
} library_t;

static library_t cuda_lib = {cu_names, cu_slots, NULL, NULL, 0, ""};
static library_t nvrtc_lib = {nvrtc_names, nvrtc_slots, NULL, NULL, 0, ""};
static library_t nccl_lib = {nccl_names, nccl_slots, nccl_optional, nccl_optional_slots, 0, ""};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Opens the first of files that loads and resolves every symbol of lib, once per process. */
static int load(library_t *lib, const char *const *files, char *err, size_t errlen)
{
    pthread_mutex_lock(&lock);
    if (lib->state == 0) {
        void *h = NULL;
        for (const char *const *f = files; *f && !h; f++)
            h = dlopen(*f, RTLD_NOW | RTLD_LOCAL);
        lib->state = h ? 1 : -1;
        if (!h)
            snprintf(lib->err, sizeof lib->err, "cannot load %s: %s", files[0], dlerror());
        for (size_t i = 0; h && lib->symbols[i]; i++) {
            if (!(*lib->slots[i] = dlsym(h, lib->symbols[i]))) {
                snprintf(lib->err, sizeof lib->err, "%s lacks %s (too old?)", files[0], lib->symbols[i]);
                lib->state = -1;
                break;
            }
        }
        for (size_t i = 0; h && lib->state == 1 && lib->optional && lib->optional[i]; i++)
            *lib->optional_slots[i] = dlsym(h, lib->optional[i]);
    }
    int rc = lib->state == 1 ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "%s", lib->err);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* DSA_CUDA_LIBRARY, DSA_NVRTC_LIBRARY and DSA_NCCL_LIBRARY name a file to open instead of the
 * system's library: test hooks (tests/runtime/fake_*.c: a driver of host memory, an NVRTC that fails
 * or succeeds without compiling, an NCCL across threads; dsa_testing.h). Read at the first load.
 * The file an override names; NULL where the variable is unset or empty (an empty one would be
 * dlopen(""), the program itself). */
static const char *forced_library(const char *var)
{
    const char *f = getenv(var);
    return f && *f ? f : NULL;
}

int dsa_load_cuda(char *err, size_t errlen)
{
    const char *forced = forced_library("DSA_CUDA_LIBRARY"); /* tests: a fake driver */
    const char *const files[] = {forced ? forced : "libcuda.so.1", forced ? NULL : "libcuda.so", NULL};
    return load(&cuda_lib, files, err, errlen);
}

int dsa_load_nvrtc(char *err, size_t errlen)
{
    const char *forced = forced_library("DSA_NVRTC_LIBRARY"); /* tests: a fake NVRTC */
    const char *const files[] = {forced ? forced : "libnvrtc.so.13", forced ? NULL : "libnvrtc.so.12", "libnvrtc.so",
                                 NULL};
    return load(&nvrtc_lib, files, err, errlen);
}

int dsa_load_nccl(char *err, size_t errlen)
{
    const char *forced = forced_library("DSA_NCCL_LIBRARY"); /* tests: a fake NCCL */
    const char *const files[] = {forced ? forced : "libnccl.so.2", forced ? NULL : "libnccl.so", NULL};
    return load(&nccl_lib, files, err, errlen);
}
