/* CPU tests of libdsa (no GPU needed): argument checks with exact messages, a clear result on a
 * machine without a CUDA device, the rope table against the reference, the JIT disk cache
 * (hit, truncated, bit-flipped, another key, unwritable folder), NVRTC failures through a fake
 * NVRTC (run as a second process: `test_runtime --fake-nvrtc` with DSA_NVRTC_LIBRARY set), and
 * out-of-memory at every host allocation of the JIT through the fault injector. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "../ref/ref.h"
#include "internal.h"

static const dsa_plan_t *plan_named(const char *name)
{
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (!strcmp((*p)->info.name, name))
            return *p;
    return NULL;
}

static void test_configs_and_arguments(void)
{
    int n = 0;
    for (const char *const *c = dsa_configs(); *c; c++)
        n++;
    CHECK_EQ_INT(n, 21);
    CHECK(plan_named("glm5.2_tp4_dcp4_i1_fp8_ds_mla") != NULL);

    dsa_ctx_t ctx = (dsa_ctx_t)0x1;
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create: ctx (argument 3) is NULL"));
    CHECK(dsa_ctx_create(NULL, NULL, &ctx) == DSA_ERROR_INVALID_ARGUMENT && ctx == NULL);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create: config (argument 1) is NULL"));
    CHECK(dsa_ctx_create("glm5.3_tp4", NULL, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL),
                  "dsa_ctx_create: no configuration named 'glm5.3_tp4' in this library (dsa_configs() lists them)"));
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.size = 8;
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "opts->size is 8") != NULL);
    o = (dsa_options_t)DSA_OPTIONS_INIT;
    o.max_tokens = 0;
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create: opts->max_tokens is 0, must be > 0"));
    CHECK(dsa_ctx_create_plan(NULL, NULL, &ctx) == DSA_ERROR_INVALID_ARGUMENT && ctx == NULL);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create_plan: plan (argument 1) is NULL"));
    extern const struct dsa_plan dsa_plan_glm5_2_tp4_dcp4_i1_fp8_ds_mla; /* linked by its symbol */
    CHECK(!strcmp(dsa_plan_glm5_2_tp4_dcp4_i1_fp8_ds_mla.info.name, "glm5.2_tp4_dcp4_i1_fp8_ds_mla"));
    o = (dsa_options_t)DSA_OPTIONS_INIT;
    o.size = 8;
    CHECK(dsa_ctx_create_plan(&dsa_plan_glm5_2_tp4_dcp4_i1_fp8_ds_mla, &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_prologue(NULL, NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_prologue: ctx is NULL"));
    uint64_t counts[2];
    CHECK(dsa_take_rejected(NULL, counts) == DSA_ERROR_INVALID_ARGUMENT);
    dsa_ctx_destroy(NULL);
    CHECK(!strcmp(dsa_strerror(DSA_SUCCESS), "success"));
    CHECK(!strcmp(dsa_strerror(DSA_ERROR_NVRTC), "NVRTC compilation error"));
    CHECK(!strcmp(dsa_strerror((dsa_result_t)99), "unknown result code"));
}

/* The configuration query reports what the generator derived, and its argument errors name the
 * argument. Values checked against the shipped GLM-5.2 spec (specs/glm5.2.lua) by hand. */
static void test_config_info(void)
{
    dsa_config_info_t info = {.size = sizeof info};
    CHECK(dsa_config_info("glm5.2_tp4_dcp4_i1_fp8_ds_mla", &info) == DSA_SUCCESS);
    CHECK(!strcmp(info.name, "glm5.2_tp4_dcp4_i1_fp8_ds_mla") && !strcmp(info.target, "sm_90a"));
    CHECK(info.heads == 64 && info.heads_local == 16 && info.heads_gathered == 64 && info.tp == 4 && info.dcp == 4);
    CHECK(info.kv_lora_rank == 512 && info.qk_rope_dim == 64 && info.kv_dim == 576 && info.v_head_dim == 256);
    CHECK(info.cache_dtype == DSA_CACHE_FP8_DS_MLA && !strcmp(info.cache_dtype_name, "fp8_ds_mla"));
    CHECK(info.cache_bytes_per_token == 656 && info.cache_scale_offset == 512 && info.cache_rope_offset == 528);
    CHECK(info.idx_bytes_per_token == 132 && info.idx_page_bytes == 64 * 132 && info.idx_topk == 2048);
    CHECK(info.softmax_scale == 0.0625f);
    CHECK(dsa_config_info("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", &info) == DSA_SUCCESS);
    CHECK(info.cache_dtype == DSA_CACHE_NVFP4_DS_MLA && info.cache_bytes_per_token == 352);
    CHECK(dsa_config_info("nope", &info) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL),
                  "dsa_config_info: no configuration named 'nope' in this library (dsa_configs() lists them)"));
    CHECK(dsa_config_info(NULL, &info) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_config_info: config (argument 1) is NULL"));
    CHECK(dsa_config_info("tiny_tp4_dcp1_i1_bf16", NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_config_info: info (argument 2) is NULL"));
    info.size = 8;
    CHECK(dsa_config_info("tiny_tp4_dcp1_i1_bf16", &info) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "info->size is 8") != NULL);
    CHECK(dsa_ctx_config(NULL, &info) == DSA_ERROR_INVALID_ARGUMENT);
}

/* Without a GPU the create call fails with DSA_ERROR_CUDA and says why; with one, it works. */
static void test_no_device(void)
{
    char err[512];
    int have_driver = dsa_load_cuda(err, sizeof err) == 0;
    int count = 0;
    if (have_driver && dsa_cu.cuInit(0) == CUDA_SUCCESS)
        dsa_cu.cuDeviceGetCount(&count);
    dsa_ctx_t ctx;
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = "";
    dsa_result_t r = dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx);
    if (count == 0) {
        CHECK(r == DSA_ERROR_CUDA);
        CHECK(strstr(dsa_last_error(NULL), "no CUDA driver on this machine") ||
              strstr(dsa_last_error(NULL), "no usable CUDA device"));
        printf("no GPU here: dsa_ctx_create says: %s\n", dsa_last_error(NULL));
    } else {
        CHECK(r == DSA_SUCCESS);
        dsa_ctx_destroy(ctx);
    }
}

/* The run-time loaders: every symbol of a library that is present resolves (here: NCCL and NVRTC,
 * which this machine may have without a GPU). */
static void test_loaders(void)
{
    char err[512];
    if (dsa_load_nccl(err, sizeof err) == 0) {
        CHECK(dsa_nccl.ncclAllGather != NULL && dsa_nccl.ncclGetUniqueId != NULL && dsa_nccl.ncclGroupEnd != NULL);
        int count = -1;
        CHECK(dsa_nccl.ncclCommCount(NULL, &count) != ncclSuccess); /* a real NCCL answers, refusing NULL */
    } else {
        printf("SKIPPED: NCCL loader test: %s\n", err);
    }
    if (dsa_load_nvrtc(err, sizeof err) == 0) {
        int major = 0, minor = 0;
        CHECK(dsa_nvrtc.nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && major >= 12);
    }
}

/* The frequencies the context's rope table kernel uses (cos and sin of pos * freq[i] in double,
 * times mscale) against the reference's cos/sin, for YaRN (DeepSeek-V3.2) and plain rope (GLM-5.2),
 * at positions up to the end of the table: within fp32 rounding. */
static void test_rope_freqs(void)
{
    const char *names[] = {"deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "glm5.2_tp4_dcp4_i1_fp8_ds_mla"};
    for (int k = 0; k < 2; k++) {
        const dsa_plan_t *p = plan_named(names[k]);
        double freq[128], mscale;
        dsa_rope_freqs(p, freq, &mscale);
        ref_rope r = {64, p->rope_theta, p->rope_yarn, p->yarn_factor, p->yarn_beta_fast, p->yarn_beta_slow,
                      p->rope_mscale, p->yarn_original_max_positions};
        double worst = 0;
        const int pos[] = {0, 1, 255, 256, 1000, 4095, 65537, p->info.max_positions - 1};
        for (int i = 0; i < 8; i++) {
            float rc[32], rs[32];
            ref_rope_cos_sin(&r, pos[i], rc, rs);
            for (int j = 0; j < 32; j++) {
                worst = fmax(worst, fabs((float)(cos(pos[i] * freq[j]) * mscale) - rc[j]));
                worst = fmax(worst, fabs((float)(sin(pos[i] * freq[j]) * mscale) - rs[j]));
            }
        }
        CHECK(worst <= 0x1p-24);
    }
}

static char cache_dir[256];

/* Compiles (or loads) every kernel of configuration name; info gets the first kernel's report and
 * compiled the number of kernels NVRTC compiled (the others came from the cache). */
static int compiled;

static int jit(const char *name, dsa_kernel_info_t *info, char *err, size_t errlen)
{
    dsa_jit_out_t out[4];
    memset(out, 0, sizeof out);
    const dsa_plan_t *p = plan_named(name);
    dsa_result_t r = dsa_jit_compile(p, "sm_90a", cache_dir, DSA_LOG_QUIET, out, err, errlen);
    compiled = 0;
    if (r == DSA_SUCCESS) {
        *info = out[0].info;
        for (int i = 0; i < p->nkernels; i++) {
            compiled += !out[i].info.from_cache;
            free(out[i].cubin);
        }
    }
    return (int)r;
}

static void entry_path(char *buf, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/*.cubin 2>/dev/null | head -1", cache_dir);
    FILE *f = popen(cmd, "r");
    buf[0] = '\0';
    if (f && fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = '\0';
    if (f)
        pclose(f);
}

static void damage(const char *path, long at, int truncate_instead)
{
    if (truncate_instead) {
        CHECK(truncate(path, at) == 0);
        return;
    }
    FILE *f = fopen(path, "r+b");
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void test_jit_cache(void)
{
    char err[DSA_ERRLEN];
    if (dsa_load_nvrtc(err, sizeof err) != 0) {
        printf("SKIPPED: JIT cache tests: no NVRTC on this machine (%s)\n", err);
        return;
    }
    snprintf(cache_dir, sizeof cache_dir, "/tmp/dsa-test-cache-%ld", (long)getpid());
    const char *cfg = "tiny_tp4_dcp2_i1_fp8_ds_mla";
    dsa_kernel_info_t info;
    const int nk = plan_named(cfg)->nkernels;
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == nk);
    CHECK(info.registers > 0 && info.local_bytes == 0);
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 0);
    char path[512];
    entry_path(path, sizeof path);
    CHECK(path[0] != '\0');
    struct stat st;
    stat(path, &st);
    /* truncated, then a flipped payload bit, then a flipped key bit (another NVRTC or options):
     * each detected, recompiled, and the rebuilt entry is good again */
    const long where[3] = {st.st_size / 2, st.st_size - 100, 12};
    for (int k = 0; k < 3; k++) {
        damage(path, where[k], k == 0);
        CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 1); /* the damaged one only */
        CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 0);
    }
    /* a cache folder that cannot be created (a file is in the way): compiles in memory */
    char file[300];
    snprintf(file, sizeof file, "%s/blocker", cache_dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    char saved[256];
    snprintf(saved, sizeof saved, "%s", cache_dir);
    snprintf(cache_dir, sizeof cache_dir, "%s/sub", file);
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == nk);
    snprintf(cache_dir, sizeof cache_dir, "%s", saved);

    /* out of memory at each host allocation of a compile, one at a time: a clean error, no crash
     * or leak (the ASan build runs this too), and the next call works */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    CHECK(system(cmd) == 0);
    int ooms = 0;
    for (long n = 0; n < 40; n++) {
        dsa_fault_after = n;
        int r = jit(cfg, &info, err, sizeof err);
        dsa_fault_after = -1;
        CHECK(r == DSA_SUCCESS || r == DSA_ERROR_OUT_OF_MEMORY || r == DSA_ERROR_NVRTC);
        ooms += r != DSA_SUCCESS;
    }
    CHECK(ooms > 0);
    CHECK(jit(cfg, &info, err, sizeof err) == 0);
    CHECK(system(cmd) == 0);
}

/* Second process: DSA_NVRTC_LIBRARY points at the fake, whose compile fails at line 12. */
static int fake_nvrtc_main(void)
{
    char err[DSA_ERRLEN];
    const dsa_plan_t *p = plan_named("tiny_tp4_dcp1_i1_bf16");
    dsa_jit_out_t out[4];
    dsa_result_t r = dsa_jit_compile(p, "sm_90a", "", DSA_LOG_QUIET, out, err, sizeof err);
    CHECK(r == DSA_ERROR_NVRTC);
    CHECK(strstr(err, "kernel prologue (prologue.cu) of tiny_tp4_dcp1_i1_bf16 did not compile\n") == err);
    CHECK(strstr(err, "\noptions: --gpu-architecture=sm_90a -std=c++17 --ptxas-options=-v\n") != NULL);
    CHECK(strstr(err, "NVRTC log:\nprologue.cu(12): error: identifier \"oops\" is undefined") != NULL);
    /* numbered source lines 9..15 around line 12, the offending one marked */
    char line12[256];
    const char *src = p->kernels[0].source.text;
    for (int i = 1; i < 12; i++)
        src = strchr(src, '\n') + 1;
    snprintf(line12, sizeof line12, ">   12 | %.*s\n", (int)(strchr(src, '\n') - src), src);
    CHECK(strstr(err, "source around prologue.cu:12:\n") != NULL);
    CHECK(strstr(err, line12) != NULL);
    CHECK(strstr(err, "     9 | ") != NULL && strstr(err, "    15 | ") != NULL && !strstr(err, "    16 | "));
    if (check_failed)
        printf("message was:\n%s\n", err);
    CHECK_DONE();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--fake-nvrtc"))
        return fake_nvrtc_main();
    test_configs_and_arguments();
    test_config_info();
    test_no_device();
    test_loaders();
    test_rope_freqs();
    test_jit_cache();
    CHECK_DONE();
}
