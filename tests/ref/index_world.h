/* A batch for stage B (the indexer) on the CPU: requests whose indexer keys are encoded with
 * ref_indexer_encode into W per-rank caches (interleave I, random block tables) and into one
 * unsharded cache (the DCP = 1 layout), rows (decode and prefill) with bf16 queries and fp32
 * weights. The geometry is the caller's (ref_index_cfg), so the GPU tests can build the same world
 * at the shipped geometries and upload it. */
#ifndef DSA_INDEX_WORLD_H
#define DSA_INDEX_WORLD_H

#include <stdint.h>

#include "index.h"

typedef struct iworld_cache {
    int64_t num_blocks;     /* pages of this cache */
    int64_t max_blocks;     /* columns of the block table */
    int32_t *table;         /* [nreq][max_blocks], -1 where unused */
    uint8_t *pages;         /* [num_blocks][bs (D + 4)]; unused slots hold garbage */
} iworld_cache_t;

typedef struct iworld_opts {
    int W, I;               /* DCP size (1..8) and interleave (bs % I == 0) */
    int nreq;
    const int32_t *lens;    /* [nreq] request lengths (0 allowed) */
    int T;                  /* rows; 0 with row_req NULL: one decode row per request */
    const int32_t *row_req; /* [T] request of each row */
    const int64_t *row_pos; /* [T] position of each row (decode: len - 1; may exceed it) */
    int key_pool;           /* 0: independent keys; n > 0: each key is one of n vectors of its request */
    int absent_req;         /* a request no cache holds a key of (all -1 tables); -1: none */
    int nan_keys;           /* n > 0: every n-th key (by a random draw) has one NaN element */
    int nonfinite;          /* 1: NaN and +-inf in some rows' queries and weights (rows t % 6 = 1..5) */
    unsigned seed;
} iworld_opts_t;

typedef struct iworld {
    ref_index_cfg cfg;
    int W, I, T, nreq;
    int32_t *seq_lens;      /* [nreq] */
    int32_t *req_of;        /* [T] */
    int64_t *positions;     /* [T] */
    uint16_t *q;            /* [T][H][D] bf16 bits */
    float *w;               /* [T][H] */
    iworld_cache_t *cache;  /* [W + 1]: rank 0..W-1, then the unsharded cache at W */
} iworld_t;

void iworld_build(iworld_t *w, const ref_index_cfg *cfg, const iworld_opts_t *o);
void iworld_free(iworld_t *w);

ref_index_batch iworld_batch(const iworld_t *w);
/* Cache s as the reference reads it (s == W: the unsharded one). */
ref_index_cache iworld_cache(const iworld_t *w, int s);

/* The slot of position g of request req in cache s (s == W: unsharded), -1 when that cache does
 * not hold it (another rank's, or absent). */
int64_t iworld_slot(const iworld_t *w, int s, int req, int64_t g);
/* Writes the key of (req, g) into its owner's cache and into the unsharded one: encoded from k [D]
 * (ref_indexer_encode), or only its page scale replaced by scale (any bits, host-fault tests). */
void iworld_put_key(iworld_t *w, int req, int64_t g, const float *k);
void iworld_put_scale(iworld_t *w, int req, int64_t g, float scale);

/* The indexer geometry and rope of a shipped configuration, read from its generated
 * out/<name>/config.h ("tiny_": tiny_tp4_dcp1_i1_bf16); -1 when it cannot be read. */
int iworld_cfg_of(const char *name, ref_index_cfg *c);

#endif
