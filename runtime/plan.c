/* plan.txt: the parser that turns a generated configuration's plan into a dsa_cfg_t, for linked
 * configurations (embedded texts) and for folders read at run time alike. Strict: every key once,
 * no unknown key, every number whole and in range, so that a damaged or hand-edited plan is an
 * error naming its line, never a wrong launch. */
#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dsa_abi.h"
#include "dsa_digest.h"
#include "plan.h"


typedef enum { F_INT, F_U32, F_I64, F_FLOAT, F_DOUBLE, F_NAME, F_DTYPE, F_TARGETS, F_FREQ, F_ENTRY } ftype;

typedef struct field {
    const char *key;
    ftype type;
    size_t off, size; /* of the member in dsa_cfg_t */
    long long lo, hi;
} field_t;

#define M(member) offsetof(dsa_cfg_t, member), sizeof(((dsa_cfg_t *)0)->member)
#define INT(key, member, lo, hi) {key, F_INT, M(member), lo, hi}
static const field_t fields[] = {
    {"name", F_NAME, M(name), 0, 0},
    {"symbol", F_NAME, M(symbol), 0, 0},
    {"targets", F_TARGETS, 0, 0, 0, 0},
    INT("heads", info.heads, 1, 4096),
    INT("q_lora_rank", info.q_lora_rank, 1, 1 << 16),
    INT("kv_lora_rank", info.kv_lora_rank, 1, 1 << 16),
    INT("qk_nope_dim", info.qk_nope_dim, 0, 1 << 16),
    INT("qk_rope_dim", info.qk_rope_dim, 2, 2 * DSA_MAX_ROPE_PAIRS),
    INT("v_head_dim", info.v_head_dim, 1, 1 << 16),
    INT("kv_dim", info.kv_dim, 1, 1 << 16),
    INT("block_size", info.block_size, 1, 1 << 16),
    INT("max_positions", info.max_positions, 1, 1 << 28),
    INT("idx_heads", info.idx_heads, 1, 4096),
    INT("idx_head_dim", info.idx_head_dim, 1, 1 << 16),
    INT("idx_topk", info.idx_topk, 1, 1 << 20),
    INT("rope_interleaved", info.rope_interleaved, 0, 1),
    {"rms_norm_eps", F_FLOAT, M(info.rms_norm_eps), 0, 0},
    {"softmax_scale", F_FLOAT, M(info.softmax_scale), 0, 0},
    INT("tp", info.tp, 1, 4096),
    INT("dcp", info.dcp, 1, 4096),
    INT("interleave", info.interleave, 1, 1 << 16),
    INT("heads_local", info.heads_local, 1, 4096),
    INT("heads_gathered", info.heads_gathered, 1, 4096),
    INT("attend_heads_per_cta", attend_heads_per_cta, 1, 4096),
    {"cache_dtype", F_DTYPE, M(info.cache_dtype), 0, 0},
    INT("fp8_scale_pow2", info.fp8_scale_pow2, 0, 1),
    INT("cache_bytes_per_token", info.cache_bytes_per_token, 1, 1 << 20),
    INT("cache_scale_offset", info.cache_scale_offset, 0, 1 << 20),
    INT("cache_rope_offset", info.cache_rope_offset, 0, 1 << 20),
    INT("idx_bytes_per_token", info.idx_bytes_per_token, 1, 1 << 20),
    INT("idx_page_bytes", info.idx_page_bytes, 1, 1 << 30),
    {"q_lat_row", F_I64, M(q_lat_row), 1, 1 << 24},
    {"idx_q_row", F_I64, M(idx_q_row), 1, 1 << 24},
    {"q_pe_row", F_I64, M(q_pe_row), 1, 1 << 24},
    {"out_row", F_I64, M(out_row), 1, 1 << 24},
    {"lse_row", F_I64, M(lse_row), 1, 1 << 24},
    {"ws_q_packed", F_I64, M(ws_q_packed), 1, 1LL << 31},
    {"ws_q_gathered", F_I64, M(ws_q_gathered), 1, 1LL << 31},
    {"ws_partial_out", F_I64, M(ws_partial_out), 1, 1LL << 31},
    {"ws_partial_lse", F_I64, M(ws_partial_lse), 1, 1LL << 31},
    {"exchange_row", F_I64, M(exchange_row), 1, 1LL << 31},
    {"ws_exchange", F_I64, M(ws_exchange), 1, 1LL << 31},
    {"entry_prologue", F_NAME, M(entry_prologue), 0, 0},
    {"entry_rope_table", F_NAME, M(entry_rope_table), 0, 0},
    {"entry_pack_q", F_ENTRY, M(entry_pack_q), 0, 0},
    {"entry_attend", F_NAME, M(entry_attend), 0, 0},
    {"entry_merge", F_ENTRY, M(entry_merge), 0, 0},
    {"entry_barrier", F_ENTRY, M(entry_barrier), 0, 0},
    {"entry_split_merge", F_NAME, M(entry_split_merge), 0, 0},
    {"entry_split_merge_few", F_NAME, M(entry_split_merge_few), 0, 0},
    {"entry_attend_smem", F_NAME, M(entry_attend_smem), 0, 0},
    {"entry_attend_threads", F_NAME, M(entry_attend_threads), 0, 0},
    {"entry_attend_cluster_merge", F_NAME, M(entry_attend_cluster_merge), 0, 0},
    {"entry_index_q", F_NAME, M(entry_index_q), 0, 0},
    {"entry_index_score", F_NAME, M(entry_index_score), 0, 0},
    {"entry_index_score_few", F_NAME, M(entry_index_score_few), 0, 0},
    {"entry_index_score_group", F_NAME, M(entry_index_score_group), 0, 0},
    {"entry_index_score_group_smem", F_NAME, M(entry_index_score_group_smem), 0, 0},
    {"entry_index_topk", F_NAME, M(entry_index_topk), 0, 0},
    {"entry_index_topk_split", F_NAME, M(entry_index_topk_split), 0, 0},
    {"entry_index_merge", F_ENTRY, M(entry_index_merge), 0, 0},
    {"prologue_threads", F_U32, M(prologue_threads), 32, 1024},
    {"rope_threads", F_U32, M(rope_threads), 32, 1024},
    {"pack_threads", F_U32, M(pack_threads), 32, 1024},
    {"merge_threads", F_U32, M(merge_threads), 32, 1024},
    {"split_merge_few", F_U32, M(split_merge_few), 2, DSA_MERGE_MAX},
    {"pack_ctas_per_token", F_U32, M(pack_ctas_per_token), 1, 65535},
    {"attend_ctas_per_token", F_U32, M(attend_ctas_per_token), 1, 65535},
    {"attend_max_splits", F_U32, M(attend_max_splits), 1, DSA_MERGE_MAX},
    {"attend_cluster", F_U32, M(attend_cluster), 1, 2},
    {"index_q_threads", F_U32, M(index_q_threads), 32, 1024},
    {"index_q_ctas_per_token", F_U32, M(index_q_ctas_per_token), 1, 65535},
    {"index_score_threads", F_U32, M(index_score_threads), 32, 1024},
    {"index_score_few_rows", F_U32, M(index_score_few_rows), 0, 1 << 30},
    {"index_score_keys_per_cta", F_U32, M(index_score_keys_per_cta), 1, 65535},
    {"index_score_group_rows", F_U32, M(index_score_group_rows), 1, 8},
    {"index_topk_threads", F_U32, M(index_topk_threads), 32, 1024},
    {"index_merge_smem", F_U32, M(index_merge_smem), 0, 227 * 1024},
    {"index_topk_split_threads", F_U32, M(index_topk_split_threads), 32, 1024},
    {"index_topk_split_max", F_U32, M(index_topk_split_max), 1, 65535},
    {"index_topk_split_min", F_U32, M(index_topk_split_min), 2, 65535},
    {"index_topk_split_keys", F_U32, M(index_topk_split_keys), 1, 1 << 24},
    {"index_topk_split_min_keys", F_U32, M(index_topk_split_min_keys), 1, 1 << 30},
    {"index_topk_bit_keys", F_U32, M(index_topk_bit_keys), 1, 1 << 30},
    {"index_score_bins", F_U32, M(index_score_bins), 0, 1},
    {"idx_max_local", F_I64, M(idx_max_local), 1, 1LL << 30},
    {"ws_idx_q8", F_I64, M(ws_idx_q8), 1, 1LL << 31},
    {"ws_idx_wq", F_I64, M(ws_idx_wq), 1, 1LL << 31},
    {"ws_idx_keys", F_I64, M(ws_idx_keys), 1, 1LL << 32},
    {"ws_idx_cand", F_I64, M(ws_idx_cand), 1, 1LL << 31},
    {"ws_idx_merged", F_I64, M(ws_idx_merged), 1, 1LL << 31},
    {"ws_idx_topk_state", F_I64, M(ws_idx_topk_state), 4, 1LL << 31},
    {"rope_entries", F_I64, M(rope_entries), 1, 1LL << 36},
    {"rope_mscale", F_DOUBLE, M(rope_mscale), 0, 0},
    {"rope_freq", F_FREQ, 0, 0, 0, 0},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

typedef struct parser {
    const char *where; /* "DIR/plan.txt" or "plan.txt of CONFIG" */
    int line;
    char *err;
    size_t errlen;
} parser_t;

static __attribute__((format(printf, 2, 3))) dsa_result_t perr(parser_t *p, const char *fmt, ...)
{
    int n = p->line ? snprintf(p->err, p->errlen, "%s:%d: error: ", p->where, p->line)
                    : snprintf(p->err, p->errlen, "%s: error: ", p->where);
    if (n < 0 || (size_t)n >= p->errlen)
        return DSA_ERROR_INVALID_ARGUMENT;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    for (char *c = p->err; *c; c++) /* the plan's own bytes: no control character reaches a message */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return DSA_ERROR_INVALID_ARGUMENT;
}

static int is_name(const char *s, const char *extra)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              strchr(extra, *s)))
            return 0;
    return 1;
}

static dsa_result_t parse_int(parser_t *p, const char *key, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return perr(p, "%s: '%s' is not a whole number", key, v);
    if (x < lo || x > hi)
        return perr(p, "%s: %lld is outside [%lld, %lld]", key, x, lo, hi);
    *out = x;
    return DSA_SUCCESS;
}

static dsa_result_t parse_real(parser_t *p, const char *key, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x > 0) || x > 1e300)
        return perr(p, "%s: '%s' is not a positive finite number", key, v);
    *out = x;
    return DSA_SUCCESS;
}

/* A list of space-separated words into calls of take(word); returns the count or -1. */
static dsa_result_t parse_field(parser_t *p, dsa_cfg_t *c, const field_t *f, char *v)
{
    char *base = (char *)c + f->off;
    long long x = 0;
    double d = 0;
    dsa_result_t rc = DSA_SUCCESS;
    switch (f->type) {
    case F_INT:
    case F_U32:
    case F_I64:
        if ((rc = parse_int(p, f->key, v, f->lo, f->hi, &x)) != DSA_SUCCESS)
            return rc;
        if (f->type == F_INT)
            *(int *)base = (int)x;
        else if (f->type == F_U32)
            *(unsigned *)base = (unsigned)x;
        else
            *(int64_t *)base = x;
        return DSA_SUCCESS;
    case F_FLOAT:
    case F_DOUBLE:
        if ((rc = parse_real(p, f->key, v, &d)) != DSA_SUCCESS)
            return rc;
        /* a float field: refused where a float cannot hold the value, rather than narrowed to
         * infinity (undefined in C past FLT_MAX) or to 0 */
        if (f->type == F_FLOAT && (d > FLT_MAX || !((float)d > 0)))
            return perr(p, "%s: '%s' is not a positive finite number as a float", f->key, v);
        if (f->type == F_FLOAT)
            *(float *)base = (float)d;
        else
            *(double *)base = d;
        return DSA_SUCCESS;
    case F_ENTRY:
        if (!strcmp(v, "-")) {
            base[0] = '\0';
            return DSA_SUCCESS;
        }
        /* fall through */
    case F_NAME:
        if (strlen(v) >= f->size || !is_name(v, ".-"))
            return perr(p, "%s: '%s' is not a name (letters, digits, '_', '.', '-'; under %zu characters)", f->key,
                        v, f->size);
        memcpy(base, v, strlen(v) + 1);
        return DSA_SUCCESS;
    case F_DTYPE:
        for (int i = 0; i < 3; i++)
            if (!strcmp(v, (const char *[]){"bf16", "fp8_ds_mla", "nvfp4_ds_mla"}[i])) {
                c->info.cache_dtype = (dsa_cache_dtype_t)i;
                memcpy(c->cache_dtype_name, v, strlen(v) + 1);
                return DSA_SUCCESS;
            }
        return perr(p, "cache_dtype: '%s' is none of bf16, fp8_ds_mla, nvfp4_ds_mla", v);
    case F_TARGETS:
        for (char *save = NULL, *w = strtok_r(v, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
            if (c->ntargets == DSA_MAX_TARGETS || strncmp(w, "sm_", 3) || strlen(w) >= sizeof c->targets[0] ||
                !is_name(w + 3, ""))
                return perr(p, "targets: '%s' is not an architecture like sm_90a (at most %d)", w, DSA_MAX_TARGETS);
            memcpy(c->targets[c->ntargets++], w, strlen(w) + 1);
        }
        return c->ntargets ? DSA_SUCCESS : perr(p, "targets: none given");
    case F_FREQ:
        for (char *save = NULL, *w = strtok_r(v, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
            if (c->nrope_freq == DSA_MAX_ROPE_PAIRS)
                return perr(p, "rope_freq: more than %d values", DSA_MAX_ROPE_PAIRS);
            if ((rc = parse_real(p, "rope_freq", w, &c->rope_freq[c->nrope_freq++])) != DSA_SUCCESS)
                return rc;
        }
        return DSA_SUCCESS;
    }
    return perr(p, "%s: unhandled field type", f->key);
}

static dsa_result_t parse_module(parser_t *p, dsa_cfg_t *c, char *v, int *seen)
{
    char *sp = strchr(v, ' ');
    if (!sp)
        return perr(p, "module: expected 'module NAME FILE'");
    *sp = '\0';
    const char *file = sp + 1;
    static const char *const names[DSA_NMODULES] = {"prologue", "attend", "index"};
    for (int i = 0; i < DSA_NMODULES; i++)
        if (!strcmp(v, names[i])) {
            if (seen[i])
                return perr(p, "module %s given twice", v);
            if (strlen(file) >= sizeof c->modules[i].file || !is_name(file, ".-") || file[0] == '.')
                return perr(p, "module %s: '%s' is not a file name in the configuration's folder", v, file);
            seen[i] = 1;
            memcpy(c->modules[i].name, v, strlen(v) + 1);
            memcpy(c->modules[i].file, file, strlen(file) + 1);
            return DSA_SUCCESS;
        }
    return perr(p, "module: unknown module '%s' (prologue, attend, index)", v);
}

/* "source FILE SHA256": FILE a name in the folder, SHA256 64 lowercase hex digits; each file once.
 * Which files need one is checked against the sources themselves (dsa_plan_check_sources). */
static dsa_result_t parse_source(parser_t *p, dsa_cfg_t *c, char *v)
{
    char *sp = strchr(v, ' ');
    if (!sp)
        return perr(p, "source: expected 'source FILE SHA256'");
    *sp = '\0';
    const char *hex = sp + 1;
    if (strlen(v) >= sizeof c->sources[0].file || !is_name(v, ".-") || v[0] == '.')
        return perr(p, "source: '%s' is not a file name in the configuration's folder", v);
    if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
        return perr(p, "source %s: '%.80s' is not a SHA-256 (64 lowercase hex digits)", v, hex);
    for (int i = 0; i < c->nsources; i++)
        if (!strcmp(c->sources[i].file, v))
            return perr(p, "source %s given twice", v);
    if (c->nsources == (int)(sizeof c->sources / sizeof c->sources[0]))
        return perr(p, "source: more than %d files", c->nsources);
    memcpy(c->sources[c->nsources].file, v, strlen(v) + 1);
    memcpy(c->sources[c->nsources++].sha256, hex, 65);
    return DSA_SUCCESS;
}

/* Parses text (a NUL-terminated copy is made line by line) into c. */
static dsa_result_t parse(parser_t *p, const char *text, size_t len, dsa_cfg_t *c)
{
    int seen[NFIELDS] = {0}, mod_seen[DSA_NMODULES] = {0}, header = 0, abi = 0;
    int seal_line = 0, after_seal = 0; /* the plan-sha256 line's number; the first line after it */
    size_t sealed = 0;                 /* the bytes the seal covers: every one before its line */
    char seal[65] = "";
    char line[8192];
    const char *s = text, *end = text + len;
    p->line = 0;
    while (s < end) {
        const char *at = s;
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        p->line++;
        if (n >= sizeof line)
            return perr(p, "line longer than %zu characters", sizeof line - 1);
        memcpy(line, s, n);
        line[n] = '\0';
        s += n + (nl != NULL);
        if (memchr(line, '\0', n))
            return perr(p, "a NUL byte");
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (seal_line && !after_seal)
            after_seal = p->line;
        char *v = strchr(line, ' ');
        if (!v || !v[1])
            return perr(p, "expected 'key value', got '%.64s'", line);
        *v++ = '\0';
        if (!strcmp(line, "plan-sha256")) {
            if (seal_line)
                return perr(p, "plan-sha256 given twice");
            if (strlen(v) != 64 || strspn(v, "0123456789abcdef") != 64)
                return perr(p, "plan-sha256: '%.80s' is not a SHA-256 (64 lowercase hex digits)", v);
            seal_line = p->line;
            sealed = (size_t)(at - text);
            memcpy(seal, v, 65);
            continue;
        }
        if (!header) {
            if (strcmp(line, "dsa-plan"))
                return perr(p, "not a dsagen plan (no 'dsa-plan' line first)");
            if (strcmp(v, DSA_STR(DSA_PLAN_ABI))) /* exactly: no sign, leading zero or wrap past INT_MAX */
                return perr(p, "plan format %s; this libdsa reads format %d: regenerate with its dsagen", v,
                            DSA_PLAN_ABI);
            header = 1;
            continue;
        }
        if (!strcmp(line, "kernel-abi")) {
            if (abi)
                return perr(p, "kernel-abi given twice");
            if (strcmp(v, DSA_STR(DSA_ABI_VERSION)))
                return perr(p, "generated for kernel ABI %s; this libdsa has kernel ABI %d: regenerate", v,
                            DSA_ABI_VERSION);
            abi = 1;
            continue;
        }
        if (!strcmp(line, "source") || !strcmp(line, "module")) {
            dsa_result_t rc = line[0] == 's' ? parse_source(p, c, v) : parse_module(p, c, v, mod_seen);
            if (rc != DSA_SUCCESS)
                return rc;
            continue;
        }
        size_t i = 0;
        while (i < NFIELDS && strcmp(fields[i].key, line))
            i++;
        if (i == NFIELDS)
            return perr(p, "unknown key '%.64s'", line);
        if (seen[i]++)
            return perr(p, "%s given twice", line);
        dsa_result_t rc = parse_field(p, c, &fields[i], v);
        if (rc != DSA_SUCCESS)
            return rc;
    }
    p->line = 0;
    if (!header)
        return perr(p, "empty plan");
    if (!abi)
        return perr(p, "no kernel-abi line");
    for (size_t i = 0; i < NFIELDS; i++)
        if (!seen[i])
            return perr(p, "no '%s' line", fields[i].key);
    for (int i = 0; i < DSA_NMODULES; i++)
        if (!mod_seen[i])
            return perr(p, "no 'module %s' line", (const char *[]){"prologue", "attend", "index"}[i]);
    if (c->nrope_freq * 2 != c->info.qk_rope_dim)
        return perr(p, "rope_freq has %d values, qk_rope_dim %d needs %d", c->nrope_freq, c->info.qk_rope_dim,
                    c->info.qk_rope_dim / 2);
    const char *dcp_entry = !c->entry_pack_q[0]        ? "entry_pack_q"
                            : !c->entry_merge[0]       ? "entry_merge"
                            : !c->entry_index_merge[0] ? "entry_index_merge"
                            : !c->entry_barrier[0]     ? "entry_barrier"
                                                       : NULL;
    if (c->info.dcp > 1 && dcp_entry)
        return perr(p, "%s: dcp %d needs this kernel", dcp_entry, c->info.dcp);
    /* the relations the runtime's sizes and offsets rely on: dsagen's plans hold them; a damaged or
     * hand-edited one that does not is refused here, not found as an overflow in a call */
    const dsa_config_info_t *g = &c->info;
    const struct {
        int holds;
        const char *what;
    } rel[] = {
        {(int64_t)g->heads_local * g->tp == g->heads, "heads_local x tp == heads"},
        {(int64_t)g->heads_local * g->dcp == g->heads_gathered, "heads_local x dcp == heads_gathered"},
        {g->tp % g->dcp == 0, "dcp divides tp"},
        {g->kv_dim == g->kv_lora_rank + g->qk_rope_dim, "kv_dim == kv_lora_rank + qk_rope_dim"},
        {(int64_t)g->block_size * g->idx_bytes_per_token == g->idx_page_bytes,
         "idx_page_bytes == block_size x idx_bytes_per_token"},
        {g->idx_bytes_per_token == g->idx_head_dim + 4, "idx_bytes_per_token == idx_head_dim + 4"},
        {g->cache_scale_offset <= g->cache_bytes_per_token && g->cache_rope_offset < g->cache_bytes_per_token,
         "cache_scale_offset and cache_rope_offset inside cache_bytes_per_token"},
        {c->ws_q_gathered >= g->dcp * c->ws_q_packed, "ws_q_gathered >= dcp x ws_q_packed"},
        {c->ws_exchange >= g->dcp * c->exchange_row, "ws_exchange >= dcp x exchange_row"},
        {c->ws_idx_keys >= 4 * c->idx_max_local, "ws_idx_keys >= 4 x idx_max_local"},
        {c->ws_idx_merged >= g->dcp * c->ws_idx_cand, "ws_idx_merged >= dcp x ws_idx_cand"},
        /* the rope table the context computes and the kernels index by (position, pair) */
        {c->rope_entries == (int64_t)g->max_positions * (g->qk_rope_dim / 2),
         "rope_entries == max_positions x qk_rope_dim / 2"},
        /* the calls' dense rows: the argument checks' least strides, and dsa_attend's offsets into out
         * and lse, so each is exactly the row its kernel reads or writes */
        {c->q_lat_row == (int64_t)g->heads_local * g->kv_lora_rank, "q_lat_row == heads_local x kv_lora_rank"},
        {c->q_pe_row == (int64_t)g->heads_local * g->qk_rope_dim, "q_pe_row == heads_local x qk_rope_dim"},
        {c->out_row == (int64_t)g->heads_local * g->kv_lora_rank, "out_row == heads_local x kv_lora_rank"},
        {c->lse_row == g->heads_local, "lse_row == heads_local"},
        {c->idx_q_row == (int64_t)g->idx_heads * g->idx_head_dim, "idx_q_row == idx_heads x idx_head_dim"},
    };
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
        if (!rel[i].holds)
            return perr(p, "the plan's numbers break %s", rel[i].what);
    if (c->attend_max_splits & (c->attend_max_splits - 1))
        return perr(p, "attend_max_splits %u is not a power of two", c->attend_max_splits);
    if (c->attend_ctas_per_token % c->attend_cluster)
        return perr(p, "attend_cluster %u does not divide attend_ctas_per_token %u", c->attend_cluster,
                    c->attend_ctas_per_token);
    /* last, so that a plan that breaks a rule above gets that rule's message: the seal dsagen wrote
     * over every byte before its line, which must be the plan's last */
    if (!seal_line)
        return perr(p, "no 'plan-sha256' line (the plan's last line, which dsagen writes)");
    if (after_seal) {
        p->line = after_seal;
        return perr(p, "a line after the plan-sha256 line, which must be the plan's last");
    }
    char hex[65];
    if (dsa_sha256_hex(text, sealed, hex) != 0)
        return perr(p, "SHA-256 failed");
    if (strcmp(hex, seal)) {
        p->line = seal_line;
        return perr(p, "the plan was edited after dsagen wrote it (its SHA-256 %.16s..., the plan-sha256 line's "
                       "%.16s...): regenerate the folder rather than edit it",
                    hex, seal);
    }
    c->info.size = sizeof c->info;
    c->info.name = c->name;
    c->info.target = c->targets[0];
    c->info.cache_dtype_name = c->cache_dtype_name;
    c->modules[DSA_MODULE_PROLOGUE].entry = c->entry_prologue;
    c->modules[DSA_MODULE_ATTEND].entry = c->entry_attend;
    c->modules[DSA_MODULE_INDEX].entry = c->entry_index_score;
    return DSA_SUCCESS;
}

dsa_result_t dsa_plan_check_sources(const char *where, const dsa_cfg_t *c, char *err, size_t errlen)
{
    const dsa_source_t *files[DSA_NMODULES + 1] = {&c->config_h};
    for (int i = 0; i < DSA_NMODULES; i++)
        files[i + 1] = &c->modules[i].source;
    for (int s = 0; s < c->nsources; s++) { /* a line for a file libdsa does not compile: not dsagen's */
        int known = 0;
        for (int f = 0; f < DSA_NMODULES + 1; f++)
            known |= !strcmp(c->sources[s].file, files[f]->name);
        if (!known) {
            snprintf(err, errlen, "%s: error: source %s: not config.h or a module's file", where, c->sources[s].file);
            return DSA_ERROR_INVALID_ARGUMENT;
        }
    }
    for (int f = 0; f < DSA_NMODULES + 1; f++) {
        int s = 0;
        while (s < c->nsources && strcmp(c->sources[s].file, files[f]->name))
            s++;
        if (s == c->nsources) {
            snprintf(err, errlen, "%s: error: no 'source %s' line", where, files[f]->name);
            return DSA_ERROR_INVALID_ARGUMENT;
        }
        char hex[65];
        if (dsa_sha256_hex(files[f]->text, *files[f]->len, hex) != 0) {
            snprintf(err, errlen, "%s: error: SHA-256 of %s failed", where, files[f]->name);
            return DSA_ERROR_INTERNAL;
        }
        if (strcmp(hex, c->sources[s].sha256)) {
            snprintf(err, errlen,
                     "%s: error: %s is not the file dsagen wrote with this plan (SHA-256 %.16s..., the plan's "
                     "%.16s...): it was edited after generation, or the folder mixes two generations; regenerate it",
                     where, files[f]->name, hex, c->sources[s].sha256);
            return DSA_ERROR_INVALID_ARGUMENT;
        }
    }
    return DSA_SUCCESS;
}

uint64_t dsa_plan_layout(const dsa_cfg_t *c)
{
    const int64_t v[] = {c->info.dcp,     c->info.interleave, c->info.heads_local, c->info.heads_gathered,
                         c->info.kv_dim,  c->info.idx_topk,   c->ws_q_packed,      c->ws_q_gathered,
                         c->exchange_row, c->ws_exchange,     c->ws_idx_cand,      c->ws_idx_merged,
                         c->idx_max_local};
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int dsa_plan_number(const dsa_cfg_t *c, const char *key, int64_t *value)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const field_t *f = &fields[i];
        if (strcmp(f->key, key) != 0)
            continue;
        const char *at = (const char *)c + f->off;
        switch (f->type) {
        case F_INT: *value = *(const int *)at; return 0;
        case F_U32: *value = *(const unsigned *)at; return 0;
        case F_I64: *value = *(const int64_t *)at; return 0;
        default: return -1;
        }
    }
    return -1;
}

dsa_result_t dsa_plan_parse(const char *where, const char *text, size_t len, dsa_cfg_t *c, char *err, size_t errlen)
{
    parser_t p = {where, 0, err, errlen};
    return parse(&p, text, len, c);
}
