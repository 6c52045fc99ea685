/* The CUDA driver, NVRTC and NCCL, loaded at run time (dlopen) rather than linked: libdsa then loads on
 * a machine without a GPU driver and says so with a result code, the JIT compiles without a GPU,
 * and tests can substitute fakes (DSA_CUDA_LIBRARY, DSA_NVRTC_LIBRARY, DSA_NCCL_LIBRARY: loader.c).
 * Calls go through dsa_cu / dsa_nvrtc / dsa_nccl. */
#ifndef DSA_LOADER_H
#define DSA_LOADER_H

#include <cuda.h>
#include <nccl.h>
#include <nvrtc.h>

#define DSA_STR2(x) #x
#define DSA_STR(x) DSA_STR2(x) /* expands cuda.h's versioned names: cuMemAlloc -> "cuMemAlloc_v2" */

#define DSA_CU_FUNCS(X)                                                                                      \
    X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)         \
    X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxSynchronize)                 \
    X(cuModuleLoadData) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxActiveClusters) X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuModuleUnload) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuMemAlloc)        \
    X(cuMemFree) X(cuMemcpy) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD8Async) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel) X(cuEventRecord) X(cuEventCreate) X(cuEventElapsedTime) X(cuEventDestroy) X(cuGetErrorName)          \
    X(cuGetErrorString)

#define DSA_NVRTC_FUNCS(X)                                                                                   \
    X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)                  \
    X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram) X(nvrtcGetErrorString)

#define DSA_NCCL_FUNCS(X)                                                                                    \
    X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommCount) X(ncclCommUserRank) X(ncclAllGather) X(ncclSend)  \
    X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetErrorString) X(ncclGetUniqueId)

/* NCCL's symmetric memory (2.27 on): NULL in dsa_nccl where the library lacks them, and the DCP
 * transport then allocates plain memory (transport_nccl.c). */
#define DSA_NCCL_OPTIONAL_FUNCS(X)                                                                           \
    X(ncclMemAlloc) X(ncclMemFree) X(ncclCommWindowRegister) X(ncclCommWindowDeregister) X(ncclGetVersion)

#define DSA_FN_FIELD(name) __typeof__(name) *name;
typedef struct dsa_cu_api {
    DSA_CU_FUNCS(DSA_FN_FIELD)
} dsa_cu_api_t;
typedef struct dsa_nvrtc_api {
    DSA_NVRTC_FUNCS(DSA_FN_FIELD)
} dsa_nvrtc_api_t;
typedef struct dsa_nccl_api {
    DSA_NCCL_FUNCS(DSA_FN_FIELD)
    DSA_NCCL_OPTIONAL_FUNCS(DSA_FN_FIELD)
} dsa_nccl_api_t;
#undef DSA_FN_FIELD

extern __attribute__((visibility("hidden"))) dsa_cu_api_t dsa_cu;
extern __attribute__((visibility("hidden"))) dsa_nvrtc_api_t dsa_nvrtc;
extern __attribute__((visibility("hidden"))) dsa_nccl_api_t dsa_nccl;

/* Load once (thread-safe). Return 0, or -1 with a message naming the library and what failed. */
__attribute__((visibility("hidden"))) int dsa_load_cuda(char *err, size_t errlen);
__attribute__((visibility("hidden"))) int dsa_load_nvrtc(char *err, size_t errlen);
__attribute__((visibility("hidden"))) int dsa_load_nccl(char *err, size_t errlen);

#endif
