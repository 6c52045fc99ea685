/* CPU tests of libdsa (no GPU needed): argument checks with exact messages (the per-layer calls'
 * on a context built by hand, no device: every bound that keeps the calls' offsets inside int64 or
 * int32, at the bound and one past it; the JIT's target), a clear result on a machine without a
 * CUDA device, the rope table against the reference, the JIT disk cache
 * (hit, truncated, bit-flipped, another key, unwritable folder), NVRTC failures through a fake
 * NVRTC (run as a second process: `test_runtime --fake-nvrtc` with DSA_NVRTC_LIBRARY set),
 * out-of-memory at every host allocation of the JIT through the fault injector, and concurrent
 * compiles of one configuration into one cache (each module compiled once; a held lock waited on
 * for a bounded time; a lock file that cannot be used). */
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../check.h"
#include "../ref/ref.h"
#include "args.h"
#include "dsa_testing.h"
#include "kernels/dsa_abi.h"
#include "jit.h"
#include "transport.h"

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
    /* the library links exactly the configurations the generator wrote into out/ */
    int n = 0;
    for (const char *const *c = dsa_configs(); *c; c++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "out/%s/plan.txt", *c);
        if (access(path, R_OK) != 0) {
            printf("FAIL: %s is linked but %s is missing\n", *c, path);
            check_failed++;
        }
        n++;
    }
    glob_t gl;
    CHECK(glob("out/*/plan.txt", 0, NULL, &gl) == 0);
    CHECK_EQ_INT(n, (int)gl.gl_pathc);
    globfree(&gl);
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
    /* a plan's whole numbers by key, for tests and tools: the exchange row of GLM-5.2 at TP 2 x DCP
     * 2 (32 local heads x (512 bf16 partials + 1 fp32 LSE) = 32,896 bytes, specs/glm5.2.lua by hand) */
    int64_t v = -1;
    CHECK(dsa_testing_plan_number("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "exchange_row", &v) == DSA_SUCCESS && v == 32896);
    CHECK(dsa_testing_plan_number("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "heads_local", &v) == DSA_SUCCESS && v == 32);
    CHECK(dsa_testing_plan_number("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "attend_cluster", &v) == DSA_SUCCESS &&
          (v == 1 || v == 2));
    CHECK(dsa_testing_plan_number("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "entry_attend", &v) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL),
                  "dsa_testing_plan_number: key (argument 2) 'entry_attend' is not a whole number of the plan"));
    CHECK(dsa_testing_plan_number("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", "nope", &v) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_testing_plan_number("nope", "heads", &v) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "dsa_testing_plan_number: no configuration named 'nope'") != NULL);
    CHECK(dsa_testing_plan_number(NULL, "heads", &v) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_testing_plan_number: config (argument 1) is NULL"));
    CHECK(dsa_testing_plan_number("tiny_tp4_dcp1_i1_bf16", NULL, &v) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_testing_plan_number("tiny_tp4_dcp1_i1_bf16", "heads", NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_testing_plan_number: value (argument 3) is NULL"));
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
        CHECK(l->ws_q_packed == d->ws_q_packed && l->exchange_row == d->exchange_row &&
              l->attend_ctas_per_token == d->attend_ctas_per_token && !strcmp(l->entry_merge, d->entry_merge) &&
              !strcmp(l->entry_barrier, d->entry_barrier) && !strcmp(l->entry_pack_q, d->entry_pack_q) &&
              !l->entry_pack_q[0] == (l->info.dcp == 1));
        CHECK(l->index_score_group_rows == d->index_score_group_rows && l->index_score_group_rows >= 1 &&
              !strcmp(l->entry_index_score_group, d->entry_index_score_group) &&
              !strcmp(l->entry_index_score_group_smem, d->entry_index_score_group_smem));
        for (int m = 0; m < DSA_NMODULES; m++)
            CHECK(!strcmp(l->modules[m].source.text, d->modules[m].source.text) &&
                  !strcmp(l->modules[m].entry, d->modules[m].entry));
        CHECK(!strcmp(l->config_h.text, d->config_h.text));
        dsa_cfg_free(d);
        /* the public query of a folder gives what dsa_config_info gives for the linked copy, with
         * its strings in the caller's buffer */
        dsa_config_strings_t text;
        memset(&text, 'x', sizeof text);
        dsa_config_info_t q = {.size = sizeof q}, want = {.size = sizeof want};
        CHECK(dsa_config_info_dir(dir, &q, &text) == DSA_SUCCESS);
        CHECK(dsa_config_info((*p)->name, &want) == DSA_SUCCESS);
        CHECK(q.name == text.name && q.target == text.target && q.cache_dtype_name == text.cache_dtype_name);
        CHECK(!strcmp(q.name, want.name) && !strcmp(q.target, want.target) &&
              !strcmp(q.cache_dtype_name, want.cache_dtype_name));
        q.name = want.name = q.target = want.target = q.cache_dtype_name = want.cache_dtype_name = NULL;
        CHECK(memcmp(&q, &want, sizeof q) == 0);
    }
    /* the grouped score kernel's rows (gen/spec.c): 256 wgmma columns over the heads padded to 8,
     * 16, 32 or 64, at most 8 */
    const struct {
        const char *config;
        unsigned rows;
    } group[] = {{"deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 4}, /* 64 heads */
                 {"glm5.2_tp4_dcp1_i1_fp8_ds_mla", 8},       /* 32 */
                 {"tiny_tp4_dcp1_i1_bf16", 8}};              /* 4, padded to 8 */
    for (size_t i = 0; i < sizeof group / sizeof group[0]; i++) {
        const dsa_cfg_t *c = plan_named(group[i].config);
        CHECK(c && c->index_score_group_rows == group[i].rows);
    }
}

/* Writes dir/plan.txt as out/tiny_tp4_dcp1_i1_bf16/plan.txt with line `from` replaced by `to`
 * (to NULL: removed; from NULL: to appended), and the other files copied. Returns the line number
 * of the change. */
static int damaged_folder_raw(const char *dir, const char *from, const char *to)
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

/* The plan of dir sealed again as dsagen seals it: any plan-sha256 line dropped, and a new one,
 * over every byte before it, appended (so that a case reaches the check its edit is for). */
static void reseal(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    FILE *f = fopen(path, "r");
    char *text = calloc(1, 1 << 20), line[8192];
    size_t n = 0;
    while (f && text && fgets(line, sizeof line, f))
        if (strncmp(line, "plan-sha256 ", 12) && n + strlen(line) < (1 << 20)) {
            memcpy(text + n, line, strlen(line));
            n += strlen(line);
        }
    if (f)
        fclose(f);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    CHECK(text && EVP_Digest(text, n, md, &mdlen, EVP_sha256(), NULL) && mdlen == 32);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f && text) {
        fwrite(text, 1, n, f);
        fputs("plan-sha256 ", f);
        for (int i = 0; i < 32; i++)
            fprintf(f, "%02x", md[i]);
        fputs("\n", f);
        fclose(f);
    }
    free(text);
}

/* damaged_folder_raw, then the plan sealed again: the edit is seen by the check it is for, not
 * refused first as an edited plan. */
static int damaged_folder(const char *dir, const char *from, const char *to)
{
    const int at = damaged_folder_raw(dir, from, to);
    reseal(dir);
    return from ? at : at - 1; /* an appended line now comes before the seal, not after it */
}

/* A damaged plan is an error naming its file and line, never a context; dsa_ctx_create_dir's own
 * argument errors name the argument. */
#define ZEROS64 "0000000000000000000000000000000000000000000000000000000000000000"
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
        {"dsa-plan " DSA_STR(DSA_PLAN_ABI), "dsa-plan 2", "plan.txt:%d: error: plan format 2; this libdsa reads format " DSA_STR(DSA_PLAN_ABI) ": regenerate with its dsagen"},
        /* format 2^32 + 4, which atoi read as 4, and a second kernel-abi line: both once accepted
         * (tests/fuzz/fuzz_plan.c checks for either) */
        {"dsa-plan " DSA_STR(DSA_PLAN_ABI), "dsa-plan 4294967300", "plan.txt:%d: error: plan format 4294967300; this libdsa reads format " DSA_STR(DSA_PLAN_ABI) ": regenerate with its dsagen"},
        {NULL, "kernel-abi " DSA_STR(DSA_ABI_VERSION), "plan.txt:%d: error: kernel-abi given twice"},
        /* the sources' SHA-256 lines: each compiled file has one, each names a compiled file once */
        {"source attend.cu", NULL, "plan.txt: error: no 'source attend.cu' line"},
        {NULL, "source PLAN.md " ZEROS64, "plan.txt: error: source PLAN.md: not config.h or a module's file"},
        {"source attend.cu", "source attend.cu 12ab", "plan.txt:%d: error: source attend.cu: '12ab' is not a SHA-256 (64 lowercase hex digits)"},
        {"source attend.cu", "source ../attend.cu " ZEROS64, "plan.txt:%d: error: source: '../attend.cu' is not a file name in the configuration's folder"},
        {"source index.cu", "source attend.cu " ZEROS64, "plan.txt:%d: error: source attend.cu given twice"},
        {"source attend.cu", "source attend.cu " ZEROS64, "plan.txt: error: attend.cu is not the file dsagen wrote with this plan (SHA-256 "},
        {"kernel-abi " DSA_STR(DSA_ABI_VERSION), "kernel-abi 999",
         "plan.txt:%d: error: generated for kernel ABI 999; this libdsa has kernel ABI " DSA_STR(DSA_ABI_VERSION) ": regenerate"},
        {"cache_dtype bf16", "cache_dtype fp4", "plan.txt:%d: error: cache_dtype: 'fp4' is none of bf16, fp8_ds_mla, nvfp4_ds_mla"},
        {"module attend attend.cu", "module attend ../attend.cu", "plan.txt:%d: error: module attend: '../attend.cu' is not a file name in the configuration's folder"},
        {"module attend attend.cu", "module attend gone.cu", "/gone.cu: No such file or directory"},
        {"targets sm_90a", "targets sm_90a;rm", "plan.txt:%d: error: targets: 'sm_90a;rm' is not an architecture like sm_90a (at most 8)"},
        {"rope_mscale", "rope_mscale nan", "plan.txt:%d: error: rope_mscale: 'nan' is not a positive finite number"},
        /* the float fields: a double a float cannot hold, never narrowed to infinity or 0 (found by
         * tests/fuzz/fuzz_plan.c) */
        {"rms_norm_eps", "rms_norm_eps 1e39", "plan.txt:%d: error: rms_norm_eps: '1e39' is not a positive finite number as a float"},
        {"softmax_scale", "softmax_scale 0x1p-150", "plan.txt:%d: error: softmax_scale: '0x1p-150' is not a positive finite number as a float"},
        /* DCP = 1 names no pack, merge or barrier kernel; a plan that says dcp 2 must */
        {"dcp 1", "dcp 2", "plan.txt: error: entry_pack_q: dcp 2 needs this kernel"},
        /* numbers each in range that break a relation the runtime's sizes rely on */
        {"idx_page_bytes 2112", "idx_page_bytes 1", "plan.txt: error: the plan's numbers break idx_page_bytes == block_size x idx_bytes_per_token"},
        {"ws_exchange 4112", "ws_exchange 4111", "plan.txt: error: the plan's numbers break ws_exchange >= dcp x exchange_row"},
        {"ws_idx_keys 16384", "ws_idx_keys 16380", "plan.txt: error: the plan's numbers break ws_idx_keys >= 4 x idx_max_local"},
        {"heads_gathered 4", "heads_gathered 8", "plan.txt: error: the plan's numbers break heads_local x dcp == heads_gathered"},
        {"rope_entries 131072", "rope_entries 131040", "plan.txt: error: the plan's numbers break rope_entries == max_positions x qk_rope_dim / 2"},
        /* the calls' dense rows (tests/fuzz/fuzz_plan.c found these accepted): the argument checks take
         * them as the least stride, and dsa_attend offsets out and lse by them */
        {"q_lat_row 2048", "q_lat_row 1024", "plan.txt: error: the plan's numbers break q_lat_row == heads_local x kv_lora_rank"},
        {"q_pe_row 256", "q_pe_row 257", "plan.txt: error: the plan's numbers break q_pe_row == heads_local x qk_rope_dim"},
        {"out_row 2048", "out_row 4096", "plan.txt: error: the plan's numbers break out_row == heads_local x kv_lora_rank"},
        {"lse_row 4", "lse_row 8", "plan.txt: error: the plan's numbers break lse_row == heads_local"},
        {"idx_q_row 512", "idx_q_row 8", "plan.txt: error: the plan's numbers break idx_q_row == idx_heads x idx_head_dim"},
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
    /* a folder whose config.h was edited after generation (its plan intact): refused, naming the file */
    damaged_folder(dir, "heads 16", "heads 16");
    snprintf(want, sizeof want, "%s/config.h", dir);
    FILE *edit = fopen(want, "a");
    CHECK(edit && fputs("#define DSA_EDITED 1\n", edit) >= 0 && fclose(edit) == 0);
    dsa_cfg_t *edited = NULL;
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT && edited == NULL);
    CHECK(strstr(err, "plan.txt: error: config.h is not the file dsagen wrote with this plan") &&
          strstr(err, "regenerate it"));
    /* the plan's seal: a plan edited after generation, even within every rule, is refused at its
     * plan-sha256 line; a plan without one, with one malformed, or with a line after it likewise */
    damaged_folder_raw(dir, "idx_topk ", "idx_topk 128");
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT && edited == NULL);
    CHECK(strstr(err, "error: the plan was edited after dsagen wrote it (its SHA-256 ") &&
          strstr(err, "regenerate the folder rather than edit it"));
    damaged_folder_raw(dir, "plan-sha256 ", NULL);
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(err, "plan.txt: error: no 'plan-sha256' line (the plan's last line, which dsagen writes)"));
    int at = damaged_folder_raw(dir, "plan-sha256 ", "plan-sha256 12ab");
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "plan.txt:%d: error: plan-sha256: '12ab' is not a SHA-256 (64 lowercase hex digits)", at);
    CHECK(strstr(err, want) != NULL);
    at = damaged_folder_raw(dir, NULL, "source PLAN.md " ZEROS64);
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "plan.txt:%d: error: a line after the plan-sha256 line, which must be the plan's last", at);
    CHECK(strstr(err, want) != NULL);
    damaged_folder(dir, "heads 16", "heads 16"); /* and the untouched folder, sealed by reseal, loads */
    CHECK(dsa_cfg_load_dir(dir, &edited, err, sizeof err) == DSA_SUCCESS && edited != NULL);
    dsa_cfg_free(edited);
    edited = NULL;
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
    /* the folder query refuses what dsa_ctx_create_dir refuses, with the same text, and leaves
     * info's strings unset */
    dsa_config_strings_t text;
    dsa_config_info_t info = {.size = sizeof info};
    CHECK(dsa_config_info_dir(dir, &info, &text) == DSA_ERROR_INVALID_ARGUMENT && info.name == NULL);
    snprintf(want, sizeof want, "dsa_config_info_dir: %s/plan.txt: not a regular file", dir);
    CHECK(!strcmp(dsa_last_error(NULL), want));
    int line = damaged_folder(dir, "heads 16", "heads 0");
    CHECK(dsa_config_info_dir(dir, &info, &text) == DSA_ERROR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "dsa_config_info_dir: %s/plan.txt:%d: error: heads: 0 is outside [1, 4096]", dir, line);
    CHECK(!strcmp(dsa_last_error(NULL), want));
    CHECK(dsa_config_info_dir(NULL, &info, &text) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_config_info_dir: dir (argument 1) is NULL"));
    CHECK(dsa_config_info_dir(dir, NULL, &text) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_config_info_dir: info (argument 2) is NULL"));
    CHECK(dsa_config_info_dir(dir, &info, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_config_info_dir: strings (argument 3) is NULL"));
    info.size = 8;
    CHECK(dsa_config_info_dir(dir, &info, &text) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "dsa_config_info_dir: info->size is 8") != NULL);
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
    /* dsa_nccl_unique_id: its arguments, then an id from NCCL, or NCCL's reason (no network here) */
    unsigned char id[DSA_NCCL_UNIQUE_ID_BYTES + 1];
    CHECK(dsa_nccl_unique_id(NULL, sizeof id) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_nccl_unique_id: id is NULL"));
    CHECK(dsa_nccl_unique_id(id, DSA_NCCL_UNIQUE_ID_BYTES - 1) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_nccl_unique_id: size is 127, must be at least 128"));
    memset(id, 0, sizeof id);
    id[DSA_NCCL_UNIQUE_ID_BYTES] = 0xa5;
    dsa_result_t r = dsa_nccl_unique_id(id, DSA_NCCL_UNIQUE_ID_BYTES);
    if (r == DSA_SUCCESS) {
        int nonzero = 0;
        for (int i = 0; i < DSA_NCCL_UNIQUE_ID_BYTES; i++)
            nonzero |= id[i];
        CHECK(nonzero && id[DSA_NCCL_UNIQUE_ID_BYTES] == 0xa5); /* written, and not one byte past */
    } else {
        CHECK(r == DSA_ERROR_NCCL && !strncmp(dsa_last_error(NULL), "dsa_nccl_unique_id: ", 20));
        printf("SKIPPED: dsa_nccl_unique_id here: %s\n", dsa_last_error(NULL));
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

/* ---- the per-layer calls' argument checks (runtime/args.c), on a context without a device ---- */

/* A context as dsa_ctx_create leaves it for the checks: only its plan (they read nothing else). */
static struct dsa_ctx *fake_ctx(const char *config)
{
    struct dsa_ctx *c = calloc(1, sizeof *c);
    if (c)
        c->cfg = plan_named(config);
    CHECK(c != NULL && c->cfg != NULL);
    return c && c->cfg ? c : (free(c), NULL);
}

/* A device address that is never dereferenced: 256-byte aligned plus off. */
#define DEV(n, off) ((void *)(uintptr_t)(0x7f0000000000ull + 0x100000ull * (n) + (off)))

/* r must be an invalid-argument error whose message is exactly want. */
static void want_error(int line, dsa_result_t r, dsa_ctx_t ctx, const char *want)
{
    if (r == DSA_ERROR_INVALID_ARGUMENT && !strcmp(dsa_last_error(ctx), want)) {
        check_passed++;
        return;
    }
    check_failed++;
    printf("FAIL %s:%d: result %d, message '%s'\n  want '%s'\n", __FILE__, line, (int)r, dsa_last_error(ctx), want);
}
#define WANT_ERROR(r, ctx, want) want_error(__LINE__, (r), (ctx), (want))

static dsa_prologue_args_t good_prologue(void)
{
    dsa_prologue_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = 4;
    a.q_c = DEV(1, 0), a.q_c_out = DEV(2, 0), a.kv = DEV(3, 0), a.idx_k = DEV(4, 0);
    a.positions = DEV(5, 0), a.slot_mapping = DEV(6, 0), a.q_norm_w = DEV(7, 0), a.kv_norm_w = DEV(8, 0);
    a.idx_norm_w = DEV(9, 0), a.idx_norm_b = DEV(10, 0), a.kv_cache = DEV(11, 0), a.idx_cache = DEV(12, 0);
    a.num_cache_blocks = 100;
    a.topk = DEV(13, 0), a.clear_topk = 1;
    return a;
}

static dsa_attend_args_t good_attend(void)
{
    dsa_attend_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = 4;
    a.q_lat = DEV(1, 0), a.q_pe = DEV(2, 0), a.positions = DEV(3, 0), a.topk = DEV(4, 0);
    a.req_of_token = DEV(5, 0), a.seq_lens = DEV(6, 0), a.block_table = DEV(7, 0);
    a.num_requests = 2, a.max_blocks = 10;
    a.kv_cache = DEV(8, 0), a.num_cache_blocks = 100, a.out = DEV(9, 0), a.lse = DEV(10, 0);
    return a;
}

static dsa_index_args_t good_index(void)
{
    dsa_index_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = 4;
    a.q = DEV(1, 0), a.weights = DEV(2, 0), a.positions = DEV(3, 0), a.req_of_token = DEV(4, 0);
    a.seq_lens = DEV(5, 0), a.block_table = DEV(6, 0), a.num_requests = 2, a.max_blocks = 10;
    a.idx_cache = DEV(7, 0), a.num_cache_blocks = 100, a.topk = DEV(8, 0);
    return a;
}

/* The prologue of glm5.2_tp4_dcp4_i1_fp8_ds_mla (block_size 64, 656 + 132 cache bytes per token,
 * q_lora_rank 2048, kv_dim 576, idx_head_dim 128). Without each bound the call would pass the
 * checks and form an offset beyond int64 (calls.c, kernels/dsa_prologue.cuh). */
static void test_prologue_checks(void)
{
    struct dsa_ctx *ctx = fake_ctx("glm5.2_tp4_dcp4_i1_fp8_ds_mla");
    if (!ctx)
        return;
    dsa_prologue_strides_t s;
    dsa_prologue_args_t a = good_prologue();
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS);
    CHECK(s.q_c == 2048 && s.kv == 576 && s.idx_k == 128); /* 0: dense */
    /* every bound, exactly: still valid */
    a.num_tokens = INT32_MAX;
    a.num_cache_blocks = 182887294512507; /* INT64_MAX / 64 / (656 + 132) */
    a.q_c_stride = a.kv_stride = a.idx_k_stride = 1 << 24;
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS);
    CHECK(s.q_c == 1 << 24 && s.kv == 1 << 24 && s.idx_k == 1 << 24);
    a = good_prologue(), a.idx_k = NULL, a.idx_norm_w = a.idx_norm_b = a.idx_cache = NULL, a.clear_topk = 0;
    a.topk = NULL;
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS && s.idx_k == 0); /* not an indexer layer */
    memset(&a, 0, sizeof a), a.size = sizeof a;
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS); /* no tokens: nothing else is read */

    /* num_cache_blocks: num_slots = blocks * 64 (calls.c) and slot * 656 (the kernel) in int64 */
    a = good_prologue(), a.num_cache_blocks = INT64_MAX;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->num_cache_blocks is 9223372036854775807, must be 1..182887294512507");
    a.num_cache_blocks = 182887294512508;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->num_cache_blocks is 182887294512508, must be 1..182887294512507");
    a.num_cache_blocks = 0;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->num_cache_blocks is 0, must be 1..182887294512507");
    a.num_cache_blocks = -1;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->num_cache_blocks is -1, must be 1..182887294512507");
    /* strides: t0 * stride (calls.c) for t0 < 2^31 */
    a = good_prologue(), a.q_c_stride = (1 << 24) + 8;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->q_c_stride is 16777224, at least q_lora_rank (2048), a multiple of 8, at most 16777216");
    a.q_c_stride = INT64_MAX & ~(int64_t)7;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->q_c_stride is 9223372036854775800, at least q_lora_rank (2048), a multiple of 8, at most 16777216");
    a = good_prologue(), a.kv_stride = -8;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->kv_stride is -8, at least kv_dim (576), a multiple of 8, at most 16777216");
    a.kv_stride = INT64_MIN;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->kv_stride is -9223372036854775808, at least kv_dim (576), a multiple of 8, at most 16777216");
    a.kv_stride = 580;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->kv_stride is 580, at least kv_dim (576), a multiple of 8, at most 16777216");
    a = good_prologue(), a.idx_k_stride = (1 << 24) + 1;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->idx_k_stride is 16777217, at least idx_head_dim (128), at most 16777216");
    a.idx_k_stride = -1;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx,
               "dsa_prologue: args->idx_k_stride is -1, at least idx_head_dim (128), at most 16777216");
    /* tokens: a launch takes them as int32 */
    a = good_prologue(), a.num_tokens = (int64_t)1 << 31;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->num_tokens is 2147483648, at most 2^31-1 per call");
    a.num_tokens = INT64_MIN;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->num_tokens is -9223372036854775808, must be >= 0");
    /* pointers */
    a = good_prologue(), a.q_c = NULL;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->q_c is NULL");
    a = good_prologue(), a.q_c = DEV(1, 8);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->q_c is not 16-byte aligned");
    a = good_prologue(), a.kv_norm_w = DEV(8, 2);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->kv_norm_w is not 16-byte aligned");
    a = good_prologue(), a.slot_mapping = NULL;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->slot_mapping is NULL");
    /* every pointer aligned as its kernel loads or stores it: a misaligned one would fault on the
     * device (bf16 cache entries and top-k rows are written 16 bytes at a time; dsa_index reads the
     * indexer cache so) */
    a = good_prologue(), a.kv_cache = DEV(11, 8);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->kv_cache is not 16-byte aligned");
    a = good_prologue(), a.idx_cache = DEV(12, 4);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->idx_cache is not 16-byte aligned");
    a = good_prologue(), a.topk = DEV(13, 4);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->topk is not 16-byte aligned");
    a.clear_topk = 0; /* topk is not written */
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS);
    a = good_prologue(), a.idx_k = DEV(4, 1);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->idx_k is not 2-byte aligned");
    a = good_prologue(), a.idx_norm_b = DEV(10, 3);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->idx_norm_b is not 2-byte aligned");
    a = good_prologue(), a.slot_mapping = DEV(6, 4);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->slot_mapping is not 8-byte aligned");
    a = good_prologue(), a.idx_k = DEV(4, 2), a.idx_norm_w = DEV(9, 2), a.idx_norm_b = DEV(10, 2), a.q_c = DEV(1, 16);
    CHECK(dsa_check_prologue(ctx, &a, &s) == DSA_SUCCESS); /* element-aligned is enough there */
    a = good_prologue(), a.idx_cache = NULL;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->idx_k is given, so args->idx_cache must be too");
    a = good_prologue(), a.topk = NULL;
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, "dsa_prologue: args->clear_topk is set but args->topk is NULL");
    /* the struct's size, the arguments themselves */
    char want[256];
    a = good_prologue(), a.size = 8;
    snprintf(want, sizeof want, "dsa_prologue: args->size is 8, expected %zu", sizeof a);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, want);
    a.size = sizeof a - 1;
    snprintf(want, sizeof want, "dsa_prologue: args->size is %zu, expected %zu", sizeof a - 1, sizeof a);
    WANT_ERROR(dsa_check_prologue(ctx, &a, &s), ctx, want);
    WANT_ERROR(dsa_check_prologue(ctx, NULL, &s), ctx, "dsa_prologue: args is NULL");
    WANT_ERROR(dsa_check_prologue(NULL, &a, &s), NULL, "dsa_prologue: ctx is NULL");
    free(ctx);
}

/* The attend call of glm5.2_tp4_dcp4_i1_fp8_ds_mla (heads_local 16, kv_lora_rank 512, idx_topk
 * 2048, block_size 64). */
static void test_attend_checks(void)
{
    struct dsa_ctx *ctx = fake_ctx("glm5.2_tp4_dcp4_i1_fp8_ds_mla");
    if (!ctx)
        return;
    dsa_attend_strides_t s;
    dsa_attend_args_t a = good_attend();
    CHECK(dsa_check_attend(ctx, &a, &s) == DSA_SUCCESS);
    CHECK(s.q_lat == 16 * 512 && s.q_pe == 16 * 64 && s.topk == 2048);
    a.num_tokens = INT32_MAX;
    a.num_requests = 65536, a.max_blocks = 32767; /* 2^31 - 2^16 entries */
    a.num_cache_blocks = 33554431;               /* (2^31 - 1) / 64 */
    a.q_lat_stride = a.q_pe_stride = a.topk_stride = 1 << 24;
    CHECK(dsa_check_attend(ctx, &a, &s) == DSA_SUCCESS);
    a = good_attend(), a.num_requests = INT32_MAX, a.max_blocks = 1, a.lse = NULL;
    CHECK(dsa_check_attend(ctx, &a, &s) == DSA_SUCCESS);

    /* num_cache_blocks: the kernel keeps slots (blocks * 64) in 32 bits */
    a = good_attend(), a.num_cache_blocks = INT64_MAX;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->num_cache_blocks is 9223372036854775807, must be 1..33554431 (slots are 32-bit in the attend kernel)");
    a.num_cache_blocks = 33554432;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->num_cache_blocks is 33554432, must be 1..33554431 (slots are 32-bit in the attend kernel)");
    a.num_cache_blocks = -5;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->num_cache_blocks is -5, must be 1..33554431 (slots are 32-bit in the attend kernel)");
    a.num_cache_blocks = 0;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->num_cache_blocks is 0, must be 1..33554431 (slots are 32-bit in the attend kernel)");
    /* the block table: req * max_blocks + b (kernels/dsa_attend.cuh) below 2^31 */
    a = good_attend(), a.num_requests = 65536, a.max_blocks = 32768;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->max_blocks is 32768, must be 1..32767 (num_requests x max_blocks < 2^31)");
    a.num_requests = 1, a.max_blocks = INT64_MAX;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->max_blocks is 9223372036854775807, must be 1..2147483647 (num_requests x max_blocks < 2^31)");
    a = good_attend(), a.num_requests = (int64_t)1 << 31;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->num_requests is 2147483648, must be 1..2^31-1");
    a.num_requests = 0;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->num_requests is 0, must be 1..2^31-1");
    /* strides */
    a = good_attend(), a.q_lat_stride = (1 << 24) + 1;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->q_lat_stride is 16777217, at least heads_local x kv_lora_rank (8192), at most 16777216");
    a = good_attend(), a.q_pe_stride = -1;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->q_pe_stride is -1, at least heads_local x qk_rope_dim (1024), at most 16777216");
    a = good_attend(), a.topk_stride = INT64_MAX;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx,
               "dsa_attend: args->topk_stride is 9223372036854775807, at least idx_topk (2048), at most 16777216");
    a = good_attend(), a.num_tokens = (int64_t)1 << 31;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->num_tokens is 2147483648, at most 2^31-1 per call");
    /* pointers and size */
    a = good_attend(), a.kv_cache = DEV(8, 8);
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->kv_cache is not 16-byte aligned");
    a = good_attend(), a.block_table = NULL;
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->block_table is NULL");
    a = good_attend(), a.out = DEV(9, 2); /* bf16 pairs are stored as 4 bytes */
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->out is not 4-byte aligned");
    a = good_attend(), a.lse = DEV(10, 2);
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->lse is not 4-byte aligned");
    a = good_attend(), a.q_pe = DEV(2, 1);
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->q_pe is not 2-byte aligned");
    a = good_attend(), a.block_table = DEV(7, 2);
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, "dsa_attend: args->block_table is not 4-byte aligned");
    a = good_attend(), a.q_lat = DEV(1, 2), a.q_pe = DEV(2, 6), a.topk = DEV(4, 4), a.out = DEV(9, 4);
    CHECK(dsa_check_attend(ctx, &a, &s) == DSA_SUCCESS);
    a = good_attend(), a.size = 0;
    char want[256];
    snprintf(want, sizeof want, "dsa_attend: args->size is 0, expected %zu", sizeof a);
    WANT_ERROR(dsa_check_attend(ctx, &a, &s), ctx, want);
    WANT_ERROR(dsa_check_attend(ctx, NULL, &s), ctx, "dsa_attend: args is NULL");
    free(ctx);
}

/* A testing hook that turns a switch of ctx on and off (runtime/calls.c, check_switch): the switch,
 * *field, 0 by default, set by 1 and cleared by 0; 2 and a NULL ctx refused, each with its message. */
static void check_on_off(struct dsa_ctx *ctx, dsa_result_t (*hook)(dsa_ctx_t, int), const char *name, const int *field)
{
    char want[160];
    CHECK(*field == 0);
    CHECK(hook(ctx, 1) == DSA_SUCCESS && *field == 1);
    CHECK(hook(ctx, 0) == DSA_SUCCESS && *field == 0);
    snprintf(want, sizeof want, "%s: on is 2, must be 0 or 1", name);
    WANT_ERROR(hook(ctx, 2), ctx, want);
    snprintf(want, sizeof want, "%s: ctx is NULL", name);
    WANT_ERROR(hook(NULL, 1), NULL, want);
}

/* Where a split row is merged (runtime/calls.c, attend_cluster_merges): in the cluster of its
 * split CTAs only where the module has the cluster merge (attend_cluster_merge, its most splits),
 * the device holds all of the chunk's clusters at once (attend_clusters, per size) and no test
 * turned it off; a module without it refuses the switch's 1. DeepSeek-V3.2 at TP8, 16 heads, a
 * device of 132 one-CTA slots: 1 row and 8 rows split 16 ways, 64 rows 2 ways, 128 rows not. */
static void test_cluster_merge_choice(void)
{
    struct dsa_ctx *ctx = fake_ctx("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla");
    if (!ctx)
        return;
    ctx->attend_slots = 132, ctx->ws_tokens = 128;
    CHECK(ctx->cfg->attend_max_splits == 16 && ctx->cfg->attend_ctas_per_token == 1);
    CHECK(dsa_testing_attend_splits(ctx, 1) == 16 && dsa_testing_attend_splits(ctx, 8) == 16 &&
          dsa_testing_attend_splits(ctx, 64) == 2 && dsa_testing_attend_splits(ctx, 128) == 1);
    /* no cluster merge in the module: the kernel merges, and the switch's 1 is refused */
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 1) == 0);
    CHECK(dsa_testing_attend_cluster_merge(ctx, 0) == DSA_SUCCESS && ctx->cluster_merge_off == 1);
    CHECK(dsa_testing_attend_cluster_merge(ctx, 1) == DSA_ERROR_UNSUPPORTED &&
          strstr(dsa_last_error(ctx), "dsa_testing_attend_cluster_merge: deepseek_v32_tp8_dcp1_i1_fp8_ds_mla has no "
                                      "cluster merge of a row's splits") != NULL);
    ctx->cluster_merge_off = 0;
    /* up to 16 splits; the device holds 7 clusters of 16 and 66 of 2 */
    ctx->attend_cluster_merge = 16;
    ctx->attend_clusters[1] = 66, ctx->attend_clusters[2] = 33, ctx->attend_clusters[3] = 16, ctx->attend_clusters[4] = 7;
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 1) == 1);
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 7) == 1);  /* 16 splits, 7 clusters */
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 8) == 0);  /* 8 clusters of 16: more than the device holds */
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 64) == 1); /* 2 splits, 64 clusters of 2 */
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 128) == 0); /* not split */
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 0) == 0 && dsa_testing_attend_merges_in_cluster(NULL, 1) == 0);
    /* a module whose clusters stop at 8 (a device without non-portable clusters): 16 splits merge
     * in the kernel */
    ctx->attend_cluster_merge = 8;
    CHECK(dsa_testing_attend_merges_in_cluster(ctx, 1) == 0 && dsa_testing_attend_merges_in_cluster(ctx, 64) == 1);
    ctx->attend_cluster_merge = 16;
    /* the switch: off, then back on */
    CHECK(dsa_testing_attend_cluster_merge(ctx, 0) == DSA_SUCCESS && dsa_testing_attend_merges_in_cluster(ctx, 1) == 0);
    CHECK(dsa_testing_attend_cluster_merge(ctx, 1) == DSA_SUCCESS && dsa_testing_attend_merges_in_cluster(ctx, 1) == 1);
    WANT_ERROR(dsa_testing_attend_cluster_merge(ctx, 2), ctx, "dsa_testing_attend_cluster_merge: on is 2, must be 0 or 1");
    WANT_ERROR(dsa_testing_attend_cluster_merge(NULL, 1), NULL, "dsa_testing_attend_cluster_merge: ctx is NULL");
    free(ctx);
}

/* The index call of glm5.2_tp4_dcp4_i1_fp8_ds_mla (32 heads of 128, idx_topk 2048, 8448-byte
 * pages). */
static void test_index_checks(void)
{
    struct dsa_ctx *ctx = fake_ctx("glm5.2_tp4_dcp4_i1_fp8_ds_mla");
    if (!ctx)
        return;
    dsa_index_strides_t s;
    dsa_index_args_t a = good_index();
    CHECK(dsa_check_index(ctx, &a, &s) == DSA_SUCCESS);
    CHECK(s.q == 32 * 128 && s.weights == 32 && s.topk == 2048);
    a.num_tokens = INT32_MAX;
    a.num_requests = 3, a.max_blocks = 715827882; /* (2^31 - 1) / 3 */
    a.num_cache_blocks = 1091781727847392;        /* INT64_MAX / 8448 */
    a.q_stride = a.weights_stride = a.topk_stride = 1 << 24;
    CHECK(dsa_check_index(ctx, &a, &s) == DSA_SUCCESS);

    /* num_cache_blocks: num_slots and blk * 8448 (kernels/dsa_index.cuh) in int64 */
    a = good_index(), a.num_cache_blocks = INT64_MAX;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->num_cache_blocks is 9223372036854775807, must be 1..1091781727847392");
    a.num_cache_blocks = 1091781727847393;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->num_cache_blocks is 1091781727847393, must be 1..1091781727847392");
    a.num_cache_blocks = 0;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->num_cache_blocks is 0, must be 1..1091781727847392");
    /* the block table: (int64_t)req * max_blocks (kernels/dsa_index.cuh) below 2^31 */
    a = good_index(), a.num_requests = 3, a.max_blocks = 715827883;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->max_blocks is 715827883, must be 1..715827882 (num_requests x max_blocks < 2^31)");
    a.num_requests = INT64_MAX;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->num_requests is 9223372036854775807, must be 1..2^31-1");
    /* strides */
    a = good_index(), a.q_stride = (1 << 24) + 8;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->q_stride is 16777224, at least idx_heads x idx_head_dim (4096), a multiple of 8, at most 16777216");
    a.q_stride = -4096;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->q_stride is -4096, at least idx_heads x idx_head_dim (4096), a multiple of 8, at most 16777216");
    a = good_index(), a.weights_stride = -1;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->weights_stride is -1, at least idx_heads (32), at most 16777216");
    a = good_index(), a.topk_stride = (1 << 24) + 1;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx,
               "dsa_index: args->topk_stride is 16777217, at least idx_topk (2048), at most 16777216");
    a = good_index(), a.num_tokens = (int64_t)1 << 31;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->num_tokens is 2147483648, at most 2^31-1 per call");
    /* pointers and size */
    a = good_index(), a.q = DEV(1, 2);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->q is not 16-byte aligned");
    a = good_index(), a.idx_cache = DEV(7, 4);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->idx_cache is not 16-byte aligned");
    a = good_index(), a.weights = NULL;
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->weights is NULL");
    a = good_index(), a.weights = DEV(2, 2);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->weights is not 4-byte aligned");
    a = good_index(), a.positions = DEV(3, 4);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->positions is not 8-byte aligned");
    a = good_index(), a.topk = DEV(8, 1);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, "dsa_index: args->topk is not 4-byte aligned");
    a = good_index(), a.size = sizeof a / 2;
    char want[256];
    snprintf(want, sizeof want, "dsa_index: args->size is %zu, expected %zu", sizeof a / 2, sizeof a);
    WANT_ERROR(dsa_check_index(ctx, &a, &s), ctx, want);
    WANT_ERROR(dsa_check_index(NULL, &a, &s), NULL, "dsa_index: ctx is NULL");
    /* the score and top-k kernels a test forces: 0..3 (the grouped score kernel) and 0..2 */
    for (int which = 0; which <= 3; which++)
        CHECK(dsa_testing_force_index_score(ctx, which) == DSA_SUCCESS && ctx->force_score == which);
    WANT_ERROR(dsa_testing_force_index_score(ctx, 4), ctx,
               "dsa_testing_force_index_score: which is 4, must be 0 (automatic), 1 (index_score_few), 2 "
               "(index_score) or 3 (index_score_group)");
    WANT_ERROR(dsa_testing_force_index_topk(ctx, 3), ctx,
               "dsa_testing_force_index_topk: which is 3, must be 0 (automatic), 1 (one CTA a row) or 2 (split from "
               "2 CTAs a row)");
    WANT_ERROR(dsa_testing_force_index_score(NULL, 1), NULL, "dsa_testing_force_index_score: ctx is NULL");
    CHECK(ctx->force_score == 3 && ctx->force_topk == 0);
    /* the cap on a row's top-k CTAs: 0 or at least 2; one row of 128K keys on a device that holds
     * 528 split CTAs gets the plan's keys per CTA's count, the cap's, or one CTA below 2 */
    ctx->topk_slots = 528, ctx->idx_tokens = 64;
    const int64_t blocks = 131072 / ctx->cfg->info.block_size, by_keys = 131072 / ctx->cfg->index_topk_split_keys;
    const int64_t auto1 = dsa_index_topk_splits(ctx, 1, blocks);
    CHECK(auto1 == (by_keys < ctx->cfg->index_topk_split_max ? by_keys : ctx->cfg->index_topk_split_max) && auto1 > 4);
    CHECK(dsa_testing_index_topk_cap(ctx, 4) == DSA_SUCCESS && ctx->topk_cap == 4 && dsa_index_topk_splits(ctx, 1, blocks) == 4);
    CHECK(dsa_testing_index_topk_cap(ctx, 16) == DSA_SUCCESS && ctx->topk_cap == 16);
    CHECK(dsa_index_topk_splits(ctx, 64, blocks) == 528 / 64); /* fewer than the cap: unchanged */
    CHECK(dsa_testing_index_topk_cap(ctx, 0) == DSA_SUCCESS && ctx->topk_cap == 0 && dsa_index_topk_splits(ctx, 1, blocks) == auto1);
    /* a table row of any length: no overflow (the UBSan build runs this), the answer of the longest
     * row dsa_index takes (INT32_MAX blocks) */
    CHECK(dsa_index_topk_splits(ctx, 64, INT64_MAX / 2) == dsa_index_topk_splits(ctx, 64, INT32_MAX));
    CHECK(dsa_index_topk_splits(ctx, 1, INT64_MAX) == dsa_index_topk_splits(ctx, 1, INT32_MAX));
    /* rows of at most the plan's index_topk_split_min_keys keys: one CTA a row, unless forced to split;
     * one block more: the split (the number as the generator derives it: 8 CTAs of the fewest keys) */
    CHECK(ctx->cfg->index_topk_split_min_keys == 8 * ctx->cfg->index_topk_split_keys);
    const int64_t short_blocks = (int64_t)ctx->cfg->index_topk_split_min_keys / ctx->cfg->info.block_size;
    CHECK(short_blocks >= 1 && dsa_index_topk_splits(ctx, 1, short_blocks) == 1 &&
          dsa_index_topk_splits(ctx, 64, short_blocks) == 1);
    CHECK(dsa_index_topk_splits(ctx, 1, short_blocks + 1) > 1);
    CHECK(dsa_testing_force_index_topk(ctx, 2) == DSA_SUCCESS && dsa_index_topk_splits(ctx, 1, short_blocks) > 1);
    CHECK(dsa_testing_force_index_topk(ctx, 0) == DSA_SUCCESS);
    WANT_ERROR(dsa_testing_index_topk_cap(ctx, 1), ctx,
               "dsa_testing_index_topk_cap: cap is 1, must be 0 (the automatic choice) or at least 2");
    WANT_ERROR(dsa_testing_index_topk_cap(ctx, -3), ctx,
               "dsa_testing_index_topk_cap: cap is -3, must be 0 (the automatic choice) or at least 2");
    WANT_ERROR(dsa_testing_index_topk_cap(NULL, 2), NULL, "dsa_testing_index_topk_cap: ctx is NULL");
    /* the split top-k's bit emit threshold: 0 (the plan's) or at least 1 */
    CHECK(ctx->topk_bit_keys == 0 && ctx->cfg->index_topk_bit_keys >= 1);
    CHECK(dsa_testing_index_topk_bit_keys(ctx, 1) == DSA_SUCCESS && ctx->topk_bit_keys == 1);
    CHECK(dsa_testing_index_topk_bit_keys(ctx, 0) == DSA_SUCCESS && ctx->topk_bit_keys == 0);
    WANT_ERROR(dsa_testing_index_topk_bit_keys(ctx, -1), ctx,
               "dsa_testing_index_topk_bit_keys: keys is -1, must be 0 (the plan's) or at least 1");
    WANT_ERROR(dsa_testing_index_topk_bit_keys(NULL, 1), NULL, "dsa_testing_index_topk_bit_keys: ctx is NULL");
    /* the score keys kept readable after a call: 0 (dropped, the default) or 1 */
    check_on_off(ctx, dsa_testing_index_keep_keys, "dsa_testing_index_keep_keys", &ctx->keep_index_keys);
    /* the split top-k's first pass: 1 counted by the scores (the default), 0 by the top-k, 2 counted
     * with the chunks read twice */
    CHECK(ctx->no_score_bins == 0 && ctx->no_bins_stage == 0);
    CHECK(dsa_testing_index_score_bins(ctx, 0) == DSA_SUCCESS && ctx->no_score_bins == 1 && ctx->no_bins_stage == 0);
    CHECK(dsa_testing_index_score_bins(ctx, 2) == DSA_SUCCESS && ctx->no_score_bins == 0 && ctx->no_bins_stage == 1);
    CHECK(dsa_testing_index_score_bins(ctx, 1) == DSA_SUCCESS && ctx->no_score_bins == 0 && ctx->no_bins_stage == 0);
    WANT_ERROR(dsa_testing_index_score_bins(ctx, 3), ctx, "dsa_testing_index_score_bins: mode is 3, must be 0, 1 or 2");
    WANT_ERROR(dsa_testing_index_score_bins(ctx, -1), ctx, "dsa_testing_index_score_bins: mode is -1, must be 0, 1 or 2");
    WANT_ERROR(dsa_testing_index_score_bins(NULL, 1), NULL, "dsa_testing_index_score_bins: ctx is NULL");
    /* a call made to fail before its top-k: 0 (the default) or 1 */
    check_on_off(ctx, dsa_testing_index_fail_topk, "dsa_testing_index_fail_topk", &ctx->fail_topk);
    free(ctx);
    /* a plan without the count (its rows never split: one CTA's worth of keys at most): only 0 */
    ctx = fake_ctx("tiny_tp4_dcp2_i1_bf16");
    if (!ctx)
        return;
    CHECK(ctx->cfg->index_score_bins == 0 && ctx->cfg->index_topk_split_max < ctx->cfg->index_topk_split_min);
    CHECK(dsa_testing_index_score_bins(ctx, 0) == DSA_SUCCESS && ctx->no_score_bins == 1);
    CHECK(dsa_testing_index_score_bins(ctx, 2) == DSA_ERROR_UNSUPPORTED &&
          !strcmp(dsa_last_error(ctx), "dsa_testing_index_score_bins: mode is 2, but tiny_tp4_dcp2_i1_bf16's "
                                       "plan has index_score count nothing (index_score_bins 0)"));
    free(ctx);
    test_cluster_merge_choice();
}

/* The JIT's target reaches NVRTC's options and the cache's file names: anything but sm_ and
 * letters or digits (at most 15 characters) is refused before NVRTC is loaded or the cache folder
 * is made. */
/* A bad target is printed escaped: a newline or a terminal escape in it cannot forge a line. */
static void test_escape(void)
{
    char out[37];
    CHECK(!strcmp(dsa_escape("sm_90a\n\033[2Jx", out, sizeof out), "sm_90a\\x0a\\x1b[2Jx"));
    CHECK(!strcmp(dsa_escape("a\\b", out, sizeof out), "a\\x5cb"));
    CHECK(strlen(dsa_escape("sm_90aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", out, sizeof out)) == 32);
    CHECK(strlen(dsa_escape("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01", out, sizeof out)) <= 32);
    dsa_ctx_t ctx;
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.target = "sm_90a\nsrc/x.c:1: error: forged";
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strchr(dsa_last_error(NULL), '\n') && strstr(dsa_last_error(NULL), "sm_90a\\x0asrc/x.c:1: error:"));
}

/* ptxas's report as NVRTC logs it: each entry's lines, and its serialization warning apart */
static void test_jit_report(void)
{
    static const char log[] =
        "ptxas info    : 8 bytes gmem\n"
        "ptxas info    : Compiling entry function 'dsa_split_merge_x' for 'sm_90a'\n"
        "ptxas info    : Function properties for dsa_split_merge_x\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 84 registers, used 0 barriers, 256 bytes smem, 912 bytes cmem[0]\n"
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline "
        "stage in the function 'dsa_attend_x'\n"
        "ptxas info    : Compiling entry function 'dsa_attend_x' for 'sm_90a'\n"
        "ptxas info    : Function properties for dsa_attend_x\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 1 barriers, 912 bytes cmem[0]\n";
    dsa_jit_entry_t e[DSA_JIT_MAX_ENTRIES];
    CHECK_EQ_INT(dsa_jit_parse_entries(log, e), 2);
    CHECK(!strcmp(e[0].name, "dsa_split_merge_x") && !strcmp(e[1].name, "dsa_attend_x"));
    CHECK_EQ_INT(e[0].registers, 84);
    CHECK_EQ_INT(e[0].shared_bytes, 256);
    CHECK_EQ_INT(e[0].wgmma_serialized, 0);
    CHECK_EQ_INT(e[1].registers, 168);
    CHECK_EQ_INT(e[1].stack_bytes, 8);
    CHECK_EQ_INT(e[1].spill_bytes, 4);
    CHECK_EQ_INT(e[1].wgmma_serialized, 7514);
    /* a warning naming no compiled entry marks none */
    static const char other[] = "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                                "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions "
                                "are serialized due to x in the function 'k2'\n";
    CHECK_EQ_INT(dsa_jit_parse_entries(other, e), 1);
    CHECK_EQ_INT(e[0].wgmma_serialized, 0);
}

static void test_jit_target(void)
{
    const dsa_cfg_t *p = plan_named("tiny_tp4_dcp1_i1_bf16");
    char dir[256], err[1024], want[256];
    snprintf(dir, sizeof dir, "/tmp/dsa-test-target-%ld", (long)getpid());
    const char *bad[] = {"sm_90a/../../x", "sm_", "", NULL, "sm_90aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "sm_90a;rm",
                         "sm_90a\n", "SM_90A", "sm_90a ", "sm_9.0", "sm_90a$(id)"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dsa_jit_out_t out[DSA_NMODULES];
        memset(out, 0, sizeof out);
        dsa_result_t r = dsa_jit_compile(p, bad[i], dir, DSA_LOG_QUIET, out, err, sizeof err);
        char safe[37];
        snprintf(want, sizeof want, "target '%s' is not an architecture like sm_90a",
                 bad[i] ? dsa_escape(bad[i], safe, sizeof safe) : "(null)");
        if (r == DSA_ERROR_INVALID_ARGUMENT && !strcmp(err, want)) {
            check_passed++;
        } else {
            check_failed++;
            printf("FAIL target %zu: result %d, '%s'\n", i, (int)r, err);
        }
        CHECK(access(dir, F_OK) != 0); /* no cache folder, so no file in it */
        for (int m = 0; m < DSA_NMODULES; m++)
            free(out[m].cubin);
    }
    /* the 40-character one is quoted to 32 characters */
    dsa_jit_out_t out[DSA_NMODULES];
    CHECK(dsa_jit_compile(p, bad[4], dir, DSA_LOG_QUIET, out, err, sizeof err) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(err, "target 'sm_90aaaaaaaaaaaaaaaaaaaaaaaaaaa' is not an architecture like sm_90a"));

    /* opts->target is checked by dsa_ctx_create before anything else (no device needed), so a
     * long one is never cut to the context's 15 characters and taken for another name */
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.cache_dir = dir;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (!bad[i])
            continue; /* NULL: the configuration's own target */
        dsa_ctx_t ctx = (dsa_ctx_t)1;
        o.target = bad[i];
        dsa_result_t r = dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx);
        char safe[37];
        snprintf(want, sizeof want, "dsa_ctx_create: opts->target '%s' is not an architecture like sm_90a",
                 dsa_escape(bad[i], safe, sizeof safe));
        if (r == DSA_ERROR_INVALID_ARGUMENT && ctx == NULL && !strcmp(dsa_last_error(NULL), want)) {
            check_passed++;
        } else {
            check_failed++;
            printf("FAIL opts->target %zu: result %d, '%s'\n", i, (int)r, dsa_last_error(NULL));
        }
    }
    o.target = bad[4];
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &(dsa_ctx_t){NULL}) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL),
                  "dsa_ctx_create: opts->target 'sm_90aaaaaaaaaaaaaaaaaaaaaaaaaaa' is not an architecture like sm_90a"));
    CHECK(access(dir, F_OK) != 0);
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

/* The folder base, then components of 199 x's each below it up to len characters ("/" included),
 * in buf; 0 where it fits. */
static int long_path(char *buf, size_t n, const char *base, size_t len)
{
    size_t at = (size_t)snprintf(buf, n, "%s", base);
    while (at < len && at + 1 < n) {
        buf[at++] = '/';
        for (int i = 0; i < 199 && at < len && at + 1 < n; i++)
            buf[at++] = 'x';
    }
    buf[at] = '\0';
    return at == len ? 0 : -1;
}

/* Cache paths that do not fit the JIT's buffers (4096 bytes) are never cut to another path: a
 * folder too long compiles in memory and creates nothing; a folder whose entries' names do not
 * fit compiles in memory, and a file at the cut name (the folder and the first characters of the
 * entry's name) is left alone. */
static void test_jit_cache_long_paths(const char *cfg)
{
    char base[128], dir[4400], cmd[4600], err[DSA_ERRLEN];
    dsa_jit_out_t out[DSA_NMODULES];
    snprintf(base, sizeof base, "/tmp/dsa-test-long-%ld", (long)getpid());
    CHECK(long_path(dir, sizeof dir, base, 4200) == 0);
    memset(out, 0, sizeof out);
    CHECK(dsa_jit_compile(plan_named(cfg), "sm_90a", dir, DSA_LOG_QUIET, out, err, sizeof err) == DSA_SUCCESS);
    for (int i = 0; i < DSA_NMODULES; i++) {
        CHECK(out[i].cubin != NULL && !out[i].info.from_cache);
        free(out[i].cubin);
    }
    CHECK(access(base, F_OK) != 0); /* no folder made, not even the first */
    /* a folder of 4073 characters: an entry's path would be cut at 4095, 21 characters into the
     * configuration's name */
    CHECK(long_path(dir, sizeof dir, base, 4073) == 0);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0);
    char user[4200];
    snprintf(user, sizeof user, "%s/%.21s", dir, cfg);
    CHECK(strlen(user) == 4095);
    FILE *f = fopen(user, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    memset(out, 0, sizeof out);
    CHECK(dsa_jit_compile(plan_named(cfg), "sm_90a", dir, DSA_LOG_QUIET, out, err, sizeof err) == DSA_SUCCESS);
    for (int i = 0; i < DSA_NMODULES; i++) {
        CHECK(out[i].cubin != NULL && !out[i].info.from_cache);
        free(out[i].cubin);
    }
    struct stat st;
    CHECK(stat(user, &st) == 0 && S_ISREG(st.st_mode)); /* still there */
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s)\" = %.21s", dir, cfg); /* and nothing else */
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    CHECK(system(cmd) == 0);
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

    /* a FIFO in an entry's place: neither open blocks (a regression is stopped by the alarm), the
     * module is compiled and its entry stored in the FIFO's place, and read from there next time */
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 0);
    entry_path(path, sizeof path);
    CHECK(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    alarm(300);
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 1);
    alarm(0);
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode));
    CHECK(jit(cfg, &info, err, sizeof err) == 0 && compiled == 0);
    test_jit_cache_long_paths(cfg);

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

/* Creators of one configuration at once (DCP ranks in threads or processes, one cache folder):
 * JIT_THREADS threads compile it into an empty folder, released together by a barrier. */
#define JIT_THREADS 4

typedef struct jit_thread {
    const dsa_cfg_t *cfg;
    const char *dir;
    pthread_barrier_t *go;
    dsa_result_t r;
    dsa_jit_out_t out[DSA_NMODULES];
    char err[DSA_ERRLEN];
} jit_thread_t;

static void *jit_thread(void *arg)
{
    jit_thread_t *t = arg;
    pthread_barrier_wait(t->go);
    t->r = dsa_jit_compile(t->cfg, "sm_90a", t->dir, DSA_LOG_QUIET, t->out, t->err, sizeof t->err);
    return NULL;
}

/* The one file of dir matching pattern (a glob), or "" (none, or several). */
static void one_file(const char *dir, const char *pattern, char *buf, size_t n)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    glob_t g;
    buf[0] = '\0';
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc == 1)
        snprintf(buf, n, "%s", g.gl_pathv[0]);
    globfree(&g);
}

static size_t count_files(const char *dir, const char *pattern)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/%s", dir, pattern);
    glob_t g;
    size_t n = glob(pat, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
    globfree(&g);
    return n;
}

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_jit_concurrent(void)
{
    char err[DSA_ERRLEN];
    if (dsa_load_nvrtc(err, sizeof err) != 0) {
        printf("SKIPPED: concurrent JIT tests: no NVRTC on this machine (%s)\n", err);
        return;
    }
    const char *name = "tiny_tp4_dcp1_i1_bf16";
    const dsa_cfg_t *cfg = plan_named(name);
    char dir[256], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/dsa-test-concurrent-%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);

    /* each module compiled by exactly one thread (whichever took its entry's lock first: not
     * always the same thread for every module), loaded from the cache by the others after its
     * lock was released; every thread gets the same bytes */
    static jit_thread_t t[JIT_THREADS];
    pthread_t th[JIT_THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, JIT_THREADS);
    for (int i = 0; i < JIT_THREADS; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].cfg = cfg;
        t[i].dir = dir;
        t[i].go = &go;
        CHECK(pthread_create(&th[i], NULL, jit_thread, &t[i]) == 0);
    }
    for (int i = 0; i < JIT_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < JIT_THREADS; i++) {
        CHECK(t[i].r == DSA_SUCCESS);
        if (t[i].r != DSA_SUCCESS)
            printf("thread %d: %s\n", i, t[i].err);
    }
    for (int m = 0; m < DSA_NMODULES; m++) {
        int compiled_by = 0;
        for (int i = 0; i < JIT_THREADS; i++) {
            compiled_by += t[i].r == DSA_SUCCESS && !t[i].out[m].info.from_cache;
            CHECK(t[i].out[m].cubin && t[i].out[m].len == t[0].out[m].len && t[0].out[m].len > 0 &&
                  !memcmp(t[i].out[m].cubin, t[0].out[m].cubin, t[0].out[m].len));
        }
        CHECK_EQ_INT(compiled_by, 1);
    }
    for (int i = 0; i < JIT_THREADS; i++)
        for (int m = 0; m < DSA_NMODULES; m++)
            free(t[i].out[m].cubin);
    /* left in the folder: each entry and its (empty) lock file, nothing else (no temporary file) */
    CHECK_EQ_INT(count_files(dir, "*.cubin"), DSA_NMODULES);
    CHECK_EQ_INT(count_files(dir, "*.cubin.lock"), DSA_NMODULES);
    CHECK_EQ_INT(count_files(dir, "*"), 2 * DSA_NMODULES);

    /* the entries gone, their lock files left: the prologue's lock held by another open file
     * description (another creator), the attend's a FIFO, the index's a folder. The held one is
     * waited on for dsa_jit_lock_wait_ms, then compiled anyway with a warning; the other two are
     * compiled without a lock (and the FIFO's open does not block); all three are stored */
    char lock[3][512];
    const char *kernel[3] = {"prologue", "attend", "index"};
    for (int k = 0; k < 3; k++) {
        char pat[256];
        snprintf(pat, sizeof pat, "%s.%s.sm_90a.*.cubin.lock", name, kernel[k]);
        one_file(dir, pat, lock[k], sizeof lock[k]);
        CHECK(lock[k][0] != '\0');
        snprintf(pat, sizeof pat, "%s.%s.sm_90a.*.cubin", name, kernel[k]);
        char entry[512];
        one_file(dir, pat, entry, sizeof entry);
        CHECK(entry[0] != '\0' && unlink(entry) == 0);
    }
    int held = open(lock[0], O_RDONLY);
    CHECK(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0);
    CHECK(unlink(lock[1]) == 0 && mkfifo(lock[1], 0600) == 0);
    CHECK(unlink(lock[2]) == 0 && mkdir(lock[2], 0700) == 0);
    char log[300];
    snprintf(log, sizeof log, "%s.log", dir);
    fflush(stderr);
    int saved = dup(2), logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && logfd >= 0 && dup2(logfd, 2) == 2);
    double wait = dsa_jit_lock_wait_ms;
    dsa_jit_lock_wait_ms = 300;
    double t0 = ms_now();
    dsa_jit_out_t out[DSA_NMODULES];
    memset(out, 0, sizeof out);
    dsa_result_t r = dsa_jit_compile(cfg, "sm_90a", dir, DSA_LOG_INFO, out, err, sizeof err);
    double took = ms_now() - t0;
    dsa_jit_lock_wait_ms = wait;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(logfd);
    flock(held, LOCK_UN);
    close(held);
    CHECK(r == DSA_SUCCESS);
    CHECK(took >= 300);
    for (int m = 0; m < DSA_NMODULES; m++) {
        CHECK(out[m].cubin && !out[m].info.from_cache);
        free(out[m].cubin);
    }
    char text[8192] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    unlink(log);
    char want[1024];
    char entry0[512];
    snprintf(entry0, sizeof entry0, "%.*s", (int)(strlen(lock[0]) - 5), lock[0]);
    snprintf(want, sizeof want,
             "dsa: warning: JIT cache entry %s: another process or context has held its lock for 0.3 s; "
             "compiling kernel prologue here as well\n",
             entry0);
    CHECK(strstr(text, want) != NULL);
    snprintf(want, sizeof want, "dsa: cannot use JIT cache lock %s: not a regular file (compiling without it)\n",
             lock[1]);
    CHECK(strstr(text, want) != NULL);
    snprintf(want, sizeof want, "dsa: cannot use JIT cache lock %s: ", lock[2]);
    CHECK(strstr(text, want) != NULL);
    if (check_failed)
        printf("log was:\n%s", text);
    /* stored as ever: the next creator loads all three */
    memset(out, 0, sizeof out);
    CHECK(dsa_jit_compile(cfg, "sm_90a", dir, DSA_LOG_QUIET, out, err, sizeof err) == DSA_SUCCESS);
    for (int m = 0; m < DSA_NMODULES; m++) {
        CHECK(out[m].info.from_cache);
        free(out[m].cubin);
    }
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
    /* the fake says it is NVRTC 99.0, which has a cache of its own: turned off */
    CHECK(strstr(err, "\noptions: --gpu-architecture=sm_90a -std=c++17 --ptxas-options=-v --no-cache\n") != NULL);
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
    /* the sanitizer switch reaches NVRTC as a define (and so the cache key, which hashes the options) */
    setenv("DSA_SANITIZE_BARRIERS", "1", 1);
    r = dsa_jit_compile(p, "sm_90a", "", DSA_LOG_QUIET, out, err, sizeof err);
    CHECK(r == DSA_ERROR_NVRTC);
    CHECK(strstr(err, "\noptions: --gpu-architecture=sm_90a -std=c++17 --ptxas-options=-v -DDSA_SANITIZE_BARRIERS "
                      "--no-cache\n") != NULL);
    setenv("DSA_SANITIZE_BARRIERS", "0", 1);
    r = dsa_jit_compile(p, "sm_90a", "", DSA_LOG_QUIET, out, err, sizeof err);
    CHECK(r == DSA_ERROR_NVRTC && !strstr(err, "SANITIZE"));
    unsetenv("DSA_SANITIZE_BARRIERS");
    if (check_failed)
        printf("message was:\n%s\n", err);
    CHECK_DONE();
}

typedef struct waiter {
    dsa_transport_t *t;
    dsa_result_t rc;
} waiter_t;

static void *waiter_barrier(void *arg)
{
    waiter_t *w = arg;
    w->rc = w->t->barrier(w->t, NULL, NULL);
    return NULL;
}

/* The in-process group's membership (its transport alone: no context, no GPU): a rank once, the
 * same configuration and chunk sizes on every rank (their buffers are sized by them), and no
 * collective once a rank has left while others remain (they hold its buffers as peers) until all
 * have left. */
static void test_inproc_membership(void)
{
    dsa_inproc_group_t g = NULL;
    CHECK(dsa_inproc_group_create(2, &g) == DSA_SUCCESS);
    dsa_options_t o = DSA_OPTIONS_INIT;
    o.inproc_group = g;
    dsa_transport_t *t0 = NULL, *t1 = NULL, *t = NULL;
    const char *cfg = "tiny_tp4_dcp2_i1_bf16";
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 64, 8, &o, &t0) == DSA_SUCCESS && t0);
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 64, 8, &o, &t) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "rank 0 (tiny_tp4_dcp2_i1_bf16, attend_tokens 64, index_tokens 8): "
                                       "opts->dcp_rank is already a context of the group") != NULL);
    o.dcp_rank = 1;
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 16, 8, &o, &t) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "another opts->attend_tokens or opts->index_tokens") != NULL);
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 64, 9, &o, &t) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_transport_inproc(NULL, "tiny_tp4_dcp2_i1_nvfp4_ds_mla", 7, 2, 64, 8, &o, &t) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_transport_inproc(NULL, cfg, 8, 2, 64, 8, &o, &t) == DSA_ERROR_INVALID_ARGUMENT); /* another plan */
    CHECK(strstr(dsa_last_error(NULL), "by its plan's buffer sizes") != NULL);
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 64, 8, &o, &t1) == DSA_SUCCESS && t1);
    CHECK(t1->check(t1, NULL) == DSA_SUCCESS);
    /* the group is not freed while it has contexts (they touch it when destroyed): kept, said so */
    dsa_inproc_group_destroy(g);
    /* rank 0 leaves while rank 1 waits in a collective: rank 1 fails at once, not after 30 s, and
     * its calls are refused before they store into rank 0's freed buffers (check), as are its
     * collectives */
    waiter_t w = {t1, DSA_SUCCESS};
    pthread_t th;
    const double t_start = ms_now();
    CHECK(pthread_create(&th, NULL, waiter_barrier, &w) == 0);
    usleep(100000);
    t0->destroy(t0);
    pthread_join(th, NULL);
    CHECK(w.rc == DSA_ERROR_INTERNAL && ms_now() - t_start < 10000);
    CHECK(t1->check(t1, NULL) == DSA_ERROR_INTERNAL);
    CHECK(t1->barrier(t1, NULL, NULL) == DSA_ERROR_INTERNAL);
    CHECK(strstr(dsa_last_error(NULL), "a rank's context was destroyed while others remain") != NULL);
    o.dcp_rank = 0;
    CHECK(dsa_transport_inproc(NULL, cfg, 7, 2, 64, 8, &o, &t) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(dsa_last_error(NULL), "the group is broken") != NULL);
    /* all have left: a new set of contexts, of another configuration, may use the group */
    t1->destroy(t1);
    CHECK(dsa_transport_inproc(NULL, "tiny_tp4_dcp2_i1_nvfp4_ds_mla", 7, 2, 16, 8, &o, &t0) == DSA_SUCCESS && t0);
    t0->destroy(t0);
    dsa_inproc_group_destroy(g);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--fake-nvrtc"))
        return fake_nvrtc_main();
    test_configs_and_arguments();
    test_config_info();
    test_escape();
    test_prologue_checks();
    test_attend_checks();
    test_index_checks();
    test_jit_report();
    test_jit_target();
    test_plan_folders();
    test_plan_errors();
    test_inproc_membership();
    test_no_device();
    test_loaders();
    test_rope_freqs();
    test_jit_cache();
    test_jit_concurrent();
    CHECK_DONE();
}
