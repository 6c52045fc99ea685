/* What dsa-demo's two files share: dsa_demo.c (the main job: stages A and C, the ranks, the
 * comparisons) and demo_index.c (stage B, the indexer, on the GPU and simulated on the CPU). */
#ifndef DSA_DEMO_H
#define DSA_DEMO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tests/ref/geo.h"
#include "../tests/ref/index.h"
#include "../tests/ref/world.h"
#include "dsa.h"
#include "loader.h"

#define CK(call)                                                                                             \
    do {                                                                                                     \
        CUresult r_ = (call);                                                                                \
        if (r_ != CUDA_SUCCESS) {                                                                            \
            fprintf(stderr, "dsa-demo: %s failed (%d)\n", #call, (int)r_);                                   \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#define DSA(call)                                                                                            \
    do {                                                                                                     \
        dsa_result_t r_ = (call);                                                                            \
        if (r_ != DSA_SUCCESS) {                                                                             \
            fprintf(stderr, "dsa-demo: %s: %s: %s\n", #call, dsa_strerror(r_), dsa_last_error(ctx));         \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* A device copy of the n bytes at h (dsa_demo.c). */
CUdeviceptr demo_up(const void *h, size_t n);

/* dsa-demo --bench on rank `rank` of ctx's group (demo_bench.c): the decode step timed step by step
 * at 1, 64 and 128 rows; rank 0 prints the table. */
void demo_bench_rank(dsa_ctx_t ctx, int rank);

/* ---- stage B (demo_index.c) ---- */

/* The indexer's inputs for a world (world.h), drawn from their own seed, so that every rank process
 * and the parent draw the same, and its caches on the host. */
typedef struct demo_index {
    ref_index_cfg cfg;
    int64_t npos;              /* prologue tokens: every position of every request, request by request */
    uint16_t *k;               /* [npos][D] bf16: the indexer keys as the prologue takes them (idx_k) */
    uint16_t *norm_w, *norm_b; /* [D] bf16: their LayerNorm */
    uint16_t *q;               /* [T][H][D] bf16: the rows' indexer queries (wq_b output, before RoPE) */
    float *w;                  /* [T][H]: the rows' head weights */
    size_t page_bytes;         /* an indexer page: bs x (D + 4) */
    uint8_t *pages[9];         /* the indexer cache of world cache s (shards 0..W-1, then unsharded) */
} demo_index_t;

/* Draws the inputs for world w and allocates its indexer caches (zeros). Exits when the
 * configuration's indexer page is not the layout the reference reads. */
void demo_index_init(demo_index_t *x, const geo_t *g, const world_t *w);
void demo_index_free(demo_index_t *x, const world_t *w);
size_t demo_index_cache_bytes(const demo_index_t *x, const world_t *w, int s);

/* One rank's device copies: keys and norms for the prologue, and its two indexer caches (zeros):
 * cache[0] its shard, cache[1] the unsharded DCP = 1 layout, as the MLA caches of dsa_demo.c. */
typedef struct demo_index_dev {
    CUdeviceptr k, norm_w, norm_b, cache[2];
} demo_index_dev_t;
void demo_index_upload(const demo_index_t *x, const world_t *w, int rank, demo_index_dev_t *d);

/* After the prologue on rank `rank`: downloads the unsharded indexer cache into x->pages[W] (what
 * the parent's reference reads), then runs dsa_index over the world's rows with the rank's shard.
 * Returns the device top-k rows [T][K], which started as 0x5a bytes: an entry dsa_index leaves
 * unwritten is no valid row. */
CUdeviceptr demo_index_gpu(dsa_ctx_t ctx, demo_index_t *x, const world_t *w, int rank, const demo_index_dev_t *d);

/* The parent, with the GPU ranks' rows [W][T][K] and x->pages[W] as rank 0's prologue wrote it:
 * every rank's rows must be identical, and equal to DCP = 1 computed on the CPU (ref_index_dcp1)
 * under ref_index_check_row's rule. Prints the summary, puts rank 0's rows into w->topk (stage C
 * uses them on both sides), returns 1 when all agree. */
int demo_index_compare(const demo_index_t *x, world_t *w, const int32_t *rows);

/* The CPU path: the prologue's key encoding (ref_indexer_encode) into every cache, the W ranks
 * simulated (ref_index_simulate) against DCP = 1 (ref_index_dcp1), bit for bit. Prints the
 * summary, puts rank 0's rows into w->topk, returns 1 when all agree. */
int demo_index_cpu(demo_index_t *x, const geo_t *g, world_t *w);

#endif
