/* Argument checks of dsa_prologue, dsa_attend and dsa_index (see args.h). The bounds keep every
 * offset the calls and kernels compute inside int64 (tokens and strides, cache bytes) or int32
 * (slots in the attend kernel, block-table entries). tests/runtime/test_runtime.c tests each at
 * the bound and one past it, on a context without a device; tests/fuzz/fuzz_args.c fuzzes them. */
#include <stdint.h>

#include "args.h"

#define MAX_TOKENS INT32_MAX         /* per call */
#define MAX_STRIDE ((int64_t)1 << 24) /* elements per row: 2^31 rows x 2^24 x 2 bytes fits int64 */

/* A pointer the kernels dereference, and the alignment of their loads or stores there: 16 where
 * they move 16 bytes at a time (or where the same buffer is read so by another call: the caches),
 * else the element's size. A misaligned access would fault on the device and end the context. */
typedef struct need {
    const void *ptr;
    const char *name;
    unsigned align;
} need_t;

static dsa_result_t check_pointers(dsa_ctx_t ctx, const char *fn, const need_t *need, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!need[i].ptr)
            return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->%s is NULL", fn, need[i].name);
        if ((uintptr_t)need[i].ptr % need[i].align)
            return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->%s is not %u-byte aligned", fn, need[i].name,
                            need[i].align);
    }
    return DSA_SUCCESS;
}

/* A row stride: 0 means dense (= min); else at least min (named what), at most MAX_STRIDE, a
 * multiple of mult. */
static dsa_result_t stride(dsa_ctx_t ctx, const char *fn, const char *name, int64_t given, int64_t min,
                           const char *what, int mult, int64_t *out)
{
    *out = given ? given : min;
    if (*out < min || *out > MAX_STRIDE || *out % mult)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->%s is %lld, at least %s (%lld)%s, at most %lld",
                        fn, name, (long long)*out, what, (long long)min, mult > 1 ? ", a multiple of 8" : "",
                        (long long)MAX_STRIDE);
    return DSA_SUCCESS;
}

static dsa_result_t check_tokens(dsa_ctx_t ctx, const char *fn, int64_t n)
{
    if (n < 0)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->num_tokens is %lld, must be >= 0", fn, (long long)n);
    if (n > MAX_TOKENS)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->num_tokens is %lld, at most 2^31-1 per call", fn,
                        (long long)n);
    return DSA_SUCCESS;
}

/* What every call checks first, in this order: ctx, args, args->size, args->num_tokens (size and
 * num_tokens are read only when args is given). */
static dsa_result_t check_call(dsa_ctx_t ctx, const char *fn, const void *args, size_t size, size_t want,
                               int64_t num_tokens)
{
    if (!ctx)
        return dsa_fail(NULL, DSA_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!args)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    if (size < want)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->size is %zu, expected %zu", fn, size, want);
    return check_tokens(ctx, fn, num_tokens);
}

/* The requests and their block table: the kernels index it as req * max_blocks + b, kept below
 * 2^31 so that 32 bits hold it. */
static dsa_result_t check_tables(dsa_ctx_t ctx, const char *fn, int64_t num_requests, int64_t max_blocks)
{
    if (num_requests <= 0 || num_requests > INT32_MAX)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, "%s: args->num_requests is %lld, must be 1..2^31-1", fn,
                        (long long)num_requests);
    if (max_blocks <= 0 || max_blocks > INT32_MAX / num_requests)
        return dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT,
                        "%s: args->max_blocks is %lld, must be 1..%lld (num_requests x max_blocks < 2^31)", fn,
                        (long long)max_blocks, (long long)(INT32_MAX / num_requests));
    return DSA_SUCCESS;
}

#define FAIL(...) dsa_fail(ctx, DSA_ERROR_INVALID_ARGUMENT, __VA_ARGS__)

dsa_result_t dsa_check_prologue(dsa_ctx_t ctx, const dsa_prologue_args_t *a, dsa_prologue_strides_t *s)
{
    const char *fn = "dsa_prologue";
    dsa_result_t rc = check_call(ctx, fn, a, a ? a->size : 0, sizeof *a, a ? a->num_tokens : 0);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    const dsa_config_info_t *g = &ctx->cfg->info;
    const need_t need[] = {{a->q_c, "q_c", 16},           {a->q_c_out, "q_c_out", 16},   {a->kv, "kv", 16},
                           {a->positions, "positions", 8}, {a->slot_mapping, "slot_mapping", 8},
                           {a->q_norm_w, "q_norm_w", 16},   {a->kv_norm_w, "kv_norm_w", 16},
                           {a->kv_cache, "kv_cache", 16}}; /* bf16 entries are stored 16 bytes at a time */
    rc = check_pointers(ctx, fn, need, sizeof need / sizeof need[0]);
    if (rc != DSA_SUCCESS)
        return rc;
    if (a->idx_k && (!a->idx_norm_w || !a->idx_norm_b || !a->idx_cache))
        return FAIL("dsa_prologue: args->idx_k is given, so args->%s must be too",
                    !a->idx_norm_w ? "idx_norm_w" : !a->idx_norm_b ? "idx_norm_b" : "idx_cache");
    const need_t idx[] = {{a->idx_k, "idx_k", 2}, {a->idx_norm_w, "idx_norm_w", 2}, {a->idx_norm_b, "idx_norm_b", 2},
                          {a->idx_cache, "idx_cache", 16}}; /* dsa_index loads its pages 16 bytes at a time */
    if (a->idx_k && (rc = check_pointers(ctx, fn, idx, sizeof idx / sizeof idx[0])) != DSA_SUCCESS)
        return rc;
    if (a->clear_topk && !a->topk)
        return FAIL("dsa_prologue: args->clear_topk is set but args->topk is NULL");
    const need_t topk[] = {{a->topk, "topk", 16}}; /* its rows are cleared 16 bytes at a time */
    if (a->clear_topk && (rc = check_pointers(ctx, fn, topk, 1)) != DSA_SUCCESS)
        return rc;
    /* slots are int64 in the prologue; a cache of more bytes than int64 holds is no real cache */
    const int64_t max_blocks = INT64_MAX / g->block_size / (g->cache_bytes_per_token + g->idx_bytes_per_token);
    if (a->num_cache_blocks <= 0 || a->num_cache_blocks > max_blocks)
        return FAIL("dsa_prologue: args->num_cache_blocks is %lld, must be 1..%lld", (long long)a->num_cache_blocks,
                    (long long)max_blocks);
    if ((rc = stride(ctx, fn, "q_c_stride", a->q_c_stride, g->q_lora_rank, "q_lora_rank", 8, &s->q_c)) != DSA_SUCCESS ||
        (rc = stride(ctx, fn, "kv_stride", a->kv_stride, g->kv_dim, "kv_dim", 8, &s->kv)) != DSA_SUCCESS)
        return rc;
    if (a->idx_k)
        return stride(ctx, fn, "idx_k_stride", a->idx_k_stride, g->idx_head_dim, "idx_head_dim", 1, &s->idx_k);
    s->idx_k = 0;
    return DSA_SUCCESS;
}

dsa_result_t dsa_check_attend(dsa_ctx_t ctx, const dsa_attend_args_t *a, dsa_attend_strides_t *s)
{
    const char *fn = "dsa_attend";
    dsa_result_t rc = check_call(ctx, fn, a, a ? a->size : 0, sizeof *a, a ? a->num_tokens : 0);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    const dsa_config_info_t *g = &ctx->cfg->info;
    const need_t need[] = {{a->q_lat, "q_lat", 2},           {a->q_pe, "q_pe", 2},
                           {a->positions, "positions", 8},   {a->topk, "topk", 4},
                           {a->req_of_token, "req_of_token", 4}, {a->seq_lens, "seq_lens", 4},
                           {a->block_table, "block_table", 4}, {a->kv_cache, "kv_cache", 16},
                           {a->out, "out", 4}}; /* out: bf16 pairs */
    rc = check_pointers(ctx, fn, need, sizeof need / sizeof need[0]);
    if (rc != DSA_SUCCESS)
        return rc;
    const need_t lse[] = {{a->lse, "lse", 4}};
    if (a->lse && (rc = check_pointers(ctx, fn, lse, 1)) != DSA_SUCCESS)
        return rc;
    if ((rc = check_tables(ctx, fn, a->num_requests, a->max_blocks)) != DSA_SUCCESS)
        return rc;
    if (a->num_cache_blocks <= 0 || a->num_cache_blocks > INT32_MAX / g->block_size)
        return FAIL("dsa_attend: args->num_cache_blocks is %lld, must be 1..%d (slots are 32-bit in the attend kernel)",
                    (long long)a->num_cache_blocks, INT32_MAX / g->block_size);
    const dsa_cfg_t *cfg = ctx->cfg;
    if ((rc = stride(ctx, fn, "q_lat_stride", a->q_lat_stride, cfg->q_lat_row, "heads_local x kv_lora_rank", 1,
                     &s->q_lat)) != DSA_SUCCESS ||
        (rc = stride(ctx, fn, "q_pe_stride", a->q_pe_stride, cfg->q_pe_row, "heads_local x qk_rope_dim", 1,
                     &s->q_pe)) != DSA_SUCCESS)
        return rc;
    return stride(ctx, fn, "topk_stride", a->topk_stride, g->idx_topk, "idx_topk", 1, &s->topk);
}

dsa_result_t dsa_check_index(dsa_ctx_t ctx, const dsa_index_args_t *a, dsa_index_strides_t *s)
{
    const char *fn = "dsa_index";
    dsa_result_t rc = check_call(ctx, fn, a, a ? a->size : 0, sizeof *a, a ? a->num_tokens : 0);
    if (rc != DSA_SUCCESS || a->num_tokens == 0)
        return rc;
    const dsa_config_info_t *g = &ctx->cfg->info;
    const need_t need[] = {{a->q, "q", 16},
                           {a->weights, "weights", 4},
                           {a->positions, "positions", 8},
                           {a->req_of_token, "req_of_token", 4},
                           {a->seq_lens, "seq_lens", 4},
                           {a->block_table, "block_table", 4},
                           {a->idx_cache, "idx_cache", 16},
                           {a->topk, "topk", 4}};
    rc = check_pointers(ctx, fn, need, sizeof need / sizeof need[0]);
    if (rc != DSA_SUCCESS)
        return rc;
    if ((rc = check_tables(ctx, fn, a->num_requests, a->max_blocks)) != DSA_SUCCESS)
        return rc;
    const int64_t max_blocks = INT64_MAX / g->idx_page_bytes;
    if (a->num_cache_blocks <= 0 || a->num_cache_blocks > max_blocks)
        return FAIL("dsa_index: args->num_cache_blocks is %lld, must be 1..%lld", (long long)a->num_cache_blocks,
                    (long long)max_blocks);
    if ((rc = stride(ctx, fn, "q_stride", a->q_stride, ctx->cfg->idx_q_row, "idx_heads x idx_head_dim", 8,
                     &s->q)) != DSA_SUCCESS ||
        (rc = stride(ctx, fn, "weights_stride", a->weights_stride, g->idx_heads, "idx_heads", 1, &s->weights)) !=
            DSA_SUCCESS)
        return rc;
    return stride(ctx, fn, "topk_stride", a->topk_stride, g->idx_topk, "idx_topk", 1, &s->topk);
}
