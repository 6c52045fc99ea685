/* A fake NVRTC for tests (loaded through DSA_NVRTC_LIBRARY): every compilation fails with a log
 * pointing at line 12 of the kernel source, as a real syntax error would. */
#include <stdlib.h>
#include <string.h>
#include <nvrtc.h>

static const char fake_log[] = "prologue.cu(12): error: identifier \"oops\" is undefined\n\n1 error detected in the "
                               "compilation of \"prologue.cu\".\n";

const char *nvrtcGetErrorString(nvrtcResult r) { return r == NVRTC_SUCCESS ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION"; }
nvrtcResult nvrtcVersion(int *major, int *minor) { *major = 99; *minor = 0; return NVRTC_SUCCESS; }
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int n, const char *const *h,
                               const char *const *names)
{
    (void)src, (void)name, (void)n, (void)h, (void)names;
    *prog = (nvrtcProgram)malloc(1);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char *const *opts)
{
    (void)prog, (void)n, (void)opts;
    return NVRTC_ERROR_COMPILATION;
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) { (void)prog; *size = sizeof fake_log; return NVRTC_SUCCESS; }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) { (void)prog; memcpy(log, fake_log, sizeof fake_log); return NVRTC_SUCCESS; }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) { (void)prog; *size = 0; return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) { (void)prog, (void)cubin; return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) { free(*prog); *prog = NULL; return NVRTC_SUCCESS; }
