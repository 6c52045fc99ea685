/* Stage B batches on the CPU (see index_world.h). */
#include "index_world.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config_text.h"
#include "ref.h"

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static uint32_t irand(unsigned *s, uint32_t n)
{
    *s = *s * 1664525u + 1013904223u;
    return (*s >> 4) % n;
}

static size_t page_bytes(const iworld_t *w)
{
    return (size_t)w->cfg.bs * ((size_t)w->cfg.D + 4);
}

/* Positions 0..len-1 that rank holds (W == 1: all of them). */
static int64_t local_count(int64_t len, int W, int I, int rank)
{
    int64_t n = 0;
    for (int64_t p = 0; p < len; p++)
        n += W == 1 || ref_dcp_owner(p, W, I) == rank;
    return n;
}

/* A cache: each request's local positions in blocks drawn at random from the cache's pool. */
static void make_cache(iworld_t *w, iworld_cache_t *c, int rank, int W, int absent_req, unsigned *rng)
{
    int bs = w->cfg.bs;
    int64_t need = 0, maxb = 1;
    for (int r = 0; r < w->nreq; r++) {
        int64_t b = r == absent_req ? 0 : (local_count(w->seq_lens[r], W, w->I, rank) + bs - 1) / bs;
        need += b;
        maxb = b > maxb ? b : maxb;
    }
    c->num_blocks = need + 3; /* a few spare pages that no table uses */
    c->max_blocks = maxb + 1;  /* and a spare column of -1 */
    c->table = malloc(sizeof(int32_t) * (size_t)w->nreq * (size_t)c->max_blocks);
    for (int64_t i = 0; i < w->nreq * c->max_blocks; i++)
        c->table[i] = -1;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)c->num_blocks);
    for (int32_t i = 0; i < c->num_blocks; i++)
        perm[i] = i;
    for (int64_t i = c->num_blocks - 1; i > 0; i--) {
        int64_t j = irand(rng, (uint32_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    size_t bytes = (size_t)c->num_blocks * page_bytes(w);
    c->pages = malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        c->pages[i] = (uint8_t)(0x5a ^ (i * 7)); /* unused slots: garbage, NaN codes among it */
    int64_t next = 0;
    for (int r = 0; r < w->nreq; r++) {
        if (r == absent_req)
            continue;
        int64_t b = (local_count(w->seq_lens[r], W, w->I, rank) + bs - 1) / bs;
        for (int64_t k = 0; k < b; k++)
            c->table[r * c->max_blocks + k] = perm[next++];
    }
    free(perm);
}

int64_t iworld_slot(const iworld_t *w, int s, int req, int64_t g)
{
    const iworld_cache_t *c = &w->cache[s];
    int64_t l = g;
    if (s < w->W) {
        if (ref_dcp_owner(g, w->W, w->I) != s)
            return -1;
        l = ref_dcp_local_index(g, w->W, w->I);
    }
    return ref_dcp_slot(l, c->table + (size_t)req * (size_t)c->max_blocks, c->max_blocks, w->cfg.bs);
}

static uint8_t *page_of(const iworld_t *w, int s, int64_t slot)
{
    return w->cache[s].pages + (size_t)(slot / w->cfg.bs) * page_bytes(w);
}

void iworld_put_key(iworld_t *w, int req, int64_t g, const float *k)
{
    int s[2] = {ref_dcp_owner(g, w->W, w->I), w->W};
    for (int i = 0; i < 2; i++) {
        int64_t slot = iworld_slot(w, s[i], req, g);
        if (slot >= 0)
            ref_indexer_encode(k, w->cfg.D, w->cfg.bs, (int)(slot % w->cfg.bs), page_of(w, s[i], slot));
    }
}

void iworld_put_scale(iworld_t *w, int req, int64_t g, float scale)
{
    int s[2] = {ref_dcp_owner(g, w->W, w->I), w->W};
    for (int i = 0; i < 2; i++) {
        int64_t slot = iworld_slot(w, s[i], req, g);
        if (slot >= 0)
            memcpy(page_of(w, s[i], slot) + (size_t)w->cfg.bs * (size_t)w->cfg.D + 4 * (size_t)(slot % w->cfg.bs),
                   &scale, 4);
    }
}

void iworld_build(iworld_t *w, const ref_index_cfg *cfg, const iworld_opts_t *o)
{
    memset(w, 0, sizeof *w);
    unsigned rng = o->seed;
    int H = cfg->H, D = cfg->D;
    w->cfg = *cfg;
    w->W = o->W, w->I = o->I, w->nreq = o->nreq;
    w->seq_lens = malloc(sizeof(int32_t) * (size_t)(o->nreq > 0 ? o->nreq : 1));
    memcpy(w->seq_lens, o->lens, sizeof(int32_t) * (size_t)o->nreq);
    w->T = o->row_req ? o->T : o->nreq;
    w->req_of = malloc(sizeof(int32_t) * (size_t)(w->T > 0 ? w->T : 1));
    w->positions = malloc(sizeof(int64_t) * (size_t)(w->T > 0 ? w->T : 1));
    for (int t = 0; t < w->T; t++) {
        w->req_of[t] = o->row_req ? o->row_req[t] : t;
        w->positions[t] = o->row_req ? o->row_pos[t] : (o->lens[t] > 0 ? o->lens[t] - 1 : 0);
    }
    w->cache = calloc((size_t)o->W + 1, sizeof *w->cache);
    for (int s = 0; s < o->W; s++)
        make_cache(w, &w->cache[s], s, o->W, o->absent_req, &rng);
    make_cache(w, &w->cache[o->W], 0, 1, o->absent_req, &rng);

    /* keys: one global key per position, encoded identically into every cache holding it */
    float *k = malloc(sizeof(float) * (size_t)D);
    int pool_n = o->key_pool > 0 ? o->key_pool : 1;
    float *pool = malloc(sizeof(float) * (size_t)pool_n * (size_t)D);
    for (int r = 0; r < w->nreq; r++) {
        float mag = ldexpf(1.0f, (int)irand(&rng, 5) - 2);
        for (int i = 0; i < pool_n * D; i++)
            pool[i] = frand(&rng) * mag;
        for (int64_t g = 0; g < w->seq_lens[r]; g++) {
            if (o->key_pool > 0)
                memcpy(k, pool + (size_t)irand(&rng, (uint32_t)pool_n) * (size_t)D, sizeof(float) * (size_t)D);
            else
                for (int i = 0; i < D; i++)
                    k[i] = frand(&rng) * mag;
            if (o->nan_keys > 0 && irand(&rng, (uint32_t)o->nan_keys) == 0)
                k[irand(&rng, (uint32_t)D)] = NAN;
            iworld_put_key(w, r, g, k);
        }
    }
    free(k);
    free(pool);

    /* rows: bf16 queries of a random magnitude per row, weights in [-1, 1) */
    w->q = malloc(sizeof(uint16_t) * (size_t)(w->T > 0 ? w->T : 1) * (size_t)H * (size_t)D);
    w->w = malloc(sizeof(float) * (size_t)(w->T > 0 ? w->T : 1) * (size_t)H);
    for (int t = 0; t < w->T; t++) {
        float mag = ldexpf(1.0f, (int)irand(&rng, 6) - 3);
        uint16_t *q = w->q + (size_t)t * (size_t)H * (size_t)D;
        float *wt = w->w + (size_t)t * (size_t)H;
        for (int i = 0; i < H * D; i++)
            q[i] = ref_bf16_encode(frand(&rng) * mag);
        for (int h = 0; h < H; h++)
            wt[h] = frand(&rng);
        if (o->nonfinite) {
            switch (t % 6) {
            case 1: q[3] = 0x7fc0; break;                                 /* NaN in head 0 */
            case 2: q[(size_t)(H - 1) * (size_t)D + (size_t)(D - 1)] = 0x7f80; break; /* +inf */
            case 3: wt[0] = NAN; break;
            case 4: wt[H / 2] = INFINITY; break;
            case 5: wt[0] = -INFINITY, q[(size_t)D + 5] = 0xff80; break;  /* -inf weight, -inf query */
            default: break;
            }
        }
    }
}

void iworld_free(iworld_t *w)
{
    free(w->seq_lens);
    free(w->req_of);
    free(w->positions);
    free(w->q);
    free(w->w);
    if (w->cache)
        for (int s = 0; s <= w->W; s++) {
            free(w->cache[s].table);
            free(w->cache[s].pages);
        }
    free(w->cache);
    memset(w, 0, sizeof *w);
}

ref_index_batch iworld_batch(const iworld_t *w)
{
    return (ref_index_batch){w->T, w->nreq, w->q, w->w, w->positions, w->req_of, w->seq_lens};
}

ref_index_cache iworld_cache(const iworld_t *w, int s)
{
    const iworld_cache_t *c = &w->cache[s];
    return (ref_index_cache){c->table, c->max_blocks, c->pages, c->num_blocks};
}

int iworld_cfg_of(const char *name, ref_index_cfg *c)
{
    /* the configuration's generated config.h (out/), as the generator derived it */
    char *h = config_text(strcmp(name, "tiny_") == 0 ? "tiny_tp4_dcp1_i1_bf16" : name);
    double H, D, K, bs, R, il, first, had, theta, yarn, factor, fast, slow, mscale, orig, maxpos;
    int bad = config_define(h, "DSA_IDX_HEADS", &H) || config_define(h, "DSA_IDX_HEAD_DIM", &D) ||
              config_define(h, "DSA_IDX_TOPK", &K) || config_define(h, "DSA_BLOCK_SIZE", &bs) ||
              config_define(h, "DSA_QK_ROPE_DIM", &R) || config_define(h, "DSA_IDX_ROPE_INTERLEAVED", &il) ||
              config_define(h, "DSA_IDX_ROPE_FIRST", &first) || config_define(h, "DSA_IDX_HADAMARD", &had) ||
              config_define(h, "DSA_ROPE_THETA", &theta) || config_define(h, "DSA_ROPE_YARN", &yarn) ||
              config_define(h, "DSA_YARN_FACTOR", &factor) || config_define(h, "DSA_YARN_BETA_FAST", &fast) ||
              config_define(h, "DSA_YARN_BETA_SLOW", &slow) || config_define(h, "DSA_ROPE_MSCALE", &mscale) ||
              config_define(h, "DSA_YARN_ORIGINAL_MAX_POSITIONS", &orig) ||
              config_define(h, "DSA_MAX_POSITIONS", &maxpos);
    free(h);
    if (bad)
        return -1;
    memset(c, 0, sizeof *c);
    c->H = (int)H, c->D = (int)D, c->K = (int)K, c->bs = (int)bs;
    c->rope = (ref_rope){(int)R, theta, (int)yarn, factor, fast, slow, mscale, (int)orig};
    c->rope_interleaved = il != 0;
    c->rope_first = first != 0;
    c->hadamard = had != 0;
    c->max_positions = (int64_t)maxpos;
    return 0;
}
