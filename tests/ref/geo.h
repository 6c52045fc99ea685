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

/* The value of `#define MACRO value` in a configuration's config.h text; 0, or -1 when absent. */
static inline int geo_define(const char *config_h, const char *macro, double *v)
{
    size_t n = strlen(macro);
    for (const char *p = config_h ? strstr(config_h, "#define ") : NULL; p; p = strstr(p + 1, "#define ")) {
        const char *m = p + 8;
        if (strncmp(m, macro, n) == 0 && m[n] == ' ') {
            char *end;
            *v = strtod(m + n + 1, &end);
            return end == m + n + 1 ? -1 : 0;
        }
    }
    return -1;
}

/* Fills *g from info (dsa_config_info of a configuration) and plan (the same configuration's).
 * Returns 0, or -1 when the plan is not info's configuration or lacks a value. */
static inline int geo_from(const dsa_config_info_t *info, const dsa_plan_t *plan, geo_t *g)
{
    memset(g, 0, sizeof *g);
    if (!plan || plan->abi != DSA_PLAN_ABI || !info->name || strcmp(plan->info.name, info->name) != 0)
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
    g->rope = (ref_rope){info->qk_rope_dim,   plan->rope_theta,     plan->rope_yarn,
                         plan->yarn_factor,   plan->yarn_beta_fast, plan->yarn_beta_slow,
                         plan->rope_mscale,   plan->yarn_original_max_positions};
    double il, first, had, eps;
    const char *h = plan->config_h.text;
    if (geo_define(h, "DSA_IDX_ROPE_INTERLEAVED", &il) || geo_define(h, "DSA_IDX_ROPE_FIRST", &first) ||
        geo_define(h, "DSA_IDX_HADAMARD", &had) || geo_define(h, "DSA_IDX_NORM_EPS", &eps))
        return -1;
    g->idx_interleaved = il != 0;
    g->idx_rope_first = first != 0;
    g->hadamard = had != 0;
    g->idx_eps = (float)eps;
    return 0;
}

#endif
