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
#include "jit.h"

static const dsa_cfg_t *plan_named(const char *name)
{
    char err[1024];
    const dsa_cfg_t *c = dsa_cfg_linked(name, err, sizeof err);
    if (!c)
        printf("%s\n", err);
    return c;
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
    CHECK(!strcmp(dsa_plan_glm5_2_tp4_dcp4_i1_fp8_ds_mla.name, "glm5.2_tp4_dcp4_i1_fp8_ds_mla"));
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

/* Every shipped folder out/<config>/ reads (dsa_cfg_load_dir) to the same plan as its linked,
 * embedded copy: the two ways a host can load a configuration agree. */
static void test_plan_folders(void)
{
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++) {
        char dir[256], err[2048];
        snprintf(dir, sizeof dir, "out/%s", (*p)->name);
        dsa_cfg_t *d = NULL;
        const dsa_cfg_t *l = dsa_cfg_of_plan(*p, err, sizeof err);
        CHECK(l != NULL);
        CHECK(dsa_cfg_load_dir(dir, &d, err, sizeof err) == DSA_SUCCESS);
        if (!l || !d) {
            printf("%s: %s\n", dir, err);
            dsa_cfg_free(d);
            continue;
        }
        dsa_config_info_t a = l->info, b = d->info;
        CHECK(!strcmp(a.name, b.name) && !strcmp(a.target, b.target) && !strcmp(a.cache_dtype_name, b.cache_dtype_name));
        a.name = b.name = a.target = b.target = a.cache_dtype_name = b.cache_dtype_name = NULL;
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK(memcmp(l->rope_freq, d->rope_freq, sizeof l->rope_freq) == 0 && l->rope_mscale == d->rope_mscale);
        CHECK(l->ws_q_packed == d->ws_q_packed && l->exchange_out_block == d->exchange_out_block &&
              l->attend_ctas_per_token == d->attend_ctas_per_token && !strcmp(l->entry_merge, d->entry_merge));
        for (int m = 0; m < DSA_NMODULES; m++)
            CHECK(!strcmp(l->modules[m].source.text, d->modules[m].source.text) &&
                  !strcmp(l->modules[m].entry, d->modules[m].entry));
        CHECK(!strcmp(l->config_h.text, d->config_h.text));
        dsa_cfg_free(d);
    }
}

/* Writes dir/plan.txt as out/tiny_tp4_dcp1_i1_bf16/plan.txt with line `from` replaced by `to`
 * (to NULL: removed; from NULL: to appended), and the other files copied. Returns the line number
 * of the change. */
static int damaged_folder(const char *dir, const char *from, const char *to)
{
    int n = 0, at = 0;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp out/tiny_tp4_dcp1_i1_bf16/*.cu out/tiny_tp4_dcp1_i1_bf16/config.h %s",
             dir, dir, dir);
    CHECK(system(cmd) == 0);
    FILE *in = fopen("out/tiny_tp4_dcp1_i1_bf16/plan.txt", "r");
    char path[512], line[8192];
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    FILE *o = fopen(path, "w");
    while (in && o && fgets(line, sizeof line, in)) {
        n++;
        if (from && !strncmp(line, from, strlen(from))) {
            at = n;
            if (to)
                fprintf(o, "%s\n", to);
        } else {
            fputs(line, o);
        }
    }
    if (!from && o) {
        fprintf(o, "%s\n", to);
        at = n + 1;
    }
    if (in)
        fclose(in);
    if (o)
        fclose(o);
    return at;
}

/* A damaged plan is an error naming its file and line, never a context; dsa_ctx_create_dir's own
 * argument errors name the argument. */
static void test_plan_errors(void)
{
    char dir[256], err[2048], want[1024];
    snprintf(dir, sizeof dir, "/tmp/dsa-test-plan-%ld", (long)getpid());
    const struct {
        const char *from, *to, *msg;
    } cases[] = {
        {"heads 16", "heads 0", "plan.txt:%d: error: heads: 0 is outside [1, 4096]"},
        {"heads 16", "heads 3x", "plan.txt:%d: error: heads: '3x' is not a whole number"},
        {"heads 16", NULL, "plan.txt: error: no 'heads' line"},
        {NULL, "heads 16", "plan.txt:%d: error: heads given twice"},
        {NULL, "colour blue", "plan.txt:%d: error: unknown key 'colour'"},
        {"dsa-plan 3", "dsa-plan 2", "plan.txt:%d: error: plan format 2; this libdsa reads format 3: regenerate with its dsagen"},
        {"kernel-abi 2", "kernel-abi 7", "plan.txt:%d: error: generated for kernel ABI 7; this libdsa has kernel ABI 2: regenerate"},
        {"cache_dtype bf16", "cache_dtype fp4", "plan.txt:%d: error: cache_dtype: 'fp4' is none of bf16, fp8_ds_mla, nvfp4_ds_mla"},
        {"module attend attend.cu", "module attend ../attend.cu", "plan.txt:%d: error: module attend: '../attend.cu' is not a file name in the configuration's folder"},
        {"module attend attend.cu", "module attend gone.cu", "/gone.cu: No such file or directory"},
        {"targets sm_90a", "targets sm_90a;rm", "plan.txt:%d: error: targets: 'sm_90a;rm' is not an architecture like sm_90a (at most 8)"},
        {"rope_mscale", "rope_mscale nan", "plan.txt:%d: error: rope_mscale: 'nan' is not a positive finite number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int line = damaged_folder(dir, cases[i].from, cases[i].to);
        CHECK(line > 0);
        snprintf(want, sizeof want, cases[i].msg, line);
        dsa_cfg_t *c = NULL;
        CHECK(dsa_cfg_load_dir(dir, &c, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT && c == NULL);
        if (!strstr(err, want)) {
            printf("FAIL: case %zu: want '%s' in '%s'\n", i, want, err);
            check_failed++;
        }
    }
    /* a FIFO where plan.txt should be: refused at once, never a blocking read */
    damaged_folder(dir, NULL, "");
    snprintf(want, sizeof want, "%s/plan.txt", dir);
    remove(want);
    CHECK(mkfifo(want, 0600) == 0);
    dsa_cfg_t *c = NULL;
    CHECK(dsa_cfg_load_dir(dir, &c, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT && strstr(err, "not a regular file"));
    dsa_ctx_t ctx = (dsa_ctx_t)1;
    CHECK(dsa_ctx_create_dir(dir, NULL, &ctx) == DSA_ERROR_INVALID_ARGUMENT && ctx == NULL);
    snprintf(want, sizeof want, "dsa_ctx_create_dir: %s/plan.txt: not a regular file", dir);
    CHECK(!strcmp(dsa_last_error(NULL), want));
    CHECK(dsa_ctx_create_dir(NULL, NULL, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create_dir: dir (argument 1) is NULL"));
    CHECK(dsa_ctx_create_dir(dir, NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_ctx_create_dir: ctx (argument 3) is NULL"));
    snprintf(want, sizeof want, "rm -rf %s", dir);
    CHECK(system(want) == 0);
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

/* The frequencies in the plan (derived by dsagen) that the context's rope table kernel uses (cos and
 * sin of pos * freq[i] in double, times mscale), against the reference's cos/sin from the specs'
 * own rope values, for YaRN (DeepSeek-V3.2: theta 1e4, factor 40, beta 32/1, original 4096,
 * mscale 1/1) and plain rope (GLM-5.2: theta 8e6), at positions up to the end of the table: within
 * fp32 rounding. */
static void test_rope_freqs(void)
{
    const char *names[] = {"deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "glm5.2_tp4_dcp4_i1_fp8_ds_mla"};
    const ref_rope rr[] = {{64, 10000.0, 1, 40.0, 32.0, 1.0, 1.0, 4096}, {64, 8000000.0, 0, 1.0, 32.0, 1.0, 1.0, 0}};
    for (int k = 0; k < 2; k++) {
        const dsa_cfg_t *p = plan_named(names[k]);
        const double *freq = p->rope_freq, mscale = p->rope_mscale;
        ref_rope r = rr[k];
        CHECK(p->nrope_freq == 32);
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
    const dsa_cfg_t *p = plan_named(name);
    dsa_result_t r = dsa_jit_compile(p, "sm_90a", cache_dir, DSA_LOG_QUIET, out, err, errlen);
    compiled = 0;
    if (r == DSA_SUCCESS) {
        *info = out[0].info;
        for (int i = 0; i < DSA_NMODULES; i++) {
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
    const int nk = DSA_NMODULES;
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
    const dsa_cfg_t *p = plan_named("tiny_tp4_dcp1_i1_bf16");
    dsa_jit_out_t out[4];
    dsa_result_t r = dsa_jit_compile(p, "sm_90a", "", DSA_LOG_QUIET, out, err, sizeof err);
    CHECK(r == DSA_ERROR_NVRTC);
    CHECK(strstr(err, "kernel prologue (prologue.cu) of tiny_tp4_dcp1_i1_bf16 did not compile\n") == err);
    CHECK(strstr(err, "\noptions: --gpu-architecture=sm_90a -std=c++17 --ptxas-options=-v\n") != NULL);
    CHECK(strstr(err, "NVRTC log:\nprologue.cu(12): error: identifier \"oops\" is undefined") != NULL);
    /* numbered source lines 9..15 around line 12, the offending one marked */
    char line12[256];
    const char *src = p->modules[DSA_MODULE_PROLOGUE].source.text;
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
    test_plan_folders();
    test_plan_errors();
    test_no_device();
    test_loaders();
    test_rope_freqs();
    test_jit_cache();
    CHECK_DONE();
}
