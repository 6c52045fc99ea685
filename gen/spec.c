/* Spec validation (types, ranges, relations, unknown fields) and derivation, before any rendering. */
#include "spec.h"
#include "../kernels/dsa_abi.h"

#include <lauxlib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const dsg_target_names[] = {"sm_90", "sm_90a", "sm_100a", NULL};
const char *const dsg_cache_dtype_names[] = {"bf16", "fp8_ds_mla", "nvfp4_ds_mla", NULL};
const char *const dsg_rope_style_names[] = {"interleaved", "neox", NULL};

typedef enum { K_INT, K_NUM, K_BOOL, K_ENUM, K_TABLE, K_TARGETS, K_CONFIGS, K_NAME } kind_t;

typedef struct field {
    const char *name;
    kind_t kind;
    int required;
    double min, max;               /* K_INT, K_NUM: inclusive range */
    const char *const *choices;    /* K_ENUM */
    const char *what;              /* K_ENUM: "cache dtype", "rope style" */
    size_t offset;                 /* into the struct being filled */
    const struct field *sub;       /* K_TABLE */
    size_t present;                /* K_TABLE, K_NUM: offset of an int set when given, or NO_FLAG */
} field_t;

#define NO_FLAG SIZE_MAX
#define G(m) offsetof(dsg_geometry, m)
#define C(m) offsetof(dsg_config, m)
#define INT(n, lo, hi, off) {n, K_INT, 1, lo, hi, NULL, NULL, off, NULL, NO_FLAG}
#define NUM(n, lo, hi, off) {n, K_NUM, 1, lo, hi, NULL, NULL, off, NULL, NO_FLAG}
#define BOOL(n, off) {n, K_BOOL, 1, 0, 0, NULL, NULL, off, NULL, NO_FLAG}
#define ENUM(n, ch, what, off) {n, K_ENUM, 1, 0, 0, ch, what, off, NULL, NO_FLAG}
#define END {NULL, K_INT, 0, 0, 0, NULL, NULL, 0, NULL, NO_FLAG}

static const field_t yarn_fields[] = {
    NUM("factor", 1, 1024, G(yarn_factor)),
    INT("original_max_positions", 1, 1 << 24, G(yarn_original_max_positions)),
    NUM("beta_fast", 0, 1024, G(yarn_beta_fast)),
    NUM("beta_slow", 0, 1024, G(yarn_beta_slow)),
    NUM("mscale", 0, 100, G(yarn_mscale)),
    NUM("mscale_all_dim", 0, 100, G(yarn_mscale_all_dim)),
    END,
};

static const field_t rope_fields[] = {
    NUM("theta", 1, 1e12, G(rope_theta)),
    ENUM("style", dsg_rope_style_names, "rope style", G(rope_style)),
    {"yarn", K_TABLE, 0, 0, 0, NULL, NULL, 0, yarn_fields, G(has_yarn)},
    END,
};

static const field_t indexer_fields[] = {
    INT("heads", 1, 256, G(idx_heads)),
    INT("head_dim", 16, 1024, G(idx_head_dim)),
    INT("topk", 1, 65536, G(idx_topk)),
    ENUM("rope_style", dsg_rope_style_names, "rope style", G(idx_rope_style)),
    BOOL("rope_first", G(idx_rope_first)),
    BOOL("hadamard", G(idx_hadamard)),
    NUM("norm_eps", 1e-12, 0.1, G(idx_norm_eps)),
    END,
};

static const field_t geometry_fields[] = {
    INT("heads", 1, 1024, G(heads)),
    INT("q_lora_rank", 8, 65536, G(q_lora_rank)),
    INT("kv_lora_rank", 16, 4096, G(kv_lora_rank)),
    INT("qk_nope_dim", 1, 1024, G(qk_nope_dim)),
    INT("qk_rope_dim", 2, 256, G(qk_rope_dim)),
    INT("v_head_dim", 1, 1024, G(v_head_dim)),
    NUM("rms_norm_eps", 1e-12, 0.1, G(rms_norm_eps)),
    INT("max_positions", 1, 1 << 24, G(max_positions)),
    INT("block_size", 1, 1024, G(block_size)),
    {"rope", K_TABLE, 1, 0, 0, NULL, NULL, 0, rope_fields, NO_FLAG},
    {"softmax_scale", K_NUM, 0, 1e-6, 10, NULL, NULL, G(softmax_scale), NULL, G(has_softmax_scale)},
    {"indexer", K_TABLE, 1, 0, 0, NULL, NULL, 0, indexer_fields, NO_FLAG},
    END,
};

static const field_t config_fields[] = {
    INT("tp", 1, 1024, C(tp)),
    INT("dcp", 1, DSA_MAX_PEERS, C(dcp)), /* the kernels keep a block per rank (dsa_merge.cuh) */
    INT("interleave", 1, 1024, C(interleave)),
    ENUM("cache_dtype", dsg_cache_dtype_names, "cache dtype", C(cache_dtype)),
    {"targets", K_TARGETS, 1, 0, 0, NULL, NULL, 0, NULL, NO_FLAG},
    {"fp8_scale_pow2", K_BOOL, 0, 0, 0, NULL, NULL, C(fp8_scale_pow2), NULL, NO_FLAG},
    END,
};

/* The top level is filled by hand-written cases (model name, the configs list). */
static const field_t top_fields[] = {
    {"model", K_NAME, 1, 0, 0, NULL, NULL, 0, NULL, NO_FLAG},
    {"geometry", K_TABLE, 1, 0, 0, NULL, NULL, 0, geometry_fields, NO_FLAG},
    {"configs", K_CONFIGS, 1, 0, 0, NULL, NULL, 0, NULL, NO_FLAG},
    END,
};

typedef struct vctx {
    dsg_spec *spec;
    dsg_sandbox *sb;
    dsg_trusted *t;
    dsg_diag *d;
    lua_State *L;
} vctx;

/* A location in the spec: the file a table came from and the dotted path inside it (the lookup
 * key of the line map); display names use Lua's own notation, configs[2].tp. */
typedef struct where {
    const char *file;
    char path[256];    /* relative to the file's returned table (imports restart it) */
    char display[256]; /* from the spec's root */
} where;

static where child(const where *w, const char *key, long index)
{
    where c = {w->file, "", ""};
    char k[64];
    if (key)
        snprintf(k, sizeof k, "%s", key);
    else
        snprintf(k, sizeof k, "%ld", index);
    snprintf(c.path, sizeof c.path, "%s%s%s", w->path, w->path[0] ? "." : "", k);
    if (key)
        snprintf(c.display, sizeof c.display, "%s%s%s", w->display, w->display[0] ? "." : "", key);
    else
        snprintf(c.display, sizeof c.display, "%s[%ld]", w->display, index);
    return c;
}

static int line_of(vctx *v, const where *w)
{
    /* past the errors printed, no message shows a line: do not look it up (a lookup follows the
     * spec's aliases, which a hostile spec can make costly) */
    return dsg_too_many(v->d) ? 0 : dsg_trusted_line(v->t, w->file, w->path);
}

__attribute__((format(printf, 3, 4))) static void err(vctx *v, const where *w, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->display[0])
        dsg_error(v->d, w->file, line_of(v, w), "%s: %s", w->display, msg);
    else
        dsg_error(v->d, w->file, line_of(v, w), "%s", msg);
}

/* A spec string for a message: NUL bytes shown as \0 (printf's %s would stop there), at most 64
 * bytes, then "...". Other unprintable bytes are escaped when the message is written. */
typedef struct quoted {
    char s[64 * 2 + 4];
} quoted;

static quoted quote(const char *s, size_t len)
{
    quoted q;
    size_t o = 0, i = 0;
    for (; i < len && i < 64; i++) {
        if (s[i] == '\0') {
            q.s[o++] = '\\';
            q.s[o++] = '0';
        } else {
            q.s[o++] = s[i];
        }
    }
    strcpy(q.s + o, i < len ? "..." : "");
    return q;
}

/* The string at idx when it holds no NUL byte (names and choices are C strings), else NULL. */
static const char *c_string(lua_State *L, int idx, size_t *len)
{
    const char *s = lua_tolstring(L, idx, len);
    return s && strlen(s) == *len ? s : NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* "did you mean" only when a known name is close: at most a third of its letters differ. */
static const char *nearest(const char *name, const field_t *fields)
{
    const char *best = NULL;
    size_t bestd = SIZE_MAX;
    for (const field_t *f = fields; f->name; f++) {
        size_t dist = edit_distance(name, f->name);
        if (dist < bestd) {
            bestd = dist;
            best = f->name;
        }
    }
    return best && bestd * 3 <= strlen(best) ? best : NULL;
}

typedef struct key {
    const char *s; /* in the table, which keeps it alive */
    size_t len;
} key;

static int cmp_key(const void *pa, const void *pb)
{
    const key *a = pa, *b = pb;
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* Rejects keys the schema does not know, in sorted order so messages are stable. A field that an
 * unknown key was taken for (a typo) is marked in suggested, so it is not reported missing too. */
static void check_unknown(vctx *v, int idx, const field_t *fields, const where *w, unsigned long long *suggested)
{
    lua_State *L = v->L;
    key keys[64];
    int n = 0, nonstring = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            nonstring++;
            continue;
        }
        size_t len;
        const char *k = lua_tolstring(L, -1, &len); /* a string key: not converted in place */
        int known = 0;
        for (const field_t *f = fields; f->name; f++)
            known |= strlen(f->name) == len && memcmp(f->name, k, len) == 0; /* "model\0x" is not "model" */
        if (!known && n < 64)
            keys[n++] = (key){k, len};
    }
    if (nonstring)
        err(v, w, "has %d entr%s with a non-string key; fields are named", nonstring, nonstring == 1 ? "y" : "ies");
    qsort(keys, (size_t)n, sizeof keys[0], cmp_key);
    for (int i = 0; i < n; i++) {
        where c = child(w, keys[i].s, 0);
        const char *near = strlen(keys[i].s) == keys[i].len ? nearest(keys[i].s, fields) : NULL;
        if (near && suggested)
            for (const field_t *f = fields; f->name; f++)
                if (f->name == near)
                    *suggested |= 1ull << (f - fields);
        quoted q = quote(keys[i].s, keys[i].len);
        if (near)
            dsg_error(v->d, w->file, line_of(v, &c), "%s%sunknown field '%s' (did you mean '%s'?)",
                      w->display, w->display[0] ? ": " : "", q.s, near);
        else
            dsg_error(v->d, w->file, line_of(v, &c), "%s%sunknown field '%s'", w->display,
                      w->display[0] ? ": " : "", q.s);
    }
}

/* Validation reads fields raw: no metamethod of a spec value runs (the sandbox's _ENV has one that
 * raises an error). */
static void raw_field(lua_State *L, int idx, const char *name)
{
    idx = lua_absindex(L, idx);
    lua_pushstring(L, name);
    lua_rawget(L, idx);
}

/* A spec table: a table, but not the sandbox's own environment (a spec may return _ENV). */
static int is_table(vctx *v, int idx)
{
    return lua_type(v->L, idx) == LUA_TTABLE && !dsg_sandbox_is_env(v->sb, idx);
}

static const char *type_name(vctx *v, int idx)
{
    lua_State *L = v->L;
    if (lua_type(L, idx) == LUA_TTABLE && dsg_sandbox_is_env(v->sb, idx))
        return "the sandbox's environment (_ENV)";
    if (lua_type(L, idx) == LUA_TNUMBER)
        return lua_isinteger(L, idx) ? "an integer" : "a number";
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: return "a string";
    case LUA_TTABLE: return "a table";
    case LUA_TBOOLEAN: return "a boolean";
    case LUA_TFUNCTION: return "a function";
    default: return luaL_typename(L, idx);
    }
}

static void check_fields(vctx *v, int idx, const field_t *fields, char *base, const where *w);

/* A table's origin: an imported table restarts paths in the file it came from. */
static where enter(vctx *v, int idx, const where *c)
{
    where e = *c;
    const char *origin = dsg_sandbox_origin(v->sb, idx);
    if (origin) {
        e.file = origin;
        e.path[0] = '\0';
    }
    return e;
}

static void check_targets(vctx *v, int idx, dsg_config *cfg, const where *w)
{
    lua_State *L = v->L;
    idx = lua_absindex(L, idx);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx), count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        count++;
        lua_pop(L, 1);
    }
    if (n == 0) {
        err(v, w, "expected a non-empty list of target architectures (for example { \"sm_90a\" })");
        return;
    }
    if (count != n) {
        err(v, w, "expected a list of target architectures (keys 1..n), found %lld entries for length %lld",
            (long long)count, (long long)n);
        return;
    }
    if (n > DSG_MAX_TARGETS) {
        err(v, w, "%lld targets, at most %d", (long long)n, DSG_MAX_TARGETS);
        return;
    }
    for (lua_Integer i = 1; i <= n; i++) {
        where c = child(w, NULL, (long)i);
        lua_rawgeti(L, idx, i);
        size_t len = 0;
        const char *raw = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *s = raw ? c_string(L, -1, &len) : NULL;
        int found = -1;
        for (int k = 0; s && dsg_target_names[k]; k++)
            if (strcmp(s, dsg_target_names[k]) == 0)
                found = k;
        if (!raw)
            err(v, &c, "expected a string, got %s", type_name(v, -1));
        else if (found < 0)
            err(v, &c, "unknown target architecture '%s' (expected one of sm_90, sm_90a, sm_100a)", quote(raw, len).s);
        else {
            for (int k = 0; k < cfg->ntargets; k++)
                if (cfg->targets[k] == found)
                    err(v, &c, "target '%s' is listed twice", s);
            cfg->targets[cfg->ntargets++] = found;
        }
        lua_pop(L, 1);
    }
}

static void check_value(vctx *v, int idx, const field_t *f, char *base, const where *c)
{
    lua_State *L = v->L;
    switch (f->kind) {
    case K_INT:
    case K_NUM: {
        if (lua_type(L, idx) != LUA_TNUMBER) {
            err(v, c, "expected %s, got %s", f->kind == K_INT ? "an integer" : "a number", type_name(v, idx));
            return;
        }
        double x = lua_tonumber(L, idx);
        if (f->kind == K_INT && (x != floor(x) || !isfinite(x))) {
            err(v, c, "expected an integer, got %.17g", x);
            return;
        }
        if (!(x >= f->min && x <= f->max)) {
            err(v, c, "%.9g is out of range [%.9g, %.9g]", x, f->min, f->max);
            return;
        }
        if (f->kind == K_INT)
            *(int *)(void *)(base + f->offset) = (int)x;
        else
            *(double *)(void *)(base + f->offset) = x;
        if (f->present != NO_FLAG)
            *(int *)(void *)(base + f->present) = 1;
        return;
    }
    case K_BOOL:
        if (lua_type(L, idx) != LUA_TBOOLEAN) {
            err(v, c, "expected a boolean, got %s", type_name(v, idx));
            return;
        }
        *(int *)(void *)(base + f->offset) = lua_toboolean(L, idx);
        return;
    case K_ENUM: {
        if (lua_type(L, idx) != LUA_TSTRING) {
            err(v, c, "expected a string, got %s", type_name(v, idx));
            return;
        }
        size_t len;
        const char *raw = lua_tolstring(L, idx, &len), *s = c_string(L, idx, &len);
        char list[256] = "";
        for (int k = 0; f->choices[k]; k++) {
            if (s && strcmp(s, f->choices[k]) == 0) {
                *(int *)(void *)(base + f->offset) = k;
                return;
            }
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", f->choices[k]);
        }
        err(v, c, "unknown %s '%s' (expected one of %s)", f->what, quote(raw, len).s, list);
        return;
    }
    case K_TABLE: {
        if (!is_table(v, idx)) {
            err(v, c, "expected a table, got %s", type_name(v, idx));
            return;
        }
        where e = enter(v, idx, c);
        int before = v->d->errors;
        check_fields(v, idx, f->sub, base, &e);
        const dsg_geometry *g = (const dsg_geometry *)(const void *)base;
        if (f->sub == yarn_fields && v->d->errors == before && g->yarn_beta_fast < g->yarn_beta_slow) {
            where bf = child(&e, "beta_fast", 0);
            err(v, &bf, "%.9g is below beta_slow (%.9g); YaRN ramps from beta_fast rotations down to beta_slow, "
                        "so beta_fast must be at least beta_slow", g->yarn_beta_fast, g->yarn_beta_slow);
        }
        if (f->present != NO_FLAG)
            *(int *)(void *)(base + f->present) = 1;
        return;
    }
    case K_TARGETS:
        if (!is_table(v, idx)) {
            err(v, c, "expected a list of target architectures, got %s", type_name(v, idx));
            return;
        }
        check_targets(v, idx, (dsg_config *)(void *)base, c);
        return;
    case K_NAME:
    case K_CONFIGS:
        return; /* top level, handled by dsg_spec_validate */
    }
}

static void check_fields(vctx *v, int idx, const field_t *fields, char *base, const where *w)
{
    lua_State *L = v->L;
    idx = lua_absindex(L, idx);
    unsigned long long suggested = 0;
    check_unknown(v, idx, fields, w, &suggested);
    for (const field_t *f = fields; f->name && !dsg_too_many(v->d); f++) {
        where c = child(w, f->name, 0);
        raw_field(L, idx, f->name);
        if (lua_isnil(L, -1)) {
            if (f->required && !(suggested >> (f - fields) & 1))
                err(v, w, "missing field '%s'", f->name);
        } else {
            check_value(v, -1, f, base, &c);
        }
        lua_pop(L, 1);
    }
}

/* The MLA cache entry of dtype for kv_lora_rank L and qk_rope_dim R: o's cache_* fields (the rest
 * of o untouched). The validator and dsg_derive both take it from here. */
static void cache_layout(dsg_cache_dtype dtype, int L, int R, dsg_derived *o)
{
    switch (dtype) {
    case DSG_CACHE_BF16:
        o->cache_latent_bytes = 2 * L;
        o->cache_rope_offset = 2 * L;
        o->cache_rope_bytes = 2 * R;
        o->cache_scale_offset = o->cache_rope_offset + o->cache_rope_bytes;
        break;
    case DSG_CACHE_FP8_DS_MLA:
        o->cache_latent_bytes = L;
        o->cache_scale_group = 128;
        o->cache_scale_offset = L;
        o->cache_scale_bytes = 4 * (L / 128);
        o->cache_rope_offset = o->cache_scale_offset + o->cache_scale_bytes;
        o->cache_rope_bytes = 2 * R;
        break;
    case DSG_CACHE_NVFP4_DS_MLA:
        o->cache_latent_bytes = L / 2;
        o->cache_rope_offset = L / 2;
        o->cache_rope_bytes = R;
        o->cache_scale_group = 16;
        o->cache_scale_offset = o->cache_rope_offset + o->cache_rope_bytes;
        o->cache_scale_bytes = L / 16;
        break;
    }
    o->cache_bytes_per_token = o->cache_latent_bytes + o->cache_scale_bytes + o->cache_rope_bytes;
}

/* Relations between fields of one configuration and the geometry, each reported at the field
 * that would have to change. */
static void check_relations(vctx *v, const dsg_geometry *g, dsg_config *cfg, const where *w)
{
    where c;
    if (cfg->tp % cfg->dcp != 0) {
        c = child(w, "dcp", 0);
        err(v, &c, "dcp (%d) must divide tp (%d)", cfg->dcp, cfg->tp);
    }
    if (g->heads % cfg->tp != 0) {
        c = child(w, "tp", 0);
        err(v, &c, "tp (%d) must divide heads (%d)", cfg->tp, g->heads);
    }
    if (g->block_size % cfg->interleave != 0) {
        c = child(w, "interleave", 0);
        err(v, &c, "interleave (%d) must divide the KV block size (%d)", cfg->interleave, g->block_size);
    }
    c = child(w, "cache_dtype", 0);
    const int before_dtype = v->d->errors;
    if (cfg->cache_dtype == DSG_CACHE_BF16 && g->kv_lora_rank % 16 != 0)
        err(v, &c, "bf16 needs kv_lora_rank to be a multiple of 16 (16-byte vectors), but it is %d",
            g->kv_lora_rank);
    if (cfg->cache_dtype == DSG_CACHE_FP8_DS_MLA && g->kv_lora_rank % 128 != 0)
        err(v, &c, "fp8_ds_mla needs kv_lora_rank to be a multiple of 128 (one fp32 scale per 128 values), "
                   "but it is %d", g->kv_lora_rank);
    if (cfg->cache_dtype == DSG_CACHE_NVFP4_DS_MLA && g->kv_lora_rank % 64 != 0)
        err(v, &c, "nvfp4_ds_mla needs kv_lora_rank to be a multiple of 64 (16 values per block scale, "
                   "scales stored in 4 interleaved rows), but it is %d", g->kv_lora_rank);
    if (v->d->errors == before_dtype) { /* what the sparse MLA kernel (kernels/dsa_attend.cuh and its main loops) takes */
        const int L = g->kv_lora_rank, R = g->qk_rope_dim;
        dsg_derived lay = {0};
        cache_layout((dsg_cache_dtype)cfg->cache_dtype, L, R, &lay);
        const int entry = lay.cache_bytes_per_token;
        if (L % 64 != 0 || R % 16 != 0 || L + R > 576)
            err(v, &c, "the sparse MLA kernel needs kv_lora_rank a multiple of 64, qk_rope_dim a multiple of 16 "
                       "and kv_lora_rank + qk_rope_dim <= 576 (64 query heads and a 64-key tile fill the 227 KiB "
                       "of shared memory of an sm_90 CTA), but they are %d and %d", L, R);
        else if (entry % 16 != 0)
            err(v, &c, "a %s entry is %d bytes per token with kv_lora_rank %d and qk_rope_dim %d; the sparse MLA "
                       "kernel copies entries in 16-byte chunks, so it must be a multiple of 16",
                dsg_cache_dtype_names[cfg->cache_dtype], entry, L, R);
    }
    /* what the sm_90a kernel's warpgroup MMA loops take (kernels/dsa_attend_layout.cuh, its static
     * asserts "wgmma shapes"): a query or key row (kv_lora_rank + qk_rope_dim) in steps of 32; at
     * 16 or 32 heads a CTA, P^T held in a key tile's rope columns (qk_rope_dim at least the heads,
     * which a multiple of 32 beside kv_lora_rank's 64 already is); at 64, each consumer warpgroup's
     * m64n256 product over half of 512 latent dims, and P in the rope columns of a 64-key tile
     * (qk_rope_dim at least 64) */
    int sm90a = 0;
    for (int i = 0; i < cfg->ntargets; i++)
        sm90a |= !strcmp(dsg_target_names[cfg->targets[i]], "sm_90a");
    if (sm90a && v->d->errors == before_dtype && g->heads % cfg->tp == 0) {
        const int L = g->kv_lora_rank, R = g->qk_rope_dim, HB = dsg_attend_heads_per_cta(g, cfg);
        if ((L + R) % 32 != 0) {
            err(v, &c, "on sm_90a the sparse MLA kernel's warpgroup MMAs need kv_lora_rank + qk_rope_dim to be a "
                       "multiple of 32, but it is %d + %d", L, R);
        } else if (HB == 64 && (L != 512 || R < 64)) {
            c = child(w, "tp", 0);
            err(v, &c, "with %d heads / tp %d x dcp %d a sparse MLA CTA takes 64 heads, which on sm_90a needs "
                       "kv_lora_rank 512 and qk_rope_dim at least 64 (each consumer warpgroup's product covers 256 "
                       "latent dims, and P lives in the rope columns of a 64-key tile), but they are %d and %d",
                g->heads, cfg->tp, cfg->dcp, L, R);
        }
    }
    if (cfg->fp8_scale_pow2 && cfg->cache_dtype != DSG_CACHE_FP8_DS_MLA) {
        c = child(w, "fp8_scale_pow2", 0);
        err(v, &c, "applies to cache_dtype fp8_ds_mla only, not %s", dsg_cache_dtype_names[cfg->cache_dtype]);
    }
}

/* The key slots of index_score's ring (sm_90a, up to 64 indexer heads; kernels/dsa_index_wgmma.cuh,
 * ScoreWgmmaSmem): the kernel keeps the row's query (the heads padded to 8, 16, 32 or 64, head_dim
 * values each in f16) and the ring (each slot 64 keys' head_dim bytes and fp32 scales) in static
 * shared memory, of which no launch gets more than 48 KiB, beside the first pass's counts (4 KiB),
 * the head weights and 1 KiB of barriers: as many slots as fit there, 3 at most (the count the
 * kernel had at every shipped geometry: at 64 heads the f16 query takes a fourth slot's room);
 * validation refuses a geometry with room for fewer than 2. */
/* The indexer heads as the warpgroup score kernels' MMA takes them (its N): 8, 16, 32 or 64 */
static int score_heads_padded(const dsg_geometry *g)
{
    return g->idx_heads <= 8 ? 8 : g->idx_heads <= 16 ? 16 : g->idx_heads <= 32 ? 32 : 64;
}

int dsg_score_stages(const dsg_geometry *g)
{
    const int padded = score_heads_padded(g);
    const int room = 48 * 1024 - padded * g->idx_head_dim * 2 - 4096 - 16 * (padded / 4 + 4) - 1024;
    const int fit = room / (64 * (g->idx_head_dim + 4));
    return fit < 3 ? fit : 3;
}

static void check_geometry_relations(vctx *v, const dsg_geometry *g, const where *gw)
{
    where c;
    if (g->qk_rope_dim % 2 != 0) {
        c = child(gw, "qk_rope_dim", 0);
        err(v, &c, "must be even (rope rotates pairs), got %d", g->qk_rope_dim);
    }
    if (g->q_lora_rank % 8 != 0) {
        c = child(gw, "q_lora_rank", 0);
        err(v, &c, "must be a multiple of 8 (16-byte bf16 vectors), got %d", g->q_lora_rank);
    }
    where iw = child(gw, "indexer", 0);
    if (g->idx_head_dim & (g->idx_head_dim - 1)) {
        c = child(&iw, "head_dim", 0);
        err(v, &c, "must be a power of two (the Hadamard rotation and the cache pages assume it), got %d",
            g->idx_head_dim);
    }
    if (g->idx_topk % 4 != 0) {
        c = child(&iw, "topk", 0);
        err(v, &c, "must be a multiple of 4 (top-k rows are written and cleared 16 bytes at a time), got %d",
            g->idx_topk);
    }
    if (g->idx_topk > g->max_positions) {
        c = child(&iw, "topk", 0);
        err(v, &c, "(%d) exceeds max_positions (%d): no request has that many keys, and every top-k row would "
            "carry the difference as -1 entries that stage C scans",
            g->idx_topk, g->max_positions);
    }
    if (g->qk_rope_dim > g->idx_head_dim) {
        c = child(&iw, "head_dim", 0);
        err(v, &c, "(%d) must hold the %d rope dims", g->idx_head_dim, g->qk_rope_dim);
    } else if (g->idx_head_dim < 64 || g->idx_head_dim > 256) {
        c = child(&iw, "head_dim", 0);
        err(v, &c, "must be 64, 128 or 256 (the indexer kernels split a key row in 16-byte quarters), got %d",
            g->idx_head_dim);
    } else if (dsg_score_stages(g) < 2) { /* every head count: the kernels size the ring alike */
        c = child(&iw, "heads", 0);
        err(v, &c, "%d heads of %d dims leave the score kernel no room for two 64-key slots beside the query in "
            "its 48 KiB of static shared memory; at %d dims at most %d heads fit",
            g->idx_heads, g->idx_head_dim, g->idx_head_dim, g->idx_head_dim > 128 ? 16 : 64);
    }
}

static void make_name(const dsg_spec *spec, dsg_config *cfg)
{
    snprintf(cfg->name, sizeof cfg->name, "%s_tp%d_dcp%d_i%d_%s%s", spec->model, cfg->tp, cfg->dcp,
             cfg->interleave, dsg_cache_dtype_names[cfg->cache_dtype], cfg->fp8_scale_pow2 ? "_p2" : "");
    size_t i = 0;
    for (; cfg->name[i]; i++) {
        char ch = cfg->name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        cfg->symbol[i] = ok ? ch : '_';
    }
    cfg->symbol[i] = '\0';
}

static void check_model(vctx *v, int idx, const where *w)
{
    lua_State *L = v->L;
    where c = child(w, "model", 0);
    raw_field(L, idx, "model");
    if (lua_isnil(L, -1)) {
        err(v, w, "missing field 'model'");
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        err(v, &c, "expected a string, got %s", type_name(v, -1));
    } else {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (n == 0 || n >= 32 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") != n || s[0] == '.' ||
            s[0] == '-')
            err(v, &c, "'%s' is not a model name: 1 to 31 of a-z, 0-9, '.', '_', '-', not starting with "
                       "'.' or '-'", quote(s, n).s);
        else
            memcpy(v->spec->model, s, n + 1);
    }
    lua_pop(L, 1);
}

static void check_configs(vctx *v, int idx, const where *w)
{
    lua_State *L = v->L;
    where cw = child(w, "configs", 0);
    raw_field(L, idx, "configs");
    int list = lua_absindex(L, -1);
    if (lua_isnil(L, list)) {
        err(v, w, "missing field 'configs'");
    } else if (!is_table(v, list)) {
        err(v, &cw, "expected a list of configurations, got %s", type_name(v, list));
    } else {
        cw = enter(v, list, &cw);
        lua_Integer n = (lua_Integer)lua_rawlen(L, list);
        lua_Integer count = 0;
        lua_pushnil(L);
        while (lua_next(L, list)) {
            count++;
            lua_pop(L, 1);
        }
        if (n == 0)
            err(v, &cw, "expected at least one configuration");
        else if (count != n)
            err(v, &cw, "expected a list (keys 1..n), found %lld entries for length %lld", (long long)count,
                (long long)n);
        else if (n > DSG_MAX_CONFIGS)
            err(v, &cw, "%lld configurations, at most %d per spec", (long long)n, DSG_MAX_CONFIGS);
        for (lua_Integer i = 1; i <= n && i <= DSG_MAX_CONFIGS && !dsg_too_many(v->d); i++) {
            where c = child(&cw, NULL, (long)i);
            dsg_config *cfg = &v->spec->configs[i - 1];
            memset(cfg, 0, sizeof *cfg);
            cfg->line = line_of(v, &c);
            lua_rawgeti(L, list, i);
            if (!is_table(v, -1)) {
                err(v, &c, "expected a configuration table, got %s", type_name(v, -1));
            } else {
                where e = enter(v, -1, &c);
                check_fields(v, -1, config_fields, (char *)cfg, &e);
                cfg->line = line_of(v, &e);
            }
            lua_pop(L, 1);
        }
        if (n <= DSG_MAX_CONFIGS)
            v->spec->nconfigs = (int)n;
    }
    lua_pop(L, 1);
}

static int validate(vctx *pv, int idx)
{
    vctx v = *pv;
    dsg_spec *spec = v.spec;
    dsg_sandbox *sb = v.sb;
    dsg_diag *d = v.d;
    lua_State *L = v.L;
    int before = d->errors;
    where root = {spec->path, "", ""};
    if (!is_table(&v, idx)) {
        int line = dsg_sandbox_last_line(sb);
        if (lua_isnil(L, idx))
            dsg_error(d, spec->path, line, "spec returns nothing; it must return a table (see README, "
                                           "\"Writing a spec\")");
        else
            dsg_error(d, spec->path, line, "spec returns %s; it must return a table", type_name(&v, idx));
        return -1;
    }
    root = enter(&v, idx, &root);
    unsigned long long typo = 0; /* a misspelt top-level field is reported once, not also as missing */
    check_unknown(&v, idx, top_fields, &root, &typo);
    if (!(typo & 1))
        check_model(&v, idx, &root);
    where gw = child(&root, "geometry", 0);
    raw_field(L, idx, "geometry");
    if (lua_isnil(L, -1)) {
        if (!(typo & 2))
            err(&v, &root, "missing field 'geometry'");
    } else {
        check_value(&v, -1, &top_fields[1], (char *)&spec->g, &gw);
        if (d->errors == before) {
            where e = enter(&v, -1, &gw);
            check_geometry_relations(&v, &spec->g, &e);
        }
    }
    lua_pop(L, 1);
    if (!(typo & 4))
        check_configs(&v, idx, &root);
    if (d->errors != before)
        return -1;

    where cw = child(&root, "configs", 0);
    for (int i = 0; i < spec->nconfigs; i++) {
        where c = child(&cw, NULL, i + 1);
        check_relations(&v, &spec->g, &spec->configs[i], &c);
        make_name(spec, &spec->configs[i]);
        for (int j = 0; j < i; j++) {
            if (strcmp(spec->configs[i].name, spec->configs[j].name) == 0) {
                dsg_error(d, spec->path, spec->configs[i].line,
                          "%s: duplicate configuration '%s' (configs[%d], line %d, is the same)", c.display,
                          spec->configs[i].name, j + 1, spec->configs[j].line);
                break;
            }
        }
    }
    return d->errors == before ? 0 : -1;
}

static int validate_protected(lua_State *L)
{
    vctx *v = lua_touserdata(L, 1);
    lua_pushinteger(L, validate(v, 2));
    return 1;
}

int dsg_spec_validate(dsg_spec *spec, dsg_sandbox *sb, dsg_trusted *t, dsg_diag *d)
{
    vctx v = {spec, sb, t, d, dsg_sandbox_state(sb)};
    lua_State *L = v.L;
    /* Every read of spec values runs in protected mode: an error there (out of memory, a
     * metamethod) is a reported spec error, never a Lua panic that aborts the generator. */
    int top = lua_gettop(L);
    lua_pushcfunction(L, validate_protected);
    lua_pushlightuserdata(L, &v);
    lua_pushvalue(L, top);
    int rc = lua_pcall(L, 2, 1, 0);
    if (rc != LUA_OK) {
        const char *msg = rc == LUA_ERRMEM ? "out of memory" : lua_tostring(L, -1);
        dsg_error(d, spec->path, 0, "cannot read the spec's table: %s", msg ? msg : "error");
        lua_settop(L, top);
        return -1;
    }
    int result = (int)lua_tointeger(L, -1);
    lua_settop(L, top);
    return result;
}

double dsg_yarn_mscale(double scale, double m)
{
    return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_correction_dim(double rotations, int dim, double base, int max_pos)
{
    return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

/* Rope frequencies: plain theta^(-2i/d), or YaRN as DeepSeek-V3 defines it (frequencies of long
 * wavelengths divided by factor, a linear ramp between the beta_fast and beta_slow correction
 * dims). The runtime's rope table kernel takes cos and sin of pos * freq[i] in double, times
 * rope_mscale. */
static void rope_freqs(const dsg_geometry *g, double *freq)
{
    const int dim = g->qk_rope_dim;
    double low = 0, high = 1;
    if (g->has_yarn) {
        low = fmax(floor(yarn_correction_dim(g->yarn_beta_fast, dim, g->rope_theta, g->yarn_original_max_positions)),
                   0);
        high = fmin(ceil(yarn_correction_dim(g->yarn_beta_slow, dim, g->rope_theta, g->yarn_original_max_positions)),
                    dim - 1);
        if (low == high)
            high += 0.001;
    }
    for (int i = 0; i < dim / 2; i++) {
        freq[i] = pow(g->rope_theta, -2.0 * i / dim);
        if (g->has_yarn) {
            double ramp = fmin(fmax((i - low) / (high - low), 0.0), 1.0);
            freq[i] = freq[i] / g->yarn_factor * ramp + freq[i] * (1.0 - ramp);
        }
    }
}

int dsg_attend_heads_per_cta(const dsg_geometry *g, const dsg_config *c)
{
    const int gathered = g->heads / c->tp * c->dcp;
    return gathered % 64 == 0 ? 64 : gathered % 32 == 0 ? 32 : 16;
}

void dsg_derive(const dsg_geometry *g, const dsg_config *c, dsg_derived *o)
{
    memset(o, 0, sizeof *o);
    o->heads_local = g->heads / c->tp;
    o->heads_gathered = o->heads_local * c->dcp;
    o->attend_heads_per_cta = dsg_attend_heads_per_cta(g, c);
    /* On sm_90a a sparse MLA CTA is two consumer warpgroups and its producers, which gather and
     * dequantise the key tiles. At 16 heads the consumers' products are small and one producer kept
     * them waiting: two, each half of every tile (128 rows 16% faster). At 32 heads two were 9%
     * slower (the consumers then take 160 registers, not 184, and hold 128 accumulators), and
     * since the producer's loads take constant offsets, two of 72 registers beside consumers of
     * 184 are as fast as one (RESULTS.md, 2026-12-03, fifteenth session); at 64
     * ptxas refuses them (it checks an m64n256 product, which needs 154 registers, against the
     * launch's 128). RESULTS.md, 2026-12-02. */
    o->attend_producers = o->attend_heads_per_cta == 16 ? 2 : 1;
    o->attend_ws_threads = 256 + 128 * o->attend_producers; /* kernels/dsa_attend_layout.cuh asserts it */
    o->qk_head_dim = g->qk_nope_dim + g->qk_rope_dim;
    o->kv_dim = g->kv_lora_rank + g->qk_rope_dim;
    double m_all = g->has_yarn ? dsg_yarn_mscale(g->yarn_factor, g->yarn_mscale_all_dim) : 1.0;
    o->softmax_scale = g->has_softmax_scale ? g->softmax_scale : pow(o->qk_head_dim, -0.5) * m_all * m_all;
    o->rope_mscale = g->has_yarn ? dsg_yarn_mscale(g->yarn_factor, g->yarn_mscale) / m_all : 1.0;

    const int L = g->kv_lora_rank, R = g->qk_rope_dim;
    cache_layout((dsg_cache_dtype)c->cache_dtype, L, R, o);

    o->idx_bytes_per_token = g->idx_head_dim + 4;
    o->idx_page_bytes = g->block_size * o->idx_bytes_per_token;
    o->idx_scale_offset_in_page = g->block_size * g->idx_head_dim;

    o->ws_q_packed = o->heads_local * o->kv_dim * 2;
    o->ws_q_gathered = o->heads_gathered * o->kv_dim * 2;
    o->ws_partial_out = o->heads_gathered * L * 4;
    o->ws_partial_lse = o->heads_gathered * 4;
    int w = c->dcp;
    o->gather_send = w > 1 ? o->ws_q_packed : 0;
    o->gather_recv = (w - 1) * o->ws_q_packed;
    /* The exchange: one all-to-all of bf16 partial outputs and fp32 LSEs (the merge stays fp32:
     * rounding a partial to bf16 moves the merged output by at most 2^-9 of the largest value, the
     * output's own rounding), half the bytes of fp32 partials and one collective instead of two. */
    o->exchange_row = o->heads_local * (2 * L + 4);
    o->ws_exchange = w * o->exchange_row;
    o->exchange_send = (w - 1) * o->exchange_row;
    o->exchange_recv = o->exchange_send;
    o->q_lat_row = o->heads_local * L;
    o->idx_q_row = g->idx_heads * g->idx_head_dim;
    o->q_pe_row = o->heads_local * R;
    o->out_row = o->heads_local * L;
    o->lse_row = o->heads_local;
    /* DCP = 1: attend packs its query itself (no packed copy); DCP > 1: this rank's packed query,
     * the gathered ones and the exchange's two buffers */
    o->ws_attend_row = w > 1 ? o->ws_q_packed + o->ws_q_gathered + 2 * o->ws_exchange : 0;
    o->attend_row_keys = g->idx_topk / w;
    o->attend_row_bytes = (long long)o->attend_row_keys * o->cache_bytes_per_token;
    o->attend_row_flops = 2LL * o->heads_gathered * o->attend_row_keys * (o->kv_dim + L);
    o->topk_row_bytes = 4 * g->idx_topk;

    /* The kernel library is written for these CTA sizes (kernels check them with static_assert). */
    o->prologue_threads = 256;
    o->rope_threads = 256;
    o->pack_threads = 256;
    o->merge_threads = 128;
    /* The split merge in two entries: rows of 2 splits (many rows: thousands of merge CTAs of two
     * partials each) take one whose threads load 2 partials at once (32 registers, 16 CTAs an SM
     * instead of 6: 64 heads x 64 rows 82 -> 77 us); more splits (few rows, few CTAs) the one with
     * 8 in flight, since 2 at a time waits on 8 rounds of loads at 16 splits (8 rows 6-7 us slower;
     * tests/bench/RESULTS.md, thirteenth session). */
    o->split_merge_few = 2;
    o->pack_ctas_per_token = (o->heads_local * (o->kv_dim / 8) + o->pack_threads - 1) / o->pack_threads;
    o->attend_ctas_per_token = (o->heads_gathered + o->attend_heads_per_cta - 1) / o->attend_heads_per_cta;
    /* Where a row's heads take an even number of 64-head CTAs, two CTAs of a row form a cluster and
     * share the key tiles: each CTA's producer gathers (and dequantises) half of every tile into its
     * own and its peer's shared memory (FlashMLA's "crossover"; here fp8_ds_mla at 128 heads x 128
     * rows 265 -> 242 us; bf16 keys, which each CTA otherwise gathers whole, 363 -> 229 us on an H100;
     * tests/bench/RESULTS.md). Not where the top-k takes more than one sparse MLA segment
     * (DSA_ATTEND_SEGMENT entries): there the pair's kernels keep 8-20 bytes in local memory beside
     * the loop over segments (tests/bench/RESULTS.md, thirtieth session), the single 64-head CTA's
     * none. */
    o->attend_cluster =
        o->attend_heads_per_cta == 64 && o->attend_ctas_per_token % 2 == 0 && g->idx_topk <= DSA_ATTEND_SEGMENT ? 2 : 1;
    /* A row's top-k entries may be split over CTAs (the runtime picks how many per call, when rows
     * alone do not fill the device), each split keeping at least two key tiles (128) of them on this
     * rank: a CTA's cost is mostly per tile, so at few rows more splits shorten the call, down to
     * two tiles a split: on an H200 (tests/bench/RESULTS.md) one row at 16, 32 and 64 heads took
     * 1-2 us less over 16 splits of 2048 entries than over 32 (a CTA's fixed cost, its query and
     * the warp-specialised loop's setup, against one tile). A power of two: a split takes the
     * entries k with k % splits == split. At most DSA_MERGE_MAX (32: the split merge stages a row's
     * LSEs in shared memory, one per thread of its 128). */
    o->attend_max_splits = 1;
    while (o->attend_max_splits < DSA_MERGE_MAX && g->idx_topk / (w * 2 * o->attend_max_splits) >= 128)
        o->attend_max_splits *= 2;
    o->attend_split_keys = g->idx_topk / w / o->attend_max_splits;
    o->rope_entries = (long long)g->max_positions * (R / 2);

    /* stage B: the most keys one rank holds for a row (positions dealt in runs of I over W ranks) */
    o->idx_max_local = (g->max_positions + w * c->interleave - 1) / (w * c->interleave) * c->interleave;
    o->idx_max_local = (o->idx_max_local + 3) / 4 * 4; /* a row of score keys is read in 16-byte loads */
    o->ws_idx_q8 = g->idx_heads * g->idx_head_dim;
    o->ws_idx_wq = g->idx_heads * 4;
    o->ws_idx_keys = o->idx_max_local * 4;
    o->ws_idx_cand = g->idx_topk * 8;
    o->ws_idx_merged = w * g->idx_topk * 8;
    /* The top-k of few rows spreads each row over several CTAs (kernels/dsa_index_select.cuh,
     * select_topk_split): radix passes of 11 bits (3 passes, 2048 bins: a pass's histogram is 8 KiB
     * of shared memory), at least 2048 keys per CTA (one 16-byte load per thread and pass; fewer
     * would spend more on the barriers and the row-wide histogram than on the keys). */
    o->index_topk_split_threads = 512;
    o->index_topk_radix_bits = 11;
    o->index_topk_split_keys = 2048;
    o->index_topk_split_max = (o->idx_max_local + o->index_topk_split_keys - 1) / o->index_topk_split_keys;
    /* Split from 2 CTAs a row: since the split finishes the first pass's bin in shared memory (two
     * grid barriers), 4 CTAs a row of 64 rows and 2 of 128 rows beat one CTA a row at 32K and 128K
     * keys on an H200 (tests/bench/RESULTS.md: 64 x 128K keys, 133 -> 76 us of top-k). The runtime
     * also caps the CTAs at the row's keys / split_keys. */
    o->index_topk_split_min = 2;
    /* ... and only rows of more than 8 CTAs' worth of keys (16K), which one CTA holds in its
     * registers (16 keys a thread; kernels/dsa_index.cuh): one CTA a row from registers was faster
     * than the split at rows of 16K keys at 1 to 128 rows (1 x 16K 20.5 -> 17.6 us, 128 x 16K 128.7
     * -> 118.8, DeepSeek-V3.2, back to back) and as fast or faster at 8K (an H100, both models:
     * tests/bench/RESULTS.md, thirty-ninth session). */
    o->index_topk_split_min_keys = 8 * o->index_topk_split_keys;
    /* The first pass's bin that holds the k-th key (a band of scores 1/4 of an octave wide, by the
     * key's sign, exponent and 2 mantissa bits) holds about 0.8-4.2K of a 128K-key row of scores
     * spread like the benchmark's (top 2048): up to 8192 of them every CTA reads and finishes in
     * shared memory after one barrier (their keys and a bit each, 33 KiB; 41 KiB in all, which
     * keeps 4 CTAs of 512 threads an SM and stays static); beyond that the passes go on over the
     * chunks, a barrier each. The row's state: 8 counters, a histogram per pass, 2 counts per CTA,
     * the candidates' (key, position) pairs, the positions of the keys above the first pass's bin
     * (fewer than idx_topk; SplitState in the kernel). */
    o->index_topk_split_cands = 8192;
    /* Where the candidates are finished in shared memory, a CTA with a chunk of this many keys or
     * more sets a bit for each of its selected keys and emits by walking the bits (two reads of the
     * chunk fewer, a few barriers and round trips more): on an H200 128 x 128K keys (64K a CTA) 3%
     * faster, 64 x 128K (32K) 1-1.5%, 64 x 32K and 128 x 32K (8K, 16K) equal, and 1 or 8 rows (2K-8K)
     * 1-1.5 us slower than the two reads (tests/bench/RESULTS.md). */
    o->index_topk_bit_keys = 16384;
    /* index_score counts the split top-k's first radix pass as it writes the scores (one shared
     * atomic a key, its CTA's counts added to the row's histogram at the end), so that the top-k
     * neither reads the row for it nor meets at its barrier. Where a row can be split (the plan
     * holds at least index_topk_split_min CTAs' worth of keys); the kernels of a plan whose rows
     * never split are compiled without it. Measured at every head count: on an H200 GLM-5.2's (32
     * heads) call 1-5 us faster at 8 rows or more; on an H100 DeepSeek-V3.2's (64 heads) 1.5-3 us
     * faster at one row (1 x 128K 29.5 / 28.1 -> 26.5 / 26.2 us) and 1-3% at 64-128 rows of 128K
     * (an earlier score loop had lost 5-11 us there with it; tests/bench/RESULTS.md, forty-fourth
     * session). */
    o->index_score_bins = o->index_topk_split_max >= o->index_topk_split_min;
    {
        const int passes = (32 + o->index_topk_radix_bits - 1) / o->index_topk_radix_bits;
        o->ws_idx_topk_state = 4 * (8 + passes * (1 << o->index_topk_radix_bits) + 2 * o->index_topk_split_max +
                                    2 * o->index_topk_split_cands + g->idx_topk);
    }
    o->ws_index_row = o->ws_idx_q8 + o->ws_idx_wq + o->ws_idx_keys + o->ws_idx_topk_state +
                      (w > 1 ? o->ws_idx_cand * (1 + w) + o->ws_idx_merged : 0);
    o->index_q_threads = 256;
    o->index_q_ctas_per_token = (g->idx_heads + 7) / 8; /* a warp per head */
    o->index_score_threads = 128;
    /* One warpgroup a CTA. A CTA step: on sm_90a (wgmma, kernels/dsa_index_wgmma.cuh) two tiles of
     * 64 keys; elsewhere (mma.sync) each warp scores 4 groups of 8 keys. */
    o->index_score_keys_per_cta = o->index_score_threads / 32 * 8 * 4;
    /* mma.sync: 4 CTAs per SM caps the score kernel at 128 registers, which up to 32 heads fit
     * without spilling; with more heads NVRTC's own allocation (about 134 registers, 3 CTAs) does
     * best: a cap of 3 CTAs made it spill (0: no minimum given). The wgmma kernel's cap follows
     * its shared memory and loop, which are the library's (ScoreCtasOf, kernels/dsa_index_wgmma.cuh):
     * 4 CTAs per SM, 124 registers at 64 heads, 108 at 32. The library applies this cap below sm_100
     * only (ScoreMmaSyncCtasOf): ptxas for sm_100a spilled at it. */
    o->index_score_min_ctas = g->idx_heads > 32 ? 0 : 4;
    /* Two score kernels: on sm_90a index_score runs on warpgroup MMA fed by bulk copies,
     * index_score_few on mma.sync. On an H200 (tests/bench/RESULTS.md), since the warpgroup loop
     * looks its block table up a step ahead, the first is faster at every size measured: 1-16 rows
     * of 8K-128K keys (one row of 128K: 38.6 -> 32.5 us for the whole index call). A chunk of fewer
     * rows than this takes index_score_few; the choice follows the rows of a chunk only, which
     * every rank of a DCP group and a DCP = 1 context with the same index_tokens share, so each key
     * of a row is scored by the same kernel on all of them. 1: index_score always (the mma.sync
     * kernel stays for tests that compare the two, and is index_score itself without wgmma). */
    o->index_score_few_rows = 1;
    /* Prefill rows of one request score the same keys: index_score_group takes R consecutive rows of
     * a request in one CTA, their queries side by side as the wgmma's B (N = R x the heads padded to
     * 8, 16, 32 or 64), so a key tile is loaded once for R rows. R: as many as N <= 256 (the wgmma
     * N) allows, at most 8: 4 at 64 heads, 8 at 32 or fewer (N = 256 takes 128 accumulators a
     * thread, beside the keys' 4 D / 16 fragment registers: at D = 256, N <= 128); 1 (no group) past
     * 64 heads, where no wgmma kernel scores. */
    {
        const int padded = score_heads_padded(g);
        const int most = g->idx_head_dim > 128 ? 128 : 256, rows = most / padded;
        o->index_score_group_rows = g->idx_heads > 64 ? 1 : rows > 8 ? 8 : rows;
    }
    o->index_score_stages = dsg_score_stages(g);
    o->index_topk_threads = 1024;
    /* The DCP index merge places each candidate by binary searches over the other ranks' lists,
     * then selects from the merged list: where 12 W topk bytes fit in 200 KiB of shared memory (every
     * shipped configuration: 192 KiB at DCP 8, top-k 2048) the lists' positions and the merged list
     * live there, so a search step or a selection pass reads shared memory rather than making
     * dependent L2 round trips; beyond that they are read from global memory. */
    o->index_merge_smem = w > 1 && 12LL * w * g->idx_topk <= 200 * 1024 ? 12 * w * g->idx_topk : 0;
    rope_freqs(g, o->rope_freq);
}
