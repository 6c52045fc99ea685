/* A batch for stage C on the CPU: requests with their KV written in one cache format, sharded over
 * W DCP ranks (interleave I, each rank with its own block tables), plus one unsharded cache (the
 * DCP = 1 layout); decode and prefill rows with top-k rows of global positions (duplicates,
 * unsorted, -1 padding, invalid entries); each rank's queries. The GPU tests upload the same
 * world, so CPU simulation and GPU runs share their inputs. */
#ifndef DSA_WORLD_H
#define DSA_WORLD_H

#include <math.h>
#include <stdint.h>

enum { WORLD_BF16 = 0, WORLD_FP8 = 1, WORLD_NVFP4 = 2 };

/* How the top-k rows are drawn. */
enum {
    TOPK_MIXED = 0,      /* random valid positions, duplicates, -1 padding, invalid entries */
    TOPK_ONE_RANK = 1,   /* every position owned by rank 0 */
    TOPK_SKIP_LAST = 2,  /* no position owned by the last rank */
    TOPK_EMPTY = 3,      /* every entry -1 or invalid */
};

typedef struct world_shard {
    int64_t num_blocks;     /* blocks of this cache */
    int64_t max_blocks;     /* columns of the block table */
    int32_t *table;         /* [nreq][max_blocks], -1 where unused */
    uint8_t *cache;         /* [num_blocks * bs][bpt] */
} world_shard_t;

typedef struct world {
    int W, I, bs, fmt, H, kv_dim, latent, bpt, K, T, nreq; /* kv_dim = latent + rope dims */
    float scale;
    int32_t *len;           /* [nreq] request lengths */
    int32_t *req_of;        /* [T] request of each token */
    int64_t *pos_of;        /* [T] position of each token (decode rows: len - 1) */
    int32_t *topk;          /* [T][K] global positions */
    float *q;               /* [W][T][H][kv_dim]: rank r's queries (H heads each) */
    world_shard_t shard[9]; /* ranks 0..W-1, then the unsharded cache at index W */
} world_t;

/* What a configuration fixes about a world (the GPU tests take it from dsa_config_info). */
typedef struct world_shape {
    int W, I;          /* DCP ranks (at most 8), interleave */
    int bs, fmt;       /* block size; cache format WORLD_* (the values of dsa_cache_dtype_t) */
    int latent, rope;  /* kv_lora_rank, qk_rope_dim */
    int bpt;           /* cache bytes per token: must be world_cache_bytes(fmt, latent, rope) */
    int H, K;          /* query heads per rank, top-k entries per row */
    int long_len;      /* 0: the long request (3) has 1000 tokens; n >= 64: n tokens */
} world_shape_t;

/* Bytes per token of the reference's encoding of format fmt (ref.h), -1 for an unknown format. */
int world_cache_bytes(int fmt, int latent, int rope);

/* Builds the world of that shape, top-k rows drawn by mode (TOPK_*); aborts with a message when the
 * shape is not one the reference can encode (bpt other than its format's size, W out of range, a
 * long request shorter than 64). Requests of 1, 37, 300, n (shape->long_len, 1000 by default) and
 * 129 tokens; a decode row per request (at len - 1), then prefill rows of request 3 at positions 0,
 * 1, 63, n / 2, n - 2, n - 1. */
void world_build(world_t *w, const world_shape_t *shape, int mode, unsigned seed);
void world_free(world_t *w);

/* The key of the entry at slot of shard s as attention sees it: dequantised, rounded to bf16. */
void world_key(const world_t *w, int s, int64_t slot, float *key);

/* The largest |latent value| among the valid keys of row t (bounds of the output's error). */
float world_row_vmax(const world_t *w, int t);

/* Whether a GPU's bf16 output element got agrees with the reference's e, in a row whose largest
 * key value is vmax: within 2^-7 of e plus 2^-8 of vmax (tests/gpu/test_attend.c says why); false
 * for a NaN. */
static inline int world_out_close(double e, double got, double vmax)
{
    return fabs(got - e) <= 0x1p-7 * fabs(e) + 0x1p-8 * vmax;
}

/* For rank r's heads of row t: scale x the largest sum over d of |q_d k_d| among the row's valid
 * keys, out [H]. A score's rounding error is a fraction of this (it bounds every partial sum of
 * the dot product), so it scales the LSE's tolerance. */
void world_score_absmax(const world_t *w, int r, int t, float *out);

/* Makes head h of row t of rank r's queries NaN (its first dim), as a host's NaN would be: every
 * score of that head is NaN, and it must come out as the empty head (ref_sparse_mla) at every W. */
void world_poison_query(world_t *w, int r, int t, int h);
/* Expected output of DCP = 1 for every rank's heads: out [W][T][H][latent], lse [W][T][H]. */
void world_expect(const world_t *w, float *out, float *lse);

/* The DCP = W computation on the CPU: rank s attends for all W*H gathered heads over its shard,
 * then each rank merges the partials of its own heads. Same layout as world_expect. */
void world_simulate(const world_t *w, float *out, float *lse);

#endif
