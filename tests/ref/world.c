/* Stage C batches on the CPU (see world.h). */
#include "world.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

static unsigned rng;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}
static uint32_t irand(uint32_t n)
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 4) % n;
}

static void encode(const world_t *w, const float *x, uint8_t *out)
{
    if (w->fmt == WORLD_BF16)
        ref_bf16_cache_encode(x, x + w->latent, w->latent, w->kv_dim - w->latent, out);
    else if (w->fmt == WORLD_FP8)
        ref_fp8_ds_mla_encode(x, x + w->latent, w->latent, w->kv_dim - w->latent, 0, out);
    else
        ref_nvfp4_ds_mla_encode(x, x + w->latent, w->latent, w->kv_dim - w->latent, out);
}

/* Keys enter attention as bf16: dequantised (value x scale) and rounded to bf16, as the kernels do
 * for their tensor-core products and FlashMLA does for its fp8 cache. Exact for the bf16 format. */
void world_key(const world_t *w, int s, int64_t slot, float *key)
{
    const uint8_t *e = w->shard[s].cache + slot * w->bpt;
    if (w->fmt == WORLD_BF16)
        ref_bf16_cache_decode(e, w->latent, w->kv_dim - w->latent, key, key + w->latent);
    else if (w->fmt == WORLD_FP8)
        ref_fp8_ds_mla_decode(e, w->latent, w->kv_dim - w->latent, key, key + w->latent);
    else
        ref_nvfp4_ds_mla_decode(e, w->latent, w->kv_dim - w->latent, key, key + w->latent);
    for (int d = 0; d < w->kv_dim; d++)
        key[d] = ref_bf16_round(key[d]);
}

/* A shard: each request's local positions in blocks drawn at random from the shard's pool. */
static void make_shard(world_t *w, world_shard_t *sh, int rank, int W)
{
    int64_t need = 0, maxb = 1;
    for (int r = 0; r < w->nreq; r++) {
        int64_t local = 0;
        for (int64_t p = 0; p < w->len[r]; p++)
            local += W == 1 || ref_dcp_owner(p, W, w->I) == rank;
        int64_t b = (local + w->bs - 1) / w->bs;
        need += b;
        maxb = b > maxb ? b : maxb;
    }
    sh->num_blocks = need + 3; /* a few spare blocks that no table uses */
    sh->max_blocks = maxb + 1;  /* and a spare column of -1 */
    sh->table = malloc(sizeof(int32_t) * (size_t)(w->nreq * sh->max_blocks));
    for (int64_t i = 0; i < w->nreq * sh->max_blocks; i++)
        sh->table[i] = -1;
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)sh->num_blocks);
    for (int32_t i = 0; i < sh->num_blocks; i++)
        perm[i] = i;
    for (int64_t i = sh->num_blocks - 1; i > 0; i--) {
        int64_t j = irand((uint32_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int64_t next = 0;
    sh->cache = malloc((size_t)(sh->num_blocks * w->bs * w->bpt));
    for (int64_t i = 0; i < sh->num_blocks * w->bs * w->bpt; i++)
        sh->cache[i] = (uint8_t)(0x3c ^ i); /* unused slots hold garbage, never zeros */
    for (int r = 0; r < w->nreq; r++) {
        int64_t local = 0;
        for (int64_t p = 0; p < w->len[r]; p++)
            local += W == 1 || ref_dcp_owner(p, W, w->I) == rank;
        for (int64_t b = 0; b < (local + w->bs - 1) / w->bs; b++)
            sh->table[r * sh->max_blocks + b] = perm[next++];
    }
    free(perm);
}

int world_cache_bytes(int fmt, int latent, int rope)
{
    return fmt == WORLD_BF16    ? 2 * (latent + rope)                      /* bf16 latent and rope */
           : fmt == WORLD_FP8   ? latent + 4 * (latent / 128) + 2 * rope   /* e4m3, fp32 per 128, bf16 rope */
           : fmt == WORLD_NVFP4 ? latent / 2 + rope + latent / 16          /* e2m1, e4m3 rope, e4m3 per 16 */
                                : -1;
}

void world_build(world_t *w, const world_shape_t *shape, int mode, unsigned seed)
{
    const int W = shape->W, I = shape->I, bs = shape->bs, K = shape->K;
    const int32_t n = shape->long_len ? shape->long_len : 1000; /* the long request's tokens */
    if (W < 1 || W > 8 || shape->bpt != world_cache_bytes(shape->fmt, shape->latent, shape->rope) || n < 64) {
        fprintf(stderr, "world_build: W %d, format %d with latent %d and rope %d: %d bytes per token, the reference "
                "encodes %d; long request %d (at least 64)\n", W, shape->fmt, shape->latent, shape->rope, shape->bpt,
                world_cache_bytes(shape->fmt, shape->latent, shape->rope), n);
        abort();
    }
    memset(w, 0, sizeof *w);
    rng = seed;
    w->W = W, w->I = I, w->bs = bs, w->fmt = shape->fmt, w->H = shape->H, w->K = K;
    w->latent = shape->latent, w->kv_dim = shape->latent + shape->rope;
    w->bpt = shape->bpt;
    w->scale = 0.0625f;
    const int32_t lens[] = {1, 37, 300, n, 129};
    w->nreq = 5;
    w->len = malloc(sizeof lens);
    memcpy(w->len, lens, sizeof lens);
    /* rows: a decode row per request, then 6 prefill rows of request 3 at positions 0, 1, 63,
     * n / 2, n - 2, n - 1 (their top-k only reaches positions <= their own) */
    const int64_t prefill[] = {0, 1, 63, n / 2, n - 2, n - 1};
    w->T = w->nreq + 6;
    w->req_of = malloc(sizeof(int32_t) * (size_t)w->T);
    w->pos_of = malloc(sizeof(int64_t) * (size_t)w->T);
    for (int t = 0; t < w->T; t++) {
        w->req_of[t] = t < w->nreq ? t : 3;
        w->pos_of[t] = t < w->nreq ? lens[t] - 1 : prefill[t - w->nreq];
    }
    /* global KV per request, encoded identically into every cache that holds a position */
    for (int s = 0; s < W; s++)
        make_shard(w, &w->shard[s], s, W);
    make_shard(w, &w->shard[W], 0, 1);
    float *x = malloc(sizeof(float) * (size_t)w->kv_dim);
    uint8_t *e = malloc((size_t)w->bpt);
    for (int r = 0; r < w->nreq; r++) {
        float mag = ldexpf(1.0f, (int)irand(5) - 2);
        for (int64_t p = 0; p < lens[r]; p++) {
            for (int d = 0; d < w->kv_dim; d++)
                x[d] = frand() * mag;
            encode(w, x, e);
            int owner = ref_dcp_owner(p, W, I);
            int64_t l = ref_dcp_local_index(p, W, I);
            world_shard_t *sh = &w->shard[owner];
            int64_t slot = ref_dcp_slot(l, sh->table + r * sh->max_blocks, sh->max_blocks, bs);
            memcpy(sh->cache + slot * w->bpt, e, (size_t)w->bpt);
            sh = &w->shard[W];
            slot = ref_dcp_slot(p, sh->table + r * sh->max_blocks, sh->max_blocks, bs);
            memcpy(sh->cache + slot * w->bpt, e, (size_t)w->bpt);
        }
    }
    free(x);
    free(e);
    w->topk = malloc(sizeof(int32_t) * (size_t)(w->T * K));
    for (int t = 0; t < w->T; t++) {
        int64_t valid = w->pos_of[t] + 1; /* causal: positions up to the row's own */
        int32_t *row = w->topk + (size_t)t * (size_t)K;
        for (int k = 0; k < K; k++) {
            int32_t g = (int32_t)irand((uint32_t)valid);
            if (mode == TOPK_ONE_RANK || mode == TOPK_SKIP_LAST) {
                int tries = 0;
                while (tries++ < 1000 && (mode == TOPK_ONE_RANK ? ref_dcp_owner(g, W, I) != 0
                                                               : ref_dcp_owner(g, W, I) == W - 1))
                    g = (int32_t)irand((uint32_t)valid);
                if (tries > 1000)
                    g = -1;
            }
            if (mode == TOPK_EMPTY)
                g = k % 3 == 0 ? -1 : k % 3 == 1 ? (int32_t)(w->len[w->req_of[t]] + k) : -7;
            else if (mode == TOPK_MIXED) {
                uint32_t c = irand(20);
                if (c == 0)
                    g = -1;                                /* padding */
                else if (c == 1)
                    g = w->len[w->req_of[t]] + (int32_t)irand(50); /* beyond the request: invalid */
                else if (c == 2)
                    g = -2 - (int32_t)irand(100);          /* negative other than -1: invalid */
                else if (c == 3 && k > 0)
                    g = row[k - 1];                        /* a duplicate */
            }
            row[k] = g;
        }
    }
    w->q = malloc(sizeof(float) * (size_t)W * (size_t)w->T * (size_t)w->H * (size_t)w->kv_dim);
    for (size_t i = 0; i < (size_t)W * (size_t)w->T * (size_t)w->H * (size_t)w->kv_dim; i++)
        w->q[i] = ref_bf16_round(frand()); /* queries arrive as bf16 */
}

void world_free(world_t *w)
{
    free(w->len);
    free(w->req_of);
    free(w->pos_of);
    free(w->topk);
    free(w->q);
    for (int s = 0; s <= w->W; s++) {
        free(w->shard[s].table);
        free(w->shard[s].cache);
    }
    memset(w, 0, sizeof *w);
}

static int valid_entry(const world_t *w, int t, int32_t g)
{
    return g >= 0 && g < w->len[w->req_of[t]];
}

/* Keys of row t that shard s holds (s == W: the unsharded cache holds all). */
static int gather_keys(const world_t *w, int t, int s, float *keys)
{
    const int32_t *row = w->topk + (size_t)t * (size_t)w->K;
    const world_shard_t *sh = &w->shard[s];
    int n = 0;
    for (int k = 0; k < w->K; k++) {
        int32_t g = row[k];
        if (!valid_entry(w, t, g))
            continue;
        int64_t l = g;
        if (s < w->W) {
            if (ref_dcp_owner(g, w->W, w->I) != s)
                continue;
            l = ref_dcp_local_index(g, w->W, w->I);
        }
        int64_t slot = ref_dcp_slot(l, sh->table + w->req_of[t] * sh->max_blocks, sh->max_blocks, w->bs);
        if (slot < 0)
            continue;
        world_key(w, s, slot, keys + (size_t)n * (size_t)w->kv_dim);
        n++;
    }
    return n;
}

float world_row_vmax(const world_t *w, int t)
{
    float *keys = malloc(sizeof(float) * (size_t)w->K * (size_t)w->kv_dim);
    int n = gather_keys(w, t, w->W, keys);
    float m = 0;
    for (int j = 0; j < n; j++)
        for (int d = 0; d < w->latent; d++)
            m = fmaxf(m, fabsf(keys[(size_t)j * (size_t)w->kv_dim + (size_t)d]));
    free(keys);
    return m;
}

void world_score_absmax(const world_t *w, int r, int t, float *out)
{
    float *keys = malloc(sizeof(float) * (size_t)w->K * (size_t)w->kv_dim);
    int n = gather_keys(w, t, w->W, keys);
    for (int h = 0; h < w->H; h++) {
        const float *q = w->q + (((size_t)r * (size_t)w->T + (size_t)t) * (size_t)w->H + (size_t)h) * (size_t)w->kv_dim;
        double m = 0;
        for (int j = 0; j < n; j++) {
            double a = 0;
            for (int d = 0; d < w->kv_dim; d++)
                a += fabs((double)q[d] * keys[(size_t)j * (size_t)w->kv_dim + (size_t)d]);
            m = fmax(m, a);
        }
        out[h] = (float)(m * w->scale);
    }
    free(keys);
}

void world_poison_query(world_t *w, int r, int t, int h)
{
    w->q[(((size_t)r * (size_t)w->T + (size_t)t) * (size_t)w->H + (size_t)h) * (size_t)w->kv_dim] = NAN;
}

void world_expect(const world_t *w, float *out, float *lse)
{
    float *keys = malloc(sizeof(float) * (size_t)w->K * (size_t)w->kv_dim);
    for (int t = 0; t < w->T; t++) {
        int n = gather_keys(w, t, w->W, keys);
        for (int r = 0; r < w->W; r++) {
            size_t at = (size_t)r * (size_t)w->T + (size_t)t;
            ref_sparse_mla(w->q + at * (size_t)w->H * (size_t)w->kv_dim, w->H, keys, n, w->kv_dim, w->latent, w->scale,
                           out + at * (size_t)w->H * (size_t)w->latent, lse + at * (size_t)w->H);
        }
    }
    free(keys);
}

void world_simulate(const world_t *w, float *out, float *lse)
{
    int W = w->W, H = w->H, HG = W * H;
    const size_t kvd = (size_t)w->kv_dim, lat = (size_t)w->latent;
    float *keys = malloc(sizeof(float) * (size_t)w->K * kvd);
    float *qg = malloc(sizeof(float) * (size_t)HG * kvd);
    float *po = malloc(sizeof(float) * (size_t)W * (size_t)HG * lat);
    float *pl = malloc(sizeof(float) * (size_t)W * (size_t)HG);
    for (int t = 0; t < w->T; t++) {
        /* the all-gather: rank-major heads */
        for (int r = 0; r < W; r++)
            memcpy(qg + (size_t)r * (size_t)H * kvd, w->q + ((size_t)r * (size_t)w->T + (size_t)t) * (size_t)H * kvd,
                   sizeof(float) * (size_t)H * kvd);
        for (int s = 0; s < W; s++) {
            int n = gather_keys(w, t, s, keys);
            ref_sparse_mla(qg, HG, keys, n, w->kv_dim, w->latent, w->scale, po + (size_t)s * (size_t)HG * lat,
                           pl + (size_t)s * (size_t)HG);
        }
        for (int r = 0; r < W; r++) {
            const float *o[8], *L[8];
            for (int s = 0; s < W; s++) {
                o[s] = po + ((size_t)s * (size_t)HG + (size_t)r * (size_t)H) * lat;
                L[s] = pl + (size_t)s * (size_t)HG + (size_t)r * (size_t)H;
            }
            size_t at = (size_t)r * (size_t)w->T + (size_t)t;
            ref_merge(o, L, W, H, w->latent, out + at * (size_t)H * lat, lse + at * (size_t)H);
        }
    }
    free(keys);
    free(qg);
    free(po);
    free(pl);
}
