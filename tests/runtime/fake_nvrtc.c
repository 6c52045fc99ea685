/* A fake NVRTC for tests (loaded through DSA_NVRTC_LIBRARY). By default every compilation fails with
 * a log pointing at line 12 of the kernel source, as a real syntax error would. With
 * FAKE_NVRTC_MODE=ok in the environment every compilation succeeds without compiling: the log
 * reports each entry function of the source (`extern "C" __global__ void name(`) as ptxas would,
 * 64 registers and no shared or local memory, and the "cubin" is what the fake driver
 * (fake_cuda.c) loads: "FAKECUBIN\n", then a line "entry NAME" per entry function and "global NAME"
 * per exported constant (`extern "C" __device__ const unsigned int name`). */
#include <nvrtc.h>
#include <stdlib.h>
#include <string.h>

static const char fake_log[] = "prologue.cu(12): error: identifier \"oops\" is undefined\n\n1 error detected in the "
                               "compilation of \"prologue.cu\".\n";

typedef struct program {
    char *src;
    char *log;   /* NULL: fake_log */
    char *cubin; /* NULL until a compile succeeded */
    size_t cubin_len;
} program_t;

/* A growing string; on out of memory it stays as it was and marks itself failed. */
typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text_t;

/* Appends a, then n bytes of name, then b. */
static void put(text_t *t, const char *a, const char *name, size_t n, const char *b)
{
    const size_t la = strlen(a), lb = strlen(b), need = t->len + la + n + lb + 1;
    if (t->failed)
        return;
    if (need > t->cap) {
        char *s = realloc(t->s, need * 2);
        if (!s) {
            t->failed = 1;
            return;
        }
        t->s = s;
        t->cap = need * 2;
    }
    memcpy(t->s + t->len, a, la);
    memcpy(t->s + t->len + la, name, n);
    memcpy(t->s + t->len + la + n, b, lb + 1);
    t->len += la + n + lb;
}

static int ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The identifier at *p after skipping blanks and, for an entry, a __launch_bounds__(...) */
static const char *name_after(const char *p, size_t *len)
{
    while (*p == ' ' || *p == '\n' || *p == '\t')
        p++;
    if (!strncmp(p, "__launch_bounds__", 17)) {
        int depth = 0;
        for (p += 17; *p; p++) {
            depth += *p == '(';
            depth -= *p == ')';
            if (*p == ')' && depth == 0) {
                p++;
                break;
            }
        }
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
    }
    const char *q = p;
    while (ident(*q))
        q++;
    *len = (size_t)(q - p);
    return p;
}

/* Builds the log and the cubin of a successful compile from the source's declarations. */
static int fake_compile(program_t *p)
{
    static const char entry[] = "extern \"C\" __global__ void";
    static const char global[] = "extern \"C\" __device__ const unsigned int";
    text_t log = {0}, cubin = {0};
    put(&cubin, "FAKECUBIN\n", "", 0, "");
    for (const char *s = strstr(p->src, entry); s; s = strstr(s + 1, entry)) {
        size_t n;
        const char *name = name_after(s + sizeof entry - 1, &n);
        put(&log, "ptxas info    : Compiling entry function '", name, n, "' for 'sm_90a'\n");
        put(&log, "ptxas info    : Function properties for ", name, n, "\n");
        put(&log, "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n", "", 0, "");
        put(&log, "ptxas info    : Used 64 registers, used 1 barriers, 0 bytes smem, 400 bytes cmem[0]\n", "", 0, "");
        put(&cubin, "entry ", name, n, "\n");
    }
    for (const char *s = strstr(p->src, global); s; s = strstr(s + 1, global)) {
        size_t n;
        const char *name = name_after(s + sizeof global - 1, &n);
        put(&cubin, "global ", name, n, "\n");
    }
    if (log.failed || cubin.failed || !log.s) {
        free(log.s);
        free(cubin.s);
        return -1;
    }
    p->log = log.s;
    p->cubin = cubin.s;
    p->cubin_len = cubin.len + 1;
    return 0;
}

static int ok_mode(void)
{
    const char *m = getenv("FAKE_NVRTC_MODE");
    return m && !strcmp(m, "ok");
}

const char *nvrtcGetErrorString(nvrtcResult r)
{
    return r == NVRTC_SUCCESS ? "NVRTC_SUCCESS" : r == NVRTC_ERROR_OUT_OF_MEMORY ? "NVRTC_ERROR_OUT_OF_MEMORY"
                                                                                  : "NVRTC_ERROR_COMPILATION";
}
nvrtcResult nvrtcVersion(int *major, int *minor)
{
    *major = 99;
    *minor = 0;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int n, const char *const *h,
                               const char *const *names)
{
    (void)name, (void)n, (void)h, (void)names;
    program_t *p = calloc(1, sizeof *p);
    if (p)
        p->src = strdup(src);
    if (!p || !p->src) {
        free(p);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    *prog = (nvrtcProgram)p;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char *const *opts)
{
    (void)n, (void)opts;
    if (!ok_mode())
        return NVRTC_ERROR_COMPILATION;
    return fake_compile((program_t *)prog) == 0 ? NVRTC_SUCCESS : NVRTC_ERROR_OUT_OF_MEMORY;
}
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size)
{
    const program_t *p = (const program_t *)prog;
    *size = p->log ? strlen(p->log) + 1 : sizeof fake_log;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log)
{
    const program_t *p = (const program_t *)prog;
    if (p->log)
        memcpy(log, p->log, strlen(p->log) + 1);
    else
        memcpy(log, fake_log, sizeof fake_log);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size)
{
    const program_t *p = (const program_t *)prog;
    *size = p->cubin ? p->cubin_len : 0;
    return p->cubin ? NVRTC_SUCCESS : NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin)
{
    const program_t *p = (const program_t *)prog;
    if (!p->cubin)
        return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(cubin, p->cubin, p->cubin_len);
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog)
{
    program_t *p = (program_t *)*prog;
    if (p) {
        free(p->src);
        free(p->log);
        free(p->cubin);
        free(p);
    }
    *prog = NULL;
    return NVRTC_SUCCESS;
}
