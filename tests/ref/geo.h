/* The geometry of the shipped models as the GPU tests need it (the values of the specs in specs/), looked
 * up from a configuration's name. */
#ifndef DSA_TEST_GEO_H
#define DSA_TEST_GEO_H

#include <stdlib.h>
#include <string.h>

#include "ref.h"

typedef struct geo {
    const char *name;
    int q, L, R, bs, maxpos, D, topk, bpt, page;
    int fmt; /* 0 bf16, 1 fp8, 2 nvfp4 */
    int rope_interleaved, idx_interleaved, idx_rope_first, hadamard;
    float eps, idx_eps;
    ref_rope rope;
} geo_t;

static inline int geo_of(const char *name, geo_t *g)
{
    memset(g, 0, sizeof *g);
    g->name = name;
    g->L = 512;
    g->R = 64;
    g->D = 128;
    g->rope_interleaved = 1;
    g->idx_rope_first = 1;
    g->hadamard = 1;
    g->idx_eps = 1e-6f;
    if (strncmp(name, "deepseek_v32_", 13) == 0) {
        g->q = 1536, g->bs = 64, g->maxpos = 163840, g->topk = 2048, g->eps = 1e-6f, g->idx_interleaved = 0;
        g->rope = (ref_rope){64, 10000.0, 1, 40.0, 32.0, 1.0, 1.0, 4096};
    } else if (strncmp(name, "glm5.2_", 7) == 0) {
        g->q = 2048, g->bs = 64, g->maxpos = 202752, g->topk = 2048, g->eps = 1e-5f, g->idx_interleaved = 1;
        g->rope = (ref_rope){64, 8000000.0, 0, 1.0, 0, 0, 1.0, 0};
    } else if (strncmp(name, "tiny_", 5) == 0) {
        g->q = 256, g->bs = 16, g->maxpos = 4096, g->topk = 64, g->eps = 1e-6f, g->idx_interleaved = 0;
        g->rope = (ref_rope){64, 10000.0, 1, 4.0, 32.0, 1.0, 1.0, 1024};
    } else {
        return -1;
    }
    g->fmt = strstr(name, "nvfp4") ? 2 : strstr(name, "fp8") ? 1 : 0;
    g->bpt = g->fmt == 0 ? 1152 : g->fmt == 1 ? 656 : 352;
    g->page = g->bs * (g->D + 4);
    return 0;
}

/* dcp, interleave and tp from a configuration name (..._tp4_dcp2_i1_...) */
static inline int name_value(const char *name, const char *key)
{
    const char *p = strstr(name, key);
    return p ? atoi(p + strlen(key)) : 1;
}

#endif
