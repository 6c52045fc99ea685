/* The geometry and numerics of a configuration as the CPU reference needs them, read from libdsa,
 * never from the configuration's name:
 * - dsa_config_info: dimensions, block size, positions, top-k, cache format and byte sizes, norm eps,
 *   the main rope's style, topology, softmax scale (kept whole in geo_t.info);
 * - the configuration's plan (dsa_plan.h; libdsa exports it as dsa_plan_<name>) for what
 *   dsa_config_info does not report: the rope's theta and YaRN values, from which the runtime builds
 *   its own rope table, and the indexer key's rope style and order, Hadamard transform and norm eps,
 *   read from the configuration's config.h that libdsa embeds and compiles its kernels with.
 * Header-only: the GPU tests (plan found by its exported symbol, tests/gpu/harness.c) and dsa-demo
 * (plan from the registry) share it. */
#ifndef DSA_TEST_GEO_H
#define DSA_TEST_GEO_H

#include <stdlib.h>
#include <string.h>

#include "dsa.h"
#include "dsa_plan.h"
#include "config_text.h"
#include "index.h"
#include "ref.h"

typedef struct geo {
    const char *name;
    int q, L, R, bs, maxpos, D, topk, bpt, page; /* q_lora, kv_lora, rope dims, block, positions, idx dim... */
    int fmt; /* the cache format, dsa_cache_dtype_t: 0 bf16, 1 fp8_ds_mla, 2 nvfp4_ds_mla (= WORLD_*) */
    int rope_interleaved, idx_interleaved, idx_rope_first, hadamard;
    float eps, idx_eps;
    ref_rope rope;
    dsa_config_info_t info; /* everything dsa_config_info reports */
} geo_t;

/* Fills *g from info (dsa_config_info of a configuration) and plan (the same configuration's).
 * Returns 0, or -1 when the plan is not info's configuration or lacks a value. */
static inline int geo_from(const dsa_config_info_t *info, const dsa_plan_t *plan, geo_t *g)
{
    memset(g, 0, sizeof *g);
    if (!plan || plan->abi != DSA_PLAN_ABI || !info->name || strcmp(plan->name, info->name) != 0)
        return -1;
    g->info = *info;
    g->name = info->name;
    g->q = info->q_lora_rank;
    g->L = info->kv_lora_rank;
    g->R = info->qk_rope_dim;
    g->bs = info->block_size;
    g->maxpos = info->max_positions;
    g->D = info->idx_head_dim;
    g->topk = info->idx_topk;
    g->bpt = info->cache_bytes_per_token;
    g->page = info->idx_page_bytes;
    g->fmt = (int)info->cache_dtype;
    g->rope_interleaved = info->rope_interleaved;
    g->eps = info->rms_norm_eps;
    const char *h = NULL;
    for (int i = 0; i < plan->nfiles; i++)
        if (strcmp(plan->files[i].name, "config.h") == 0)
            h = plan->files[i].text;
    double il, first, had, eps, theta, yarn, factor, fast, slow, mscale, orig;
    if (config_define(h, "DSA_IDX_ROPE_INTERLEAVED", &il) || config_define(h, "DSA_IDX_ROPE_FIRST", &first) ||
        config_define(h, "DSA_IDX_HADAMARD", &had) || config_define(h, "DSA_IDX_NORM_EPS", &eps) ||
        config_define(h, "DSA_ROPE_THETA", &theta) || config_define(h, "DSA_ROPE_YARN", &yarn) ||
        config_define(h, "DSA_YARN_FACTOR", &factor) || config_define(h, "DSA_YARN_BETA_FAST", &fast) ||
        config_define(h, "DSA_YARN_BETA_SLOW", &slow) || config_define(h, "DSA_ROPE_MSCALE", &mscale) ||
        config_define(h, "DSA_YARN_ORIGINAL_MAX_POSITIONS", &orig))
        return -1;
    g->rope = (ref_rope){info->qk_rope_dim, theta, (int)yarn, factor, fast, slow, mscale, (int)orig};
    g->idx_interleaved = il != 0;
    g->idx_rope_first = first != 0;
    g->hadamard = had != 0;
    g->idx_eps = (float)eps;
    return 0;
}

/* The indexer's geometry as the stage B reference takes it (index.h). */
static inline ref_index_cfg geo_index_cfg(const geo_t *g)
{
    ref_index_cfg c;
    memset(&c, 0, sizeof c);
    c.H = g->info.idx_heads;
    c.D = g->D;
    c.K = g->topk;
    c.bs = g->bs;
    c.rope = g->rope;
    c.rope_interleaved = g->idx_interleaved;
    c.rope_first = g->idx_rope_first;
    c.hadamard = g->hadamard;
    c.max_positions = g->maxpos;
    return c;
}

#endif
