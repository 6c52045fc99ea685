/* libFuzzer target for libdsa's plan parser (runtime/plan.c): each input is the text of a plan.txt,
 * as dsa_ctx_create_dir reads it from a folder given at run time (untrusted: damaged, hand-edited
 * or hostile). Each input is parsed twice:
 *   - as it is, so that the seal's own rules are fuzzed too (plan-sha256 missing, malformed, twice,
 *     not the last line, not the SHA-256 of what precedes it), and
 *   - resealed: its plan-sha256 lines dropped and a true one appended over the rest, as dsagen
 *     writes it, so that an input that keeps every other rule gets past the seal, checked last, to
 *     what follows it.
 * Whatever the input, either
 *   - dsa_plan_parse fails with DSA_ERROR_INVALID_ARGUMENT and one line without control characters,
 *     "plan.txt:LINE: error: ..." (LINE one of the input's) or "plan.txt: error: ...", which a
 *     short message buffer truncates but does not change or overrun, or
 *   - it succeeds, and then, checked here independently of plan.c: "dsa-plan DSA_PLAN_ABI" is the first line
 *     and a true plan-sha256 line the last (comments and blank lines aside); no key is given twice
 *     (a module or source line: no module or file twice); every string ends inside its field and is
 *     a name; every real number is positive and finite as stored (a float too); every whole number
 *     is stored as written; the relations between fields the runtime divides or sizes by hold
 *     (in __int128); the kernels a DCP > 1 plan needs are named.
 * A plan that parses then goes through what a loaded plan goes through before use:
 * dsa_plan_check_sources against the configuration's files (the embedded files of the linked
 * configuration of the plan's name, else stand-ins), which succeeds only where every file's SHA-256
 * is its source line's; dsa_plan_layout and dsa_plan_number (every number as written); and the
 * per-layer calls' argument checks (runtime/args.c) on a context of this plan without a device, at
 * num_cache_blocks' edges, which accept only what fits as tests/fuzz/fuzz_args.c requires: the
 * dense strides the rows the kernels read or write (from the plan's geometry), every product of the
 * cache's size within int64 (slots within int32 for the attend kernel).
 * A violation aborts (a finding). Built with clang against ASan+UBSan by `ninja fuzz-plan`; run by
 * `tests/fuzz/run.sh plan`, seeded from the generated plans (out/, tests/gpu/outside/). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "dsa_digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WHERE "plan.txt"
#define ERRLEN 2048

static void violated(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_plan: %s (message: '%s')\n", what, msg ? msg : "");
    abort();
}

/* ---- the input's lines ---- */

typedef struct line {
    const char *at;
    size_t n; /* without its '\n' */
} line_t;

/* The line of text[0..len) at *pos into l, *pos past it: 0 at the end. */
static int next_line(const char *text, size_t len, size_t *pos, line_t *l)
{
    if (*pos >= len)
        return 0;
    l->at = text + *pos;
    const char *nl = memchr(l->at, '\n', len - *pos);
    l->n = nl ? (size_t)(nl - l->at) : len - *pos;
    *pos += l->n + (nl != NULL);
    return 1;
}

/* A line that says something: not blank, not a comment. */
static int meaningful(const line_t *l)
{
    return l->n > 0 && l->at[0] != '#';
}

/* The length of l's first word (up to its first space, or all of it). */
static size_t word(const char *s, size_t n)
{
    const char *sp = memchr(s, ' ', n);
    return sp ? (size_t)(sp - s) : n;
}

static int starts(const line_t *l, const char *s)
{
    return l->n >= strlen(s) && !memcmp(l->at, s, strlen(s));
}

/* ---- a parse that failed: its message ---- */

static size_t count_lines(const char *text, size_t len)
{
    size_t pos = 0, n = 0;
    line_t l;
    while (next_line(text, len, &pos, &l))
        n++;
    return n;
}

static void check_message(const char *msg, const char *text, size_t len)
{
    const size_t w = strlen(WHERE);
    if (strncmp(msg, WHERE, w) != 0)
        violated("the message does not start with the plan's name", msg);
    const char *p = msg + w;
    if (*p == ':' && p[1] >= '1' && p[1] <= '9') { /* a line number: one of the input's */
        char *end;
        unsigned long long at = strtoull(p + 1, &end, 10);
        if (*end != ':' || at > count_lines(text, len))
            violated("the message names no line of the plan", msg);
        p = end;
    }
    if (strncmp(p, ": error: ", 9) != 0 || !p[9])
        violated("the message is not 'WHERE[:LINE]: error: ...'", msg);
    for (const char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            violated("the message has a control character (a line break, an escape)", msg);
}

/* ---- a parse that succeeded: what the runtime relies on, checked apart from plan.c ---- */

/* The lines: "dsa-plan DSA_PLAN_ABI" first, a true plan-sha256 line last, no key twice (module: no module
 * twice; source: no file twice). */
static void check_lines(const char *text, size_t len)
{
    line_t ls[512];
    size_t nl = 0, pos = 0;
    line_t l;
    while (next_line(text, len, &pos, &l))
        if (meaningful(&l)) {
            if (nl == sizeof ls / sizeof ls[0])
                violated("a plan of more than 512 key lines accepted", NULL);
            ls[nl++] = l;
        }
    if (nl < 2)
        violated("a plan of fewer than two key lines accepted", NULL);
    /* the header: the format, a number without sign, spaces or overflow */
    unsigned long long fmt = 0;
    int digits = 0;
    if (!starts(&ls[0], "dsa-plan "))
        violated("a plan whose first line is not 'dsa-plan' accepted", NULL);
    for (size_t i = 9; i < ls[0].n; i++, digits++) {
        if (ls[0].at[i] < '0' || ls[0].at[i] > '9' || fmt > 1000000)
            violated("a plan whose format is not a small whole number accepted", NULL);
        fmt = fmt * 10 + (unsigned)(ls[0].at[i] - '0');
    }
    if (!digits || fmt != DSA_PLAN_ABI)
        violated("a plan of another format accepted", NULL);
    /* the seal: every byte before its line */
    const line_t *s = &ls[nl - 1];
    char hex[65];
    if (!starts(s, "plan-sha256 ") || s->n != 12 + 64)
        violated("a plan whose last line is not 'plan-sha256 HEX' accepted", NULL);
    if (dsa_sha256_hex(text, (size_t)(s->at - text), hex) != 0 || memcmp(s->at + 12, hex, 64) != 0)
        violated("a plan whose plan-sha256 is not the SHA-256 of what precedes it accepted", NULL);
    /* no key twice: modules and sources by their first word */
    for (size_t i = 0; i < nl; i++) {
        size_t ki = word(ls[i].at, ls[i].n);
        const int by2 = (ki == 6 && !memcmp(ls[i].at, "module", 6)) || (ki == 6 && !memcmp(ls[i].at, "source", 6));
        if (by2 && ki < ls[i].n)
            ki += 1 + word(ls[i].at + ki + 1, ls[i].n - ki - 1);
        for (size_t j = 0; j < i; j++)
            if (ls[j].n >= ki && !memcmp(ls[j].at, ls[i].at, ki) && (ls[j].n == ki || ls[j].at[ki] == ' ')) {
                char what[160];
                snprintf(what, sizeof what, "a plan that gives '%.*s' twice accepted", (int)(ki < 64 ? ki : 64),
                         ls[i].at);
                violated(what, NULL);
            }
    }
}

/* s ends inside its field of size bytes, is not empty (unless may_empty) and has only letters,
 * digits and extra. */
static void check_name(const char *s, size_t size, const char *extra, int may_empty, const char *what)
{
    const char *end = memchr(s, '\0', size);
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %s", what, !end ? "not terminated inside its field" : "not a name");
    if (!end || (end == s && !may_empty))
        violated(msg, NULL);
    for (const char *c = s; c < end; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              strchr(extra, *c)))
            violated(msg, NULL);
}

static void check_real(double v, const char *what)
{
    if (!isfinite(v) || !(v > 0)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s is %g as stored, not a positive finite number", what, v);
        violated(msg, NULL);
    }
}

static void need(int holds, const char *what)
{
    if (!holds) {
        char msg[160];
        snprintf(msg, sizeof msg, "a plan that breaks %s accepted", what);
        violated(msg, NULL);
    }
}

static void check_cfg(const dsa_cfg_t *c)
{
    const dsa_config_info_t *g = &c->info;
    check_name(c->name, sizeof c->name, ".-", 0, "name");
    check_name(c->symbol, sizeof c->symbol, ".-", 0, "symbol");
    need(c->ntargets >= 1 && c->ntargets <= DSA_MAX_TARGETS, "1 to 8 targets");
    for (int i = 0; i < c->ntargets && i < DSA_MAX_TARGETS; i++) {
        check_name(c->targets[i], sizeof c->targets[i], "", 0, "a target");
        need(!strncmp(c->targets[i], "sm_", 3) && c->targets[i][3], "targets of 'sm_' and more");
    }
    static const char *const dtypes[] = {"bf16", "fp8_ds_mla", "nvfp4_ds_mla"};
    need((unsigned)g->cache_dtype < 3 && !strcmp(c->cache_dtype_name, dtypes[(unsigned)g->cache_dtype % 3]),
         "a cache dtype and its name");
    static const char *const modules[] = {"prologue", "attend", "index"};
    for (int i = 0; i < DSA_NMODULES; i++) {
        need(!strcmp(c->modules[i].name, modules[i]), "the modules in their order");
        check_name(c->modules[i].file, sizeof c->modules[i].file, ".-", 0, "a module's file");
        need(c->modules[i].file[0] != '.', "module files that are not hidden or '..'");
    }
    need(c->nsources >= 0 && c->nsources <= 8, "at most 8 source lines");
    for (int i = 0; i < c->nsources && i < 8; i++) {
        check_name(c->sources[i].file, sizeof c->sources[i].file, ".-", 0, "a source's file");
        need(c->sources[i].file[0] != '.', "source files that are not hidden or '..'");
        check_name(c->sources[i].sha256, sizeof c->sources[i].sha256, "", 0, "a source's SHA-256");
        need(strlen(c->sources[i].sha256) == 64 && strspn(c->sources[i].sha256, "0123456789abcdef") == 64,
             "sources' SHA-256 of 64 lowercase hex digits");
    }
    const struct {
        const char *s;
        int may_empty;
    } entries[] = {{c->entry_prologue, 0}, {c->entry_rope_table, 0}, {c->entry_pack_q, 1},
                   {c->entry_attend, 0}, {c->entry_merge, 1}, {c->entry_split_merge, 0},
                   {c->entry_split_merge_few, 0}, {c->entry_attend_smem, 0}, {c->entry_attend_threads, 0},
                   {c->entry_attend_cluster_merge, 0}, {c->entry_index_q, 0}, {c->entry_index_score, 0},
                   {c->entry_index_score_few, 0}, {c->entry_index_score_group, 0},
                   {c->entry_index_score_group_smem, 0}, {c->entry_index_topk, 0}, {c->entry_index_topk_split, 0},
                   {c->entry_index_merge, 1}, {c->entry_barrier, 1}};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        check_name(entries[i].s, sizeof c->entry_prologue, ".-", 1, "an entry");
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (!entries[i].may_empty)
            need(entries[i].s[0] != '\0', "every kernel's entry named");
    if (g->dcp > 1)
        need(c->entry_pack_q[0] && c->entry_merge[0] && c->entry_index_merge[0] && c->entry_barrier[0],
             "the DCP kernels named at dcp > 1");
    /* real numbers as stored: a float narrowed from a double must stay positive and finite */
    check_real((double)g->rms_norm_eps, "rms_norm_eps");
    check_real((double)g->softmax_scale, "softmax_scale");
    check_real(c->rope_mscale, "rope_mscale");
    need(c->nrope_freq >= 1 && c->nrope_freq <= DSA_MAX_ROPE_PAIRS && 2 * c->nrope_freq == g->qk_rope_dim,
         "qk_rope_dim / 2 rope frequencies");
    for (int i = 0; i < c->nrope_freq && i < DSA_MAX_ROPE_PAIRS; i++)
        check_real(c->rope_freq[i], "a rope frequency");
    /* what the runtime divides by, and the relations its sizes and offsets rely on */
    need(g->block_size >= 1 && g->dcp >= 1 && g->tp >= 1 && g->heads_local >= 1 && g->idx_page_bytes >= 1 &&
             g->cache_bytes_per_token >= 1 && g->idx_bytes_per_token >= 1,
         "sizes the runtime divides by of at least 1");
    need(c->attend_cluster >= 1 && c->attend_ctas_per_token >= 1 && c->attend_ctas_per_token % c->attend_cluster == 0,
         "attend_cluster dividing attend_ctas_per_token");
    need(c->attend_max_splits >= 1 && (c->attend_max_splits & (c->attend_max_splits - 1)) == 0,
         "attend_max_splits a power of two");
    need(c->rope_threads >= 32 && c->index_score_threads >= 32 && c->index_topk_split_threads >= 32,
         "threads per CTA of at least 32");
    need((__int128)g->heads_local * g->tp == g->heads, "heads_local x tp == heads");
    need((__int128)g->heads_local * g->dcp == g->heads_gathered, "heads_local x dcp == heads_gathered");
    need(g->tp % g->dcp == 0, "dcp divides tp");
    need((__int128)g->kv_lora_rank + g->qk_rope_dim == g->kv_dim, "kv_dim == kv_lora_rank + qk_rope_dim");
    need((__int128)g->block_size * g->idx_bytes_per_token == g->idx_page_bytes, "idx_page_bytes");
    need(g->cache_scale_offset >= 0 && g->cache_scale_offset <= g->cache_bytes_per_token && g->cache_rope_offset >= 0 &&
             g->cache_rope_offset < g->cache_bytes_per_token,
         "cache offsets inside the entry");
    need((__int128)c->ws_q_gathered >= (__int128)g->dcp * c->ws_q_packed, "ws_q_gathered >= dcp x ws_q_packed");
    need((__int128)c->ws_exchange >= (__int128)g->dcp * c->exchange_row, "ws_exchange >= dcp x exchange_row");
    need((__int128)c->ws_idx_merged >= (__int128)g->dcp * c->ws_idx_cand, "ws_idx_merged >= dcp x ws_idx_cand");
    need((__int128)c->ws_idx_keys >= (__int128)4 * c->idx_max_local, "ws_idx_keys >= 4 x idx_max_local");
    /* what the parser fills in for the runtime */
    need(g->size == sizeof *g && g->name == c->name && g->target == c->targets[0] &&
             g->cache_dtype_name == c->cache_dtype_name,
         "info's size and strings set");
    need(c->modules[DSA_MODULE_PROLOGUE].entry == c->entry_prologue &&
             c->modules[DSA_MODULE_ATTEND].entry == c->entry_attend &&
             c->modules[DSA_MODULE_INDEX].entry == c->entry_index_score,
         "the modules' first entries set");
}

/* Coverage by magnitude: the binary exponent of a float field's value as written, in steps, each a
 * branch of its own. The parser takes every positive finite double alike, so without this the
 * fuzzer sees no progress toward the edges of a float's range (2^-149, 2^128), where narrowing the
 * value to the float it is stored as loses it. */
static volatile int magnitude_sink;

static void magnitude(double x)
{
    const int e = ilogb(x);
#define STEP(k)                                                                                                        \
    if (e < (k)) {                                                                                                     \
        magnitude_sink = (k);                                                                                          \
        return;                                                                                                        \
    }
    STEP(-1000) STEP(-500) STEP(-256) STEP(-192) STEP(-160) STEP(-150) STEP(-144) STEP(-128) STEP(-126) STEP(-112)
    STEP(-96) STEP(-80) STEP(-64) STEP(-48) STEP(-32) STEP(-16) STEP(0) STEP(16) STEP(32) STEP(48) STEP(64) STEP(80)
    STEP(96) STEP(112) STEP(127) STEP(128) STEP(144) STEP(160) STEP(192) STEP(256) STEP(500) STEP(1000)
#undef STEP
    magnitude_sink = 0;
}

/* Every whole number as written: a line "KEY VALUE" of a key dsa_plan_number knows holds VALUE. */
static void check_numbers(const dsa_cfg_t *c, const char *text, size_t len)
{
    size_t pos = 0;
    line_t l;
    char key[64], value[64];
    while (next_line(text, len, &pos, &l)) {
        const size_t k = word(l.at, l.n);
        if (!meaningful(&l) || k >= sizeof key || k == l.n || l.n - k - 1 >= sizeof value)
            continue;
        memcpy(key, l.at, k);
        key[k] = '\0';
        memcpy(value, l.at + k + 1, l.n - k - 1);
        value[l.n - k - 1] = '\0';
        if (!strcmp(key, "rms_norm_eps") || !strcmp(key, "softmax_scale"))
            magnitude(strtod(value, NULL));
        int64_t got;
        if (dsa_plan_number(c, key, &got) != 0)
            continue;
        if (got != strtoll(value, NULL, 10)) {
            char what[160];
            snprintf(what, sizeof what, "%s %s stored as %lld", key, value, (long long)got);
            violated(what, NULL);
        }
    }
    int64_t v = 7;
    if (dsa_plan_number(c, "name", &v) != -1 || dsa_plan_number(c, "no_such_key", &v) != -1 || v != 7)
        violated("dsa_plan_number gave a number for a key that has none", NULL);
    (void)dsa_plan_layout(c);
}

/* ---- the sources' check ---- */

static const char stand_in_text[] = "/* a stand-in for a file of no linked configuration */\n";
static const size_t stand_in_len = sizeof stand_in_text - 1;

/* The file name of the linked configuration called config, or a stand-in. */
static dsa_source_t file_of(const char *config, const char *name)
{
    for (const dsa_plan_t *const *p = dsa_registry; *p; p++)
        if (!strcmp((*p)->name, config))
            for (int i = 0; i < (*p)->nfiles; i++)
                if (!strcmp((*p)->files[i].name, name))
                    return (*p)->files[i];
    return (dsa_source_t){name, stand_in_text, &stand_in_len};
}

static void check_sources(dsa_cfg_t *c)
{
    c->config_h = file_of(c->name, "config.h");
    for (int i = 0; i < DSA_NMODULES; i++)
        c->modules[i].source = file_of(c->name, c->modules[i].file);
    char *err = malloc(ERRLEN);
    if (!err)
        abort();
    err[0] = '\0';
    const dsa_result_t rc = dsa_plan_check_sources(WHERE, c, err, ERRLEN);
    /* independently: every file compiled has a source line with its SHA-256, every source line
     * names a file compiled */
    const dsa_source_t *files[DSA_NMODULES + 1] = {&c->config_h};
    for (int i = 0; i < DSA_NMODULES; i++)
        files[i + 1] = &c->modules[i].source;
    int good = 1;
    for (int f = 0; f < DSA_NMODULES + 1; f++) {
        char hex[65];
        int found = 0;
        if (dsa_sha256_hex(files[f]->text, *files[f]->len, hex) != 0)
            abort();
        for (int s = 0; s < c->nsources; s++)
            found |= !strcmp(c->sources[s].file, files[f]->name) && !strcmp(c->sources[s].sha256, hex);
        good &= found;
    }
    for (int s = 0; s < c->nsources; s++) {
        int known = 0;
        for (int f = 0; f < DSA_NMODULES + 1; f++)
            known |= !strcmp(c->sources[s].file, files[f]->name);
        good &= known;
    }
    if (rc == DSA_SUCCESS && !good)
        violated("dsa_plan_check_sources accepted a file whose SHA-256 no source line gives", NULL);
    if (rc != DSA_SUCCESS) {
        if (good)
            violated("dsa_plan_check_sources refused files that match the plan", err);
        if (rc != DSA_ERROR_INVALID_ARGUMENT || strncmp(err, WHERE ": error: ", strlen(WHERE ": error: ")) != 0 ||
            strchr(err, '\n'))
            violated("dsa_plan_check_sources failed without its one-line message", err);
    }
    free(err);
}

/* ---- the argument checks on a context of this plan ---- */

static struct dsa_ctx *ctx;

static void *fake(int i)
{
    return (void *)((uintptr_t)0x7f0000000000ull + (uintptr_t)0x1000000u * (uintptr_t)i);
}

static void call_failed(dsa_result_t rc, const char *fn)
{
    const char *msg = dsa_last_error(ctx);
    if (rc != DSA_ERROR_INVALID_ARGUMENT || strncmp(msg, fn, strlen(fn)) != 0 || strncmp(msg + strlen(fn), ": ", 2))
        violated("an argument check failed without its message", msg);
}

/* A dense row the call accepted (a stride given as 0) or uses as one: the row the kernels read or
 * write, from the plan's geometry; a shorter one overruns the caller's rows, a longer one its
 * buffer. */
static void need_row(int64_t got, __int128 dense, const char *fn, const char *name)
{
    if (got != dense) {
        char what[160];
        snprintf(what, sizeof what, "%s: a dense %s row of %lld elements where the kernels' row is %lld", fn,
                 name, (long long)got, (long long)dense);
        violated(what, NULL);
    }
}

static void need_fits(__int128 v, __int128 max, const char *fn, const char *what)
{
    if (v > max) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s: %s", fn, what);
        violated(msg, NULL);
    }
}

static void check_calls(const dsa_cfg_t *c)
{
    const dsa_config_info_t *g = &c->info;
    ctx->cfg = c;
    /* num_cache_blocks at 1, the largest each call can take, one more, and INT64_MAX */
    const __int128 pro_max = (__int128)INT64_MAX / ((__int128)g->block_size * (g->cache_bytes_per_token +
                                                                                g->idx_bytes_per_token));
    const __int128 att_max = (__int128)INT32_MAX / g->block_size;
    const __int128 idx_max = (__int128)INT64_MAX / g->idx_page_bytes;
    for (int k = 0; k < 4; k++) {
        const int64_t pick[][3] = {{1, 1, 1},
                                   {(int64_t)pro_max, (int64_t)att_max, (int64_t)idx_max},
                                   {(int64_t)pro_max + 1, (int64_t)att_max + 1, (int64_t)idx_max + 1},
                                   {INT64_MAX, INT64_MAX, INT64_MAX}};
        dsa_prologue_args_t p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        p.num_tokens = INT32_MAX;
        p.q_c = fake(1), p.q_c_out = fake(2), p.kv = fake(3), p.idx_k = fake(4);
        p.positions = fake(5), p.slot_mapping = fake(6), p.q_norm_w = fake(7), p.kv_norm_w = fake(8);
        p.idx_norm_w = fake(9), p.idx_norm_b = fake(10), p.kv_cache = fake(11), p.idx_cache = fake(12);
        p.topk = fake(13), p.clear_topk = 1;
        p.num_cache_blocks = pick[k][0];
        dsa_prologue_strides_t ps;
        dsa_result_t rc = dsa_check_prologue(ctx, &p, &ps);
        if (rc == DSA_SUCCESS) {
            need_row(ps.q_c, g->q_lora_rank, "dsa_prologue", "q_c");
            need_row(ps.kv, g->kv_dim, "dsa_prologue", "kv");
            need_row(ps.idx_k, g->idx_head_dim, "dsa_prologue", "idx_k");
            need_fits((__int128)p.num_cache_blocks * g->block_size * g->cache_bytes_per_token, INT64_MAX,
                      "dsa_prologue", "cache bytes beyond int64");
            need_fits((__int128)p.num_cache_blocks * g->idx_page_bytes, INT64_MAX, "dsa_prologue",
                      "indexer cache bytes beyond int64");
        } else {
            call_failed(rc, "dsa_prologue");
        }
        dsa_attend_args_t a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.num_tokens = INT32_MAX;
        a.q_lat = fake(1), a.q_pe = fake(2), a.positions = fake(3), a.topk = fake(4);
        a.req_of_token = fake(5), a.seq_lens = fake(6), a.block_table = fake(7), a.kv_cache = fake(8);
        a.out = fake(9), a.lse = fake(10);
        a.num_requests = 1, a.max_blocks = 1;
        a.num_cache_blocks = pick[k][1];
        dsa_attend_strides_t as;
        rc = dsa_check_attend(ctx, &a, &as);
        if (rc == DSA_SUCCESS) {
            need_row(as.q_lat, (__int128)g->heads_local * g->kv_lora_rank, "dsa_attend", "q_lat");
            need_row(as.q_pe, (__int128)g->heads_local * g->qk_rope_dim, "dsa_attend", "q_pe");
            need_row(as.topk, g->idx_topk, "dsa_attend", "topk");
            need_row(c->out_row, (__int128)g->heads_local * g->kv_lora_rank, "dsa_attend", "out");
            need_row(c->lse_row, g->heads_local, "dsa_attend", "lse");
            need_fits((__int128)a.num_cache_blocks * g->block_size, INT32_MAX, "dsa_attend", "slots beyond int32");
            need_fits((__int128)a.num_cache_blocks * g->block_size * g->cache_bytes_per_token, INT64_MAX,
                      "dsa_attend", "cache bytes beyond int64");
        } else {
            call_failed(rc, "dsa_attend");
        }
        dsa_index_args_t x;
        memset(&x, 0, sizeof x);
        x.size = sizeof x;
        x.num_tokens = INT32_MAX;
        x.q = fake(1), x.weights = fake(2), x.positions = fake(3), x.req_of_token = fake(4);
        x.seq_lens = fake(5), x.block_table = fake(6), x.idx_cache = fake(7), x.topk = fake(8);
        x.num_requests = 1, x.max_blocks = 1;
        x.num_cache_blocks = pick[k][2];
        dsa_index_strides_t xs;
        rc = dsa_check_index(ctx, &x, &xs);
        if (rc == DSA_SUCCESS) {
            need_row(xs.q, (__int128)g->idx_heads * g->idx_head_dim, "dsa_index", "q");
            need_row(xs.weights, g->idx_heads, "dsa_index", "weights");
            need_row(xs.topk, g->idx_topk, "dsa_index", "topk");
            need_fits((__int128)x.num_cache_blocks * g->idx_page_bytes, INT64_MAX, "dsa_index",
                      "indexer cache bytes beyond int64");
        } else {
            call_failed(rc, "dsa_index");
        }
    }
    ctx->cfg = NULL;
}

/* ---- one plan text ---- */

static void one(const char *text, size_t len)
{
    dsa_cfg_t *c = calloc(1, sizeof *c);
    char *err = malloc(ERRLEN);
    if (!c || !err)
        abort();
    err[0] = '\0';
    const dsa_result_t rc = dsa_plan_parse(WHERE, text, len, c, err, ERRLEN);
    if (rc != DSA_SUCCESS) {
        if (rc != DSA_ERROR_INVALID_ARGUMENT)
            violated("a result other than DSA_SUCCESS or DSA_ERROR_INVALID_ARGUMENT", err);
        check_message(err, text, len);
        /* again into a buffer too short for the message (its exact size, so ASan sees an overrun):
         * the same result, the message cut short */
        const size_t short_len = 1 + len % 48;
        char *cut = malloc(short_len);
        dsa_cfg_t *c2 = calloc(1, sizeof *c2);
        if (!cut || !c2)
            abort();
        if (dsa_plan_parse(WHERE, text, len, c2, cut, short_len) != rc || !memchr(cut, '\0', short_len) ||
            strncmp(cut, err, strlen(cut)) != 0)
            violated("a short message buffer changed the result or the message", cut);
        free(cut);
        free(c2);
    } else {
        if (err[0])
            violated("a success with a message", err);
        check_lines(text, len);
        check_cfg(c);
        check_numbers(c, text, len);
        check_sources(c);
        check_calls(c);
    }
    free(err);
    free(c);
}

/* The text with its plan-sha256 lines dropped and a true one appended (into *out, malloc'd). */
static size_t reseal(const char *text, size_t len, char **out)
{
    char *s = malloc(len + 1 + 12 + 64 + 1);
    if (!s)
        abort();
    size_t n = 0, pos = 0;
    line_t l;
    while (next_line(text, len, &pos, &l)) {
        if (starts(&l, "plan-sha256") && (l.n == 11 || l.at[11] == ' '))
            continue;
        memcpy(s + n, l.at, l.n);
        n += l.n;
        s[n++] = '\n';
    }
    char hex[65];
    if (dsa_sha256_hex(s, n, hex) != 0)
        abort();
    memcpy(s + n, "plan-sha256 ", 12);
    memcpy(s + n + 12, hex, 64);
    s[n + 76] = '\n';
    *out = s;
    return n + 77;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx && !(ctx = calloc(1, sizeof *ctx)))
        abort();
    const char *text = (const char *)data;
    one(text, size);
    char *sealed;
    const size_t n = reseal(text, size, &sealed);
    if (n != size || memcmp(sealed, text, size) != 0)
        one(sealed, n);
    free(sealed);
    return 0;
}
