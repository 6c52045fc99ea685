/* dsa-jit: compiles the kernels of configurations with NVRTC (no GPU needed) and prints, per
 * kernel: registers, local memory (stack + spills), shared memory, cubin size, compile time and
 * whether the JIT cache had it. Exit 1 on any compile error or any spill/stack use.
 * Usage: dsa-jit [--cache DIR] [--target sm_90a] [--dump DIR] [CONFIG...]   (no CONFIG: every linked one)
 * --dump writes each module's cubin to DIR/<config>.<kernel>.cubin, so that two builds of the kernel
 * library can be compared by their machine code (tools/cubin_text_diff.py). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void print_usage(void)
{
    puts("usage: dsa-jit [--cache DIR] [--target ARCH] [--dump DIR] [CONFIG...]\n"
         "Compiles every kernel of each configuration (default: all linked into libdsa) with NVRTC and\n"
         "prints registers, local bytes (stack + spills), shared bytes, cubin size, compile ms, cache hit.\n"
         "--cache DIR uses that JIT cache folder (default: none, always compile).\n"
         "--dump DIR writes each compiled cubin to DIR/<config>.<kernel>.cubin (DIR must exist), e.g. to\n"
         "compare the machine code of two builds with tools/cubin_text_diff.py.\n"
         "Exit 1 on an NVRTC error, a kernel that uses local memory, or a cubin that cannot be written.");
}

/* Writes one cubin to dir/<config>.<kernel>.cubin; 0 on success. */
static int dump_cubin(const char *dir, const char *config, const char *kernel, const dsa_jit_out_t *out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s.cubin", dir, config, kernel);
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("dsa-jit: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    const int ok = fwrite(out->cubin, 1, out->len, f) == out->len;
    if (fclose(f) != 0 || !ok) {
        printf("dsa-jit: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *cache = "", *target = NULL, *dump = NULL;
    const char *only[256];
    int nonly = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            print_usage();
            return 0;
        } else if (!strcmp(argv[i], "--cache") && i + 1 < argc) {
            cache = argv[++i];
        } else if (!strcmp(argv[i], "--target") && i + 1 < argc) {
            target = argv[++i];
        } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            dump = argv[++i];
        } else if (argv[i][0] == '-' || nonly == 256) {
            print_usage();
            return 2;
        } else {
            only[nonly++] = argv[i];
        }
    }
    int failed = 0, found = 0;
    printf("%-40s %-10s %5s %6s %7s %8s %9s %s\n", "configuration", "kernel", "regs", "local", "shared", "cubin",
           "ms", "source");
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++) {
        int want = nonly == 0;
        for (int i = 0; i < nonly; i++)
            want |= strcmp(only[i], (*p)->info.name) == 0;
        if (!want)
            continue;
        found++;
        dsa_jit_out_t out[16];
        char err[DSA_ERRLEN];
        memset(out, 0, sizeof out);
        dsa_result_t rc = dsa_jit_compile(*p, target ? target : (*p)->targets[0], cache, DSA_LOG_WARN, out, err,
                                          sizeof err);
        if (rc != DSA_SUCCESS) {
            printf("%s: %s: %s\n", (*p)->info.name, dsa_strerror(rc), err);
            failed++;
            continue;
        }
        for (int k = 0; k < (*p)->nkernels; k++) {
            const dsa_kernel_info_t *in = &out[k].info;
            printf("%-40s %-10s %5d %6d %7d %8zu %9.1f %s\n", (*p)->info.name, in->name, in->registers, in->local_bytes,
                   in->shared_bytes, out[k].len, in->compile_ms, in->from_cache ? "cache" : "nvrtc");
            if (!in->from_cache && in->local_bytes != 0) {
                printf("%s: kernel %s uses %d bytes of local memory (stack or spills)\n", (*p)->info.name, in->name,
                       in->local_bytes);
                failed++;
            }
            if (dump && dump_cubin(dump, (*p)->info.name, in->name, &out[k]) != 0)
                failed++;
            free(out[k].cubin);
        }
    }
    if (found < (nonly ? nonly : 1)) {
        printf("dsa-jit: %s\n", nonly ? "a named configuration is not linked into libdsa" : "no configurations");
        failed++;
    }
    return failed ? 1 : 0;
}
