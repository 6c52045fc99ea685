/* libFuzzer target for libdsa's argument checks (runtime/args.c): each input picks a linked
 * configuration and one of the per-layer calls, and fills its argument struct (sizes, counts and
 * strides from the input, near the interesting edges more often than not; pointers from a few fake
 * device addresses: NULL, aligned, misaligned). dsa_check_prologue / attend / index run on a
 * context built by hand (its plan only: the checks need no device). Whatever the input, either
 *   - the call fails with DSA_ERROR_INVALID_ARGUMENT and a one-line printable message that starts
 *     with the call's name (also this thread's last error), or
 *   - it succeeds, and then every pointer the call's kernels dereference is set and aligned as they
 *     load or store it, every stride is the given one or the dense row and at least the dense row,
 *     and every product the call and its kernels form fits: t0 * stride (bytes) over the call's
 *     tokens, num_cache_blocks x block_size x bytes per token, num_cache_blocks x page bytes in
 *     int64, slots in int32 for the attend kernel, num_requests x max_blocks in int32;
 * and the context is unchanged apart from its message. A violation aborts (a finding). The
 * invariants are computed here in __int128 from the plan, independently of args.c's formulas.
 * Built with clang against ASan+UBSan by `ninja fuzz-args`; run by `tests/fuzz/run.sh args`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CONFIGS 64

static struct dsa_ctx *ctxs[MAX_CONFIGS];
static struct dsa_ctx *saved; /* a copy of the context under test, to see that only the message changed */
static int nctx;

static void setup(void)
{
    char err[1024];
    for (const dsa_plan_t *const *p = dsa_registry; *p && nctx < MAX_CONFIGS; p++) {
        const dsa_cfg_t *cfg = dsa_cfg_linked((*p)->name, err, sizeof err);
        struct dsa_ctx *c = calloc(1, sizeof *c);
        if (!cfg || !c) {
            fprintf(stderr, "fuzz_args: %s: %s\n", (*p)->name, cfg ? "out of memory" : err);
            exit(2);
        }
        c->cfg = cfg;
        ctxs[nctx++] = c;
    }
    saved = malloc(sizeof *saved);
    if (!nctx || !saved)
        exit(2);
}

static void violated(const char *what, const char *fn, const char *msg)
{
    fprintf(stderr, "fuzz_args: %s: %s (message: '%s')\n", fn, what, msg ? msg : "");
    abort();
}

/* ---- the input, read as a stream (zeros once it runs out) ---- */
typedef struct in {
    const uint8_t *p;
    size_t n;
} in_t;

static uint64_t take(in_t *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v = v << 8 | (in->n ? *in->p : 0u);
        if (in->n)
            in->p++, in->n--;
    }
    return v;
}

static int64_t near_by(in_t *in, int64_t v)
{
    int64_t d = (int64_t)(take(in, 1) % 5) - 2; /* -2..2 */
    return (d > 0 && v > INT64_MAX - d) || (d < 0 && v < INT64_MIN - d) ? v : v + d;
}

/* A count or stride: mostly a value at an edge (0, 1, -1, the int32 and int64 limits, powers of
 * two, the quotient of a limit by one of the plan's sizes f, or ref, each +-2), else raw. */
static int64_t value(in_t *in, int64_t ref, const int64_t *f, int nf)
{
    const unsigned s = (unsigned)take(in, 1);
    switch (s % 16) {
    case 0: return 0;
    case 1: return 1 + (int64_t)take(in, 1);
    case 2: return -1 - (int64_t)take(in, 1);
    case 3: return near_by(in, INT64_MAX);
    case 4: return near_by(in, INT64_MIN);
    case 5: return near_by(in, INT32_MAX);
    case 6: return near_by(in, (int64_t)1 << (take(in, 1) % 63));
    case 7: return -near_by(in, (int64_t)1 << (take(in, 1) % 63));
    case 8: return near_by(in, INT64_MAX / f[take(in, 1) % (unsigned)nf]);
    case 9: return near_by(in, INT32_MAX / f[take(in, 1) % (unsigned)nf]);
    case 10: return near_by(in, ref);
    case 11: {
        int64_t v;
        return __builtin_add_overflow(ref, 8 * (int64_t)take(in, 2), &v) ? ref : v;
    }
    case 12: return near_by(in, (int64_t)1 << 24);
    case 13: return (int64_t)(int32_t)take(in, 4);
    default: return (int64_t)take(in, 8);
    }
}

/* A fake device address (never dereferenced): NULL, 256-byte aligned, or off by 1..15 or more. */
static void *pointer(in_t *in, int i)
{
    const unsigned s = (unsigned)take(in, 1);
    const uintptr_t base = (uintptr_t)0x7f0000000000ull + (uintptr_t)0x1000000u * (uintptr_t)i;
    switch (s % 8) {
    case 0: return NULL;
    case 1: return (void *)(base + 1);
    case 2: return (void *)(base + ((uintptr_t)1 << (take(in, 1) % 4))); /* 1, 2, 4 or 8 */
    case 3: return (void *)(base + (take(in, 1) & 15));
    case 4: return (void *)(base + take(in, 2));
    default: return (void *)base;
    }
}

static size_t args_size(in_t *in, size_t size)
{
    const unsigned s = (unsigned)take(in, 1);
    switch (s % 8) {
    case 0: return (size_t)take(in, 1);
    case 1: return size - 1 - (size_t)(take(in, 1) % size);
    case 2: return size + (size_t)take(in, 1);
    default: return size;
    }
}

/* ---- the invariants on success ---- */

typedef struct checker {
    const char *fn;
    int64_t tokens;
} checker_t;

/* The kernels dereference p with loads or stores of align bytes. */
static void need_ptr(const checker_t *c, const void *p, unsigned align, const char *name)
{
    char what[128];
    snprintf(what, sizeof what, "args->%s %s, yet the call was accepted", name, p ? "misaligned" : "NULL");
    if (!p || (uintptr_t)p % align)
        violated(what, c->fn, NULL);
}

/* A row stride as the call uses it: got is given or, given 0, the dense row; at least dense; rows
 * start on a 16-byte boundary where the kernels load 16 bytes (vec); every row offset the call forms
 * from the base pointer, (tokens - 1) * stride * elem bytes, fits int64. */
static void need_stride(const checker_t *c, int64_t got, int64_t given, int64_t dense, int elem, int vec,
                        const char *name)
{
    const int bad_row = got != (given ? given : dense) || got < dense || (vec && got * elem % 16 != 0);
    const int too_far = (__int128)(c->tokens - 1) * got * elem > INT64_MAX;
    if (bad_row || too_far) {
        char what[256];
        snprintf(what, sizeof what, "stride %s = %lld (given %lld, dense %lld, %lld tokens) accepted%s", name,
                 (long long)got, (long long)given, (long long)dense, (long long)c->tokens,
                 too_far ? ": a row offset beyond int64" : "");
        violated(what, c->fn, NULL);
    }
}

static void need_fits(const checker_t *c, __int128 v, __int128 max, const char *what)
{
    if (v > max)
        violated(what, c->fn, NULL);
}

static void check_prologue(const checker_t *c, const dsa_cfg_t *cfg, const dsa_prologue_args_t *a,
                           const dsa_prologue_strides_t *s)
{
    const dsa_config_info_t *g = &cfg->info;
    need_ptr(c, a->q_c, 16, "q_c");
    need_ptr(c, a->q_c_out, 16, "q_c_out");
    need_ptr(c, a->kv, 16, "kv");
    need_ptr(c, a->positions, 8, "positions");
    need_ptr(c, a->slot_mapping, 8, "slot_mapping");
    need_ptr(c, a->q_norm_w, 16, "q_norm_w");
    need_ptr(c, a->kv_norm_w, 16, "kv_norm_w");
    /* cache entries: 16-byte stores (bf16), 8-byte (fp8_ds_mla), 4-byte (nvfp4_ds_mla) */
    need_ptr(c, a->kv_cache, g->cache_dtype == DSA_CACHE_BF16 ? 16 : g->cache_dtype == DSA_CACHE_FP8_DS_MLA ? 8 : 4,
             "kv_cache");
    need_stride(c, s->q_c, a->q_c_stride, g->q_lora_rank, 2, 1, "q_c");
    need_stride(c, s->kv, a->kv_stride, g->kv_dim, 2, 1, "kv");
    need_stride(c, g->q_lora_rank, 0, g->q_lora_rank, 2, 1, "q_c_out (dense)");
    if (a->idx_k) {
        need_ptr(c, a->idx_k, 2, "idx_k");
        need_ptr(c, a->idx_norm_w, 2, "idx_norm_w");
        need_ptr(c, a->idx_norm_b, 2, "idx_norm_b");
        need_ptr(c, a->idx_cache, 4, "idx_cache"); /* 2-byte e4m3 pairs, 4-byte scales */
        need_stride(c, s->idx_k, a->idx_k_stride, g->idx_head_dim, 2, 0, "idx_k");
        need_fits(c, (__int128)a->num_cache_blocks * g->idx_page_bytes, INT64_MAX, "indexer cache bytes beyond int64");
    }
    if (a->clear_topk) {
        need_ptr(c, a->topk, 16, "topk"); /* rows cleared with 16-byte stores */
        need_stride(c, g->idx_topk, 0, g->idx_topk, 4, 1, "topk (dense)");
    }
    need_fits(c, -(__int128)a->num_cache_blocks, -1, "num_cache_blocks < 1");
    need_fits(c, (__int128)a->num_cache_blocks * g->block_size * g->cache_bytes_per_token, INT64_MAX,
              "cache bytes beyond int64");
}

static void check_attend(const checker_t *c, const dsa_cfg_t *cfg, const dsa_attend_args_t *a,
                         const dsa_attend_strides_t *s)
{
    const dsa_config_info_t *g = &cfg->info;
    need_ptr(c, a->q_lat, 2, "q_lat");
    need_ptr(c, a->q_pe, 2, "q_pe");
    need_ptr(c, a->positions, 8, "positions");
    need_ptr(c, a->topk, 4, "topk");
    need_ptr(c, a->req_of_token, 4, "req_of_token");
    need_ptr(c, a->seq_lens, 4, "seq_lens");
    need_ptr(c, a->block_table, 4, "block_table");
    need_ptr(c, a->kv_cache, 16, "kv_cache");
    need_ptr(c, a->out, 4, "out"); /* bf16 pairs (dcp 1) */
    if (a->lse)
        need_ptr(c, a->lse, 4, "lse");
    need_stride(c, s->q_lat, a->q_lat_stride, cfg->q_lat_row, 2, 0, "q_lat");
    need_stride(c, s->q_pe, a->q_pe_stride, cfg->q_pe_row, 2, 0, "q_pe");
    need_stride(c, s->topk, a->topk_stride, g->idx_topk, 4, 0, "topk");
    need_stride(c, cfg->out_row, 0, cfg->out_row, 2, 0, "out (dense)");
    need_stride(c, cfg->lse_row, 0, cfg->lse_row, 4, 0, "lse (dense)");
    need_fits(c, -(__int128)a->num_cache_blocks, -1, "num_cache_blocks < 1");
    need_fits(c, (__int128)a->num_cache_blocks * g->block_size, INT32_MAX, "slots beyond int32");
    need_fits(c, (__int128)a->num_cache_blocks * g->block_size * g->cache_bytes_per_token, INT64_MAX,
              "cache bytes beyond int64");
    need_fits(c, -(__int128)a->num_requests, -1, "num_requests < 1");
    need_fits(c, -(__int128)a->max_blocks, -1, "max_blocks < 1");
    need_fits(c, (__int128)a->num_requests * a->max_blocks, INT32_MAX, "num_requests x max_blocks beyond int32");
}

static void check_index(const checker_t *c, const dsa_cfg_t *cfg, const dsa_index_args_t *a,
                        const dsa_index_strides_t *s)
{
    const dsa_config_info_t *g = &cfg->info;
    need_ptr(c, a->q, 2, "q");
    need_ptr(c, a->weights, 4, "weights");
    need_ptr(c, a->positions, 8, "positions");
    need_ptr(c, a->req_of_token, 4, "req_of_token");
    need_ptr(c, a->seq_lens, 4, "seq_lens");
    need_ptr(c, a->block_table, 4, "block_table");
    need_ptr(c, a->idx_cache, 16, "idx_cache"); /* key rows loaded 16 bytes at a time */
    need_ptr(c, a->topk, 4, "topk");
    need_stride(c, s->q, a->q_stride, (int64_t)g->idx_heads * g->idx_head_dim, 2, 0, "q");
    need_stride(c, s->weights, a->weights_stride, g->idx_heads, 4, 0, "weights");
    need_stride(c, s->topk, a->topk_stride, g->idx_topk, 4, 0, "topk");
    need_fits(c, -(__int128)a->num_cache_blocks, -1, "num_cache_blocks < 1");
    need_fits(c, (__int128)a->num_cache_blocks * g->idx_page_bytes, INT64_MAX, "indexer cache bytes beyond int64");
    need_fits(c, (__int128)a->num_cache_blocks * g->block_size, INT64_MAX, "slots beyond int64");
    need_fits(c, -(__int128)a->num_requests, -1, "num_requests < 1");
    need_fits(c, -(__int128)a->max_blocks, -1, "max_blocks < 1");
    need_fits(c, (__int128)a->num_requests * a->max_blocks, INT32_MAX, "num_requests x max_blocks beyond int32");
}

/* ---- one input ---- */

/* A success: never without a context, arguments or their full size; tokens 0..2^31-1. 1 when
 * there are tokens, so that the call goes on to use its arguments. */
static int accepted(checker_t *c, int bad, int64_t tokens)
{
    if (bad)
        violated("no context, no arguments or a short args->size accepted", c->fn, NULL);
    if (tokens < 0 || tokens > INT32_MAX)
        violated("a token count outside 0..2^31-1 accepted", c->fn, NULL);
    c->tokens = tokens;
    return tokens > 0;
}

static void check_error(dsa_result_t rc, dsa_ctx_t ctx, const char *fn)
{
    const char *msg = dsa_last_error(ctx);
    if (rc != DSA_ERROR_INVALID_ARGUMENT)
        violated("a result other than DSA_SUCCESS or DSA_ERROR_INVALID_ARGUMENT", fn, msg);
    size_t n = strlen(fn);
    if (strncmp(msg, fn, n) != 0 || strncmp(msg + n, ": ", 2) != 0 || !msg[n + 2])
        violated("the message does not start with the call's name and say something", fn, msg);
    for (const char *p = msg; *p; p++)
        if (*p < ' ' || *p > '~')
            violated("the message is not one printable line", fn, msg);
    if (strcmp(dsa_last_error(NULL), msg) != 0)
        violated("the thread's last error is not the context's", fn, msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!nctx)
        setup();
    in_t in = {data, size};
    const unsigned call = (unsigned)take(&in, 1);
    struct dsa_ctx *ctx = ctxs[take(&in, 1) % (unsigned)nctx];
    const dsa_cfg_t *cfg = ctx->cfg;
    const dsa_config_info_t *g = &cfg->info;
    const int64_t bs = g->block_size;
    /* the sizes the bounds divide by, for values at their edges */
    const int64_t f[] = {bs, bs * g->cache_bytes_per_token, bs * (g->cache_bytes_per_token + g->idx_bytes_per_token),
                         g->idx_page_bytes, 2, 3};
    const int nf = (int)(sizeof f / sizeof f[0]);
    const int null_ctx = take(&in, 1) == 0xff, null_args = take(&in, 1) == 0xff;
    memcpy(saved, ctx, sizeof *saved);
    dsa_ctx_t c = null_ctx ? NULL : ctx;
    checker_t ck = {NULL, 0};
    dsa_result_t rc;
    switch (call % 3) {
    case 0: {
        dsa_prologue_args_t a;
        memset(&a, 0, sizeof a);
        a.size = args_size(&in, sizeof a);
        a.num_tokens = value(&in, INT32_MAX, f, nf);
        a.q_c = pointer(&in, 1), a.q_c_out = pointer(&in, 2), a.kv = pointer(&in, 3), a.idx_k = pointer(&in, 4);
        a.positions = pointer(&in, 5), a.slot_mapping = pointer(&in, 6);
        a.q_norm_w = pointer(&in, 7), a.kv_norm_w = pointer(&in, 8);
        a.idx_norm_w = pointer(&in, 9), a.idx_norm_b = pointer(&in, 10);
        a.kv_cache = pointer(&in, 11), a.idx_cache = pointer(&in, 12);
        a.num_cache_blocks = value(&in, INT64_MAX / bs, f, nf);
        a.topk = pointer(&in, 13);
        a.clear_topk = (int)(int8_t)take(&in, 1);
        a.q_c_stride = value(&in, g->q_lora_rank, f, nf);
        a.kv_stride = value(&in, g->kv_dim, f, nf);
        a.idx_k_stride = value(&in, g->idx_head_dim, f, nf);
        dsa_prologue_strides_t s;
        ck.fn = "dsa_prologue";
        rc = dsa_check_prologue(c, null_args ? NULL : &a, &s);
        if (rc == DSA_SUCCESS && accepted(&ck, null_ctx || null_args || a.size < sizeof a, a.num_tokens))
            check_prologue(&ck, cfg, &a, &s);
        break;
    }
    case 1: {
        dsa_attend_args_t a;
        memset(&a, 0, sizeof a);
        a.size = args_size(&in, sizeof a);
        a.num_tokens = value(&in, INT32_MAX, f, nf);
        a.q_lat = pointer(&in, 1), a.q_pe = pointer(&in, 2), a.positions = pointer(&in, 3), a.topk = pointer(&in, 4);
        a.req_of_token = pointer(&in, 5), a.seq_lens = pointer(&in, 6), a.block_table = pointer(&in, 7);
        a.num_requests = value(&in, 1, f, nf);
        const int64_t nr = a.num_requests > 0 ? a.num_requests : 1;
        a.max_blocks = value(&in, INT32_MAX / nr, f, nf);
        a.kv_cache = pointer(&in, 8);
        a.num_cache_blocks = value(&in, INT32_MAX / bs, f, nf);
        a.out = pointer(&in, 9), a.lse = pointer(&in, 10);
        a.q_lat_stride = value(&in, cfg->q_lat_row, f, nf);
        a.q_pe_stride = value(&in, cfg->q_pe_row, f, nf);
        a.topk_stride = value(&in, g->idx_topk, f, nf);
        dsa_attend_strides_t s;
        ck.fn = "dsa_attend";
        rc = dsa_check_attend(c, null_args ? NULL : &a, &s);
        if (rc == DSA_SUCCESS && accepted(&ck, null_ctx || null_args || a.size < sizeof a, a.num_tokens))
            check_attend(&ck, cfg, &a, &s);
        break;
    }
    default: {
        dsa_index_args_t a;
        memset(&a, 0, sizeof a);
        a.size = args_size(&in, sizeof a);
        a.num_tokens = value(&in, INT32_MAX, f, nf);
        a.q = pointer(&in, 1), a.weights = pointer(&in, 2), a.positions = pointer(&in, 3);
        a.req_of_token = pointer(&in, 4), a.seq_lens = pointer(&in, 5), a.block_table = pointer(&in, 6);
        a.num_requests = value(&in, 1, f, nf);
        const int64_t nr = a.num_requests > 0 ? a.num_requests : 1;
        a.max_blocks = value(&in, INT32_MAX / nr, f, nf);
        a.idx_cache = pointer(&in, 7);
        a.num_cache_blocks = value(&in, INT64_MAX / g->idx_page_bytes, f, nf);
        a.topk = pointer(&in, 8);
        a.q_stride = value(&in, (int64_t)g->idx_heads * g->idx_head_dim, f, nf);
        a.weights_stride = value(&in, g->idx_heads, f, nf);
        a.topk_stride = value(&in, g->idx_topk, f, nf);
        dsa_index_strides_t s;
        ck.fn = "dsa_index";
        rc = dsa_check_index(c, null_args ? NULL : &a, &s);
        if (rc == DSA_SUCCESS && accepted(&ck, null_ctx || null_args || a.size < sizeof a, a.num_tokens))
            check_index(&ck, cfg, &a, &s);
        break;
    }
    }
    if (rc != DSA_SUCCESS)
        check_error(rc, c, ck.fn);
    /* the checks write the message and nothing else of the context */
    if (memcmp((const char *)saved + sizeof saved->err, (const char *)ctx + sizeof ctx->err,
               sizeof *ctx - sizeof ctx->err) != 0)
        violated("the context changed", ck.fn, NULL);
    return 0;
}
