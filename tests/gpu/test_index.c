/* Stage B on the GPU (dsa_index) against the CPU reference (tests/ref/index.h), and DCP = W against
 * DCP = 1 on the GPU:
 * - `test_index ref`: at the shipped geometries (DeepSeek-V3.2: 64 heads, NeoX rope; GLM-5.2: 32
 *   heads, interleaved; tiny: 4 heads), decode and prefill rows of several requests, requests
 *   shorter and longer than idx_topk, exact ties, an absent request, rows of two score values (exactly
 *   idx_topk keys on top: the one-CTA top-k's whole-bin exit; more than idx_topk sharing the k-th's
 *   value: position order decides; two_level_keys). Each row's set must equal the
 *   reference's, except where a differing key's reference score lies within the scores' rounding of
 *   the k-th: the GPU sums the 128-dim dot products on tensor cores and the heads in a tree, the
 *   reference in sequence, so a score may differ by a few ulps of its magnitude
 *   m = k_scale * sum_h |w'_h| * relu(dot_h); the tolerance is 2^-16 m (the sums have at most 256
 *   terms; each rounding is at most 2^-24 of the running magnitude). Every such row is reported.
 * - `test_index dcp`: DCP = 2, 4, 8 through the in-process group on one GPU against the DCP = 1
 *   configuration of the same model on the same global keys: every rank's rows bit-identical to it,
 *   including rows with NaN and inf in the queries and weights.
 * - `test_index nccl`: DCP = 2 over NCCL, two processes on two GPUs, likewise.
 * - `test_index paths`: the two top-k kernels (one CTA a row; a row split over several CTAs, what
 *   dsa_index picks for few rows) on rows of up to 50K keys, with exact ties, NaN keys, empty and
 *   absent requests: rows bit-identical at every split the chunking gives (index_tokens 1, 3, 64)
 *   and at 2 CTAs a row, with the split's emit from a bit a key where the plan takes it and at
 *   every chunk (dsa_testing_index_topk_bit_keys), at DCP = 1 after each score kernel (one of them
 *   a configuration; after index_score with the top-k's first radix pass counted by the scores, by
 *   the top-k, and by the scores with every chunk reading its keys twice: dsa_testing_index_score_bins;
 *   and after a call made to fail before its top-k once its scores counted: dsa_testing_index_fail_topk)
 *   and at DCP = 4, 8 through the in-process group after the mma.sync kernel and after index_score
 *   (dsa_testing_force_index_topk picks the kernel).
 * - `test_index scores`: every score of long rows, as each score kernel wrote it, against the
 *   reference's within 2^-16 of its magnitude (the rule the top-k comparisons allow at the k-th);
 *   on prefill rows (world_prefill: groups of one request, a group across two, a last partial group,
 *   NaN and inf in some rows) the grouped kernel's scores bit-identical to index_score's.
 * Each of ref, dcp and scores runs with every score kernel forced (dsa_testing_force_index_score):
 * mma.sync, index_score, and index_score_group, the latter two on the prefill rows too.
 * - `test_index args`: argument checks, each with its message, and nothing written.
 * The single-rank runs (run_index: ref, paths, the DCP = 1 side of dcp and nccl) call dsa_index
 * twice on their context, the output cleared before each call, and the second call's rows must be
 * the first's, bit for bit: a call leaves the context's state as it found it, and a run repeats. */
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "../ref/index.h"
#include "../ref/index_world.h"
#include "../ref/ref.h"
#include "dsa.h"
#include "dsa_testing.h"
#include "harness.h"

/* The device copies of one cache of a world and the batch. */
typedef struct dev_world {
    CUdeviceptr q, w, pos, req, lens, table, pages, topk;
    int64_t num_blocks, max_blocks;
} dev_world_t;

static void upload(const iworld_t *w, int s, dev_world_t *d)
{
    const ref_index_cfg *c = &w->cfg;
    const iworld_cache_t *k = &w->cache[s];
    d->q = dev_up(w->q, (size_t)w->T * (size_t)c->H * (size_t)c->D * 2);
    d->w = dev_up(w->w, (size_t)w->T * (size_t)c->H * 4);
    d->pos = dev_up(w->positions, (size_t)w->T * 8);
    d->req = dev_up(w->req_of, (size_t)w->T * 4);
    d->lens = dev_up(w->seq_lens, (size_t)w->nreq * 4);
    d->table = dev_up(k->table, (size_t)w->nreq * (size_t)k->max_blocks * 4);
    d->pages = dev_up(k->pages, (size_t)k->num_blocks * (size_t)c->bs * (size_t)(c->D + 4));
    d->topk = dev_alloc((size_t)w->T * (size_t)c->K * 4);
    d->num_blocks = k->num_blocks;
    d->max_blocks = k->max_blocks;
}

static void release(dev_world_t *d)
{
    CUdeviceptr all[] = {d->q, d->w, d->pos, d->req, d->lens, d->table, d->pages, d->topk};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CK(cuMemFree(all[i]));
}

static dsa_index_args_t args_of(const iworld_t *w, const dev_world_t *d)
{
    dsa_index_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = w->T;
    a.q = (const void *)d->q;
    a.weights = (const float *)d->w;
    a.positions = (const int64_t *)d->pos;
    a.req_of_token = (const int32_t *)d->req;
    a.seq_lens = (const int32_t *)d->lens;
    a.block_table = (const int32_t *)d->table;
    a.num_requests = w->nreq;
    a.max_blocks = d->max_blocks;
    a.idx_cache = (const void *)d->pages;
    a.num_cache_blocks = d->num_blocks;
    a.topk = (int32_t *)d->topk;
    return a;
}

/* The score kernel every context of this test uses (dsa_testing_force_index_score): 1 the mma.sync
 * kernel, 2 index_score (warpgroup MMA on sm_90a), 3 index_score_group (rows of one request a CTA).
 * The automatic choice follows a chunk's rows and the call's requests, which differ between these
 * tests' calls: ref and dcp run once with each kernel instead. */
static int score_kernel = 1;
/* 1: ref and dcp build world_prefill's rows instead of world_long's */
static int prefill_world = 0;
/* The top-k kernel of the contexts created next (dsa_testing_force_index_topk): 0 the automatic
 * choice, 1 one CTA a row, 2 the split kernel from 2 CTAs a row. */
static int topk_kernel = 0;
/* ... at most this many CTAs a row (dsa_testing_index_topk_cap; 0: no cap), and their bit emit from
 * chunks of this many keys (dsa_testing_index_topk_bit_keys; 0: the plan's threshold, 1: every chunk) */
static int topk_cap = 0, bit_keys = 0;
/* ... and the split top-k's first pass (dsa_testing_index_score_bins): 1 counted by index_score (the
 * default), 0 by the top-k, 2 counted and every chunk reading its keys twice to store them */
static int score_bins = 1;
/* ... and, 1: run_index first makes a call that fails before its top-k (dsa_testing_index_fail_topk),
 * after its score kernel counted into the rows' states: the calls after it must not see its counts */
static int fail_first = 0;
static const char *const bins_name[] = {", first pass counted by the top-k", "",
                                        ", first pass counted by the scores, chunks read twice"};
static const char *const score_name[] = {"", "score: mma.sync", "score: index_score", "score: index_score_group"};

/* Runs dsa_index of config on GPU `device` (the current context's) over cache s of w twice on one
 * context, the output cleared before each call; out gets the second call's [T][K] (all -1 bytes where
 * a call failed). 0, or -1 (reported) where a call failed or the two calls' rows differ. */
static int run_index(const char *config, const iworld_t *w, int s, int32_t *out, int index_tokens, int device)
{
    dsa_options_t o = harness_options();
    o.index_tokens = index_tokens;
    o.device = device;
    dsa_ctx_t ctx;
    if (dsa_ctx_create(config, &o, &ctx) != DSA_SUCCESS) {
        printf("FAIL %s: dsa_ctx_create: %s\n", config, dsa_last_error(NULL));
        return -1;
    }
    CHECK(dsa_testing_force_index_score(ctx, score_kernel) == DSA_SUCCESS);
    CHECK(dsa_testing_force_index_topk(ctx, topk_kernel) == DSA_SUCCESS);
    CHECK(dsa_testing_index_topk_cap(ctx, topk_cap) == DSA_SUCCESS);
    CHECK(dsa_testing_index_topk_bit_keys(ctx, bit_keys) == DSA_SUCCESS);
    CHECK(score_bins == 1 || dsa_testing_index_score_bins(ctx, score_bins) == DSA_SUCCESS);
    dev_world_t d;
    upload(w, s, &d);
    dsa_index_args_t a = args_of(w, &d);
    /* two calls on the context, the second's rows the same bits as the first's: a call leaves the
     * context's state (the split top-k's row states) as it found it, and a run repeats; the output
     * is cleared before each call, so that a call that writes nothing cannot pass */
    const size_t bytes = (size_t)w->T * (size_t)w->cfg.K * 4;
    int32_t *first = malloc(bytes);
    dsa_result_t rc = DSA_SUCCESS;
    if (fail_first) {
        CHECK(dsa_testing_index_fail_topk(ctx, 1) == DSA_SUCCESS);
        const dsa_result_t f = dsa_index(ctx, &a, NULL);
        CK(cuCtxSynchronize());
        if (f != DSA_ERROR_INTERNAL || !strstr(dsa_last_error(ctx), "index top-k not launched")) {
            printf("FAIL %s: the call made to fail before its top-k returned %d (%s)\n", config, (int)f,
                   dsa_last_error(ctx));
            rc = DSA_ERROR_INTERNAL;
        }
        CHECK(dsa_testing_index_fail_topk(ctx, 0) == DSA_SUCCESS);
    }
    for (int call = 0; call < 2 && rc == DSA_SUCCESS; call++) {
        CK(cuMemsetD8(d.topk, 0xab, bytes));
        rc = dsa_index(ctx, &a, NULL);
        if (rc != DSA_SUCCESS)
            printf("FAIL %s: dsa_index: %s\n", config, dsa_last_error(ctx));
        CK(cuCtxSynchronize());
        dev_get(call ? out : first, d.topk, bytes);
    }
    if (rc != DSA_SUCCESS)
        memset(out, 0xff, bytes);
    const int same = rc != DSA_SUCCESS || !memcmp(first, out, bytes);
    if (!same)
        printf("FAIL %s: a second dsa_index call on the context wrote other rows than the first\n", config);
    free(first);
    release(&d);
    dsa_ctx_destroy(ctx);
    return rc == DSA_SUCCESS && same ? 0 : -1;
}

/* A row's GPU set against the reference's: equal, or every difference within rounding of the k-th
 * score (reported; the rule is ref_index_check_row's, tests/ref/index.h). Returns 1 when acceptable. */
static int compare_row(const iworld_t *w, int t, const int32_t *gpu, const int32_t *ref)
{
    const ref_index_batch b = iworld_batch(w);
    const ref_index_cache cache = iworld_cache(w, w->W);
    return ref_index_check_row(&w->cfg, &b, &cache, t, gpu, ref, NULL, stdout);
}

/* ---- against the reference ---- */

/* The indexer geometry of a configuration, read from libdsa (harness_geo, dsa_config_info). */
static int cfg_of(const char *config, ref_index_cfg *c)
{
    geo_t g;
    if (harness_geo(config, &g) != 0)
        return -1;
    *c = geo_index_cfg(&g);
    return 0;
}

/* Requests longer and shorter than K, of one key, and a long one with prefill rows (causal),
 * a row past its request's end, one past the rope table (no keys); with W ranks of interleave I.
 * long_rows: requests of 3 K + 5, K - 1, 0, 50037 and 9001 keys instead (the split top-k's chunks;
 * at most max_positions and half of it), every 5th key a NaN one when nan_keys, request 4 absent
 * from every cache when absent. */
static int world_long(const char *config, iworld_t *w, int W, int I, int key_pool, int nonfinite, unsigned seed,
                      int long_rows, int nan_keys, int absent)
{
    ref_index_cfg c;
    dsa_config_info_t info;
    if (cfg_of(config, &c) != 0 || harness_config(config, &info) != 0)
        return -1;
    const int K = c.K, P = info.max_positions;
    const int32_t short_lens[] = {K + K / 2 + 37, K / 3 + 5, 1, 2 * K + 11, K};
    const int32_t long_lens[] = {3 * K + 5, K - 1, 0, P < 50037 ? P : 50037, P / 2 < 9001 ? P / 2 : 9001};
    const int32_t *lens = long_rows ? long_lens : short_lens;
    int32_t row_req[16];
    int64_t row_pos[16];
    int T = 0;
    for (int r = 0; r < 5; r++) { /* a decode row per request */
        row_req[T] = r;
        row_pos[T++] = lens[r] - 1;
    }
    for (int j = 0; j < 6; j++) { /* prefill rows of request 3 */
        row_req[T] = 3;
        row_pos[T++] = (int64_t)lens[3] * (j + 1) / 7;
    }
    row_req[T] = 4; /* past the end of its request: sees all of it */
    row_pos[T++] = lens[4] + 100;
    row_req[T] = 0; /* past the rope table (the host's fault): no keys, however long the request */
    row_pos[T++] = (int64_t)P + 7;
    iworld_opts_t o = {.W = W, .I = I, .nreq = 5, .lens = lens, .T = T, .row_req = row_req, .row_pos = row_pos,
                       .key_pool = key_pool, .absent_req = absent ? 4 : -1, .nan_keys = nan_keys ? 5 : 0,
                       .nonfinite = nonfinite, .seed = seed};
    iworld_build(w, &c, &o);
    return 0;
}

static int world_for(const char *config, iworld_t *w, int W, int I, int key_pool, int nonfinite, unsigned seed)
{
    return world_long(config, w, W, I, key_pool, nonfinite, seed, 0, 0, 0);
}

/* Prefill rows for the grouped score kernel (index_score_group: R = 4 rows a CTA at 64 heads, 8 at
 * 32 or fewer, groups from each chunk's first row): a decode row of request 0; 16 rows of request 1
 * at consecutive positions ending at its last (whole groups of R; counts one apart); 19 rows of
 * request 2 spread over it (a group across requests 1 and 2 at R = 4 and 8; groups whose rows' keys
 * differ by many tiles); 6 rows of request 3 (K - 1 keys) at positions 0, 1, 2 (one to three keys
 * in a group with longer rows), K / 2, K - 2 and past its end (a group across requests 2 and 3 at
 * R = 8; a last partial group of 2 rows). 42 rows. */
static int world_prefill(const char *config, iworld_t *w, int W, int I, int key_pool, int nonfinite, unsigned seed)
{
    ref_index_cfg c;
    dsa_config_info_t info;
    if (cfg_of(config, &c) != 0 || harness_config(config, &info) != 0)
        return -1;
    const int K = c.K, P = info.max_positions;
    const int32_t lens[] = {K + 7, 3 * K + 5 < P ? 3 * K + 5 : P, P / 2 < 9001 ? P / 2 : 9001, K - 1};
    int32_t row_req[42];
    int64_t row_pos[42];
    int T = 0;
    row_req[T] = 0, row_pos[T++] = lens[0] - 1;
    for (int j = 0; j < 16; j++)
        row_req[T] = 1, row_pos[T++] = lens[1] - 16 + j;
    for (int j = 0; j < 19; j++)
        row_req[T] = 2, row_pos[T++] = (int64_t)lens[2] * (j + 1) / 19 - 1;
    const int64_t last[] = {0, 1, 2, K / 2, K - 2, K - 1 + 100};
    for (int j = 0; j < 6; j++)
        row_req[T] = 3, row_pos[T++] = last[j];
    iworld_opts_t o = {.W = W, .I = I, .nreq = 4, .lens = lens, .T = T, .row_req = row_req, .row_pos = row_pos,
                       .key_pool = key_pool, .absent_req = -1, .nan_keys = 0, .nonfinite = nonfinite, .seed = seed};
    iworld_build(w, &c, &o);
    return 0;
}


/* Two score values in requests 0 and 3 (world_for): every key is u or 2u for one random vector u,
 * whose e4m3 bytes are the same at both (the page scale is a power of two), so each row scores
 * them s and 2s exactly. Request 0 (K + K / 2 + 37 keys): its first K keys are 2u, so where s > 0
 * exactly K keys share the top score, the first radix pass's bin of the K-th holds them all and
 * the one-CTA top-k ends its passes there (the whole-bin exit). Request 3 (2 K + 11): its last K +
 * 11 keys are 2u, so the K-th's value is shared by more keys than are taken and the position order
 * decides (every pass runs). The two decode rows' weights are made positive, so that s > 0 wherever
 * some head's query meets u above 0 (every row at 32 and 64 heads; at 4 heads most). */
static void two_level_keys(iworld_t *w)
{
    const int K = w->cfg.K, D = w->cfg.D, H = w->cfg.H;
    float *u = malloc((size_t)D * sizeof(float)), *u2 = malloc((size_t)D * sizeof(float));
    unsigned r = harness_rng++;
    for (int d = 0; d < D; d++) {
        r = r * 1664525u + 1013904223u;
        u[d] = (float)((int)(r >> 9) - (1 << 22)) / (float)(1 << 22); /* in [-1, 1) */
        u2[d] = 2.0f * u[d];
    }
    for (int64_t g = 0; g < w->seq_lens[0]; g++)
        iworld_put_key(w, 0, g, g < K ? u2 : u);
    for (int64_t g = 0; g < w->seq_lens[3]; g++)
        iworld_put_key(w, 3, g, g < K ? u : u2);
    for (int t = 0; t < w->T; t++)
        if ((w->req_of[t] == 0 || w->req_of[t] == 3) && w->positions[t] == w->seq_lens[w->req_of[t]] - 1)
            for (int h = 0; h < H; h++)
                w->w[(size_t)t * (size_t)H + (size_t)h] = fabsf(w->w[(size_t)t * (size_t)H + (size_t)h]);
    free(u), free(u2);
}

static void test_ref_as(const char *config, int key_pool, int two_level)
{
    iworld_t w;
    if ((prefill_world ? world_prefill(config, &w, 1, 1, key_pool, 0, harness_rng++)
                       : world_for(config, &w, 1, 1, key_pool, 0, harness_rng++)) != 0) {
        CHECK(0);
        return;
    }
    if (two_level)
        two_level_keys(&w);
    const int K = w.cfg.K;
    int32_t *gpu = malloc((size_t)w.T * (size_t)K * 4), *ref = malloc((size_t)w.T * (size_t)K * 4);
    ref_index_batch b = iworld_batch(&w);
    ref_index_cache cache = iworld_cache(&w, w.W);
    ref_index_dcp1(&w.cfg, &b, &cache, ref);
    /* index_tokens 5: the call runs in chunks; prefill rows also in one chunk (whole groups) */
    int bad = 0;
    for (int pass = 0; pass < (prefill_world ? 2 : 1); pass++) {
        CHECK(run_index(config, &w, w.W, gpu, pass ? 64 : 5, 0) == 0);
        for (int t = 0; t < w.T; t++)
            bad += !compare_row(&w, t, gpu + (size_t)t * (size_t)K, ref + (size_t)t * (size_t)K);
    }
    CHECK(bad == 0);
    printf("%s %s%s%s%s (%s): %d rows against the reference, %d bad\n", bad ? "FAIL" : "ok  ", config,
           key_pool ? " (exact ties)" : "", two_level ? " (two score values: K keys on top, then more than K)" : "",
           prefill_world ? " (prefill rows, chunks of 5 and 64)" : "", score_name[score_kernel], w.T, bad);
    free(gpu), free(ref);
    iworld_free(&w);
}

static void test_ref(const char *config, int key_pool)
{
    test_ref_as(config, key_pool, 0);
}

/* ---- DCP = W on one GPU (in-process group) against DCP = 1 on the GPU ---- */

typedef struct rank_io {
    const char *config;
    const iworld_t *w;
    int rank;
    dsa_inproc_group_t group;
    CUcontext cu;
    CUstream stream;
    int32_t *out;
    int failed;
} rank_io_t;

/* 1: the ranks store their candidates into every rank's buffer, then a barrier (the fused gather,
 * the default where buffers are load/store reachable); 0: an all-gather (dsa_testing_fused_exchange) */
static int fused_gather = 1;

static void *index_rank(void *arg)
{
    rank_io_t *io = arg;
    CK(cuCtxSetCurrent(io->cu));
    dsa_options_t o = harness_options();
    o.inproc_group = io->group;
    o.dcp_rank = io->rank;
    o.index_tokens = prefill_world ? 64 : 4; /* prefill rows: whole groups on every rank */
    dsa_ctx_t ctx;
    if (dsa_ctx_create(io->config, &o, &ctx) != DSA_SUCCESS) {
        printf("FAIL %s rank %d: dsa_ctx_create: %s\n", io->config, io->rank, dsa_last_error(NULL));
        io->failed = 1;
        return NULL;
    }
    if (dsa_testing_force_index_score(ctx, score_kernel) != DSA_SUCCESS ||
        dsa_testing_force_index_topk(ctx, topk_kernel) != DSA_SUCCESS ||
        dsa_testing_index_topk_bit_keys(ctx, bit_keys) != DSA_SUCCESS ||
        (score_bins != 1 && dsa_testing_index_score_bins(ctx, score_bins) != DSA_SUCCESS) ||
        (!fused_gather && dsa_testing_fused_exchange(ctx, 0) != DSA_SUCCESS))
        io->failed = 1;
    dev_world_t d;
    upload(io->w, io->rank, &d);
    dsa_index_args_t a = args_of(io->w, &d);
    if (dsa_index(ctx, &a, io->stream) != DSA_SUCCESS) {
        printf("FAIL %s rank %d: dsa_index: %s\n", io->config, io->rank, dsa_last_error(ctx));
        io->failed = 1;
    }
    CK(cuStreamSynchronize(io->stream));
    dev_get(io->out, d.topk, (size_t)io->w->T * (size_t)io->w->cfg.K * 4);
    release(&d);
    dsa_ctx_destroy(ctx);
    return NULL;
}

static const char *only = "";
static int dcp_ran; /* tests the configuration prefix let run (dcp, paths) */

/* config (dcp W, interleave I) on W threads against single (dcp 1, the same model) on the GPU.
 * paths: long rows (world_long), the reference with one CTA a row and the ranks with the split
 * top-k; otherwise both with the automatic choice. */
static void test_dcp_as(const char *config, const char *single, int W, int I, int key_pool, int nonfinite, int paths)
{
    if (strncmp(config, only, strlen(only)) != 0)
        return;
    dcp_ran++;
    iworld_t w;
    const unsigned seed = harness_rng++;
    if ((prefill_world && !paths ? world_prefill(config, &w, W, I, key_pool, nonfinite, seed)
                                 : world_long(config, &w, W, I, key_pool, nonfinite, seed, paths, paths, 0)) != 0) {
        CHECK(0);
        return;
    }
    const size_t n = (size_t)w.T * (size_t)w.cfg.K;
    int32_t *one = malloc(n * 4), *outs = malloc(n * 4 * (size_t)W);
    topk_kernel = paths ? 1 : 0;
    CHECK(run_index(single, &w, W, one, 64, 0) == 0); /* cache W: the unsharded one */
    topk_kernel = paths ? 2 : 0; /* the ranks create their contexts after this */
    dsa_inproc_group_t g;
    CHECK(dsa_inproc_group_create(W, &g) == DSA_SUCCESS);
    CUcontext cu;
    CK(cuCtxGetCurrent(&cu));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    rank_io_t io[8];
    pthread_t th[8];
    for (int r = 0; r < W; r++) {
        io[r] = (rank_io_t){config, &w, r, g, cu, s, outs + (size_t)r * n, 0};
        pthread_create(&th[r], NULL, index_rank, &io[r]);
    }
    int failed = 0, same = 1;
    for (int r = 0; r < W; r++) {
        pthread_join(th[r], NULL);
        failed |= io[r].failed;
        same &= memcmp(outs + (size_t)r * n, one, n * 4) == 0;
    }
    topk_kernel = 0;
    CHECK(!failed && same);
    printf("%s %s (W = %d, I = %d%s%s%s%s%s) against %s%s: every rank's rows %s\n", !failed && same ? "ok  " : "FAIL",
           config, W, I, fused_gather ? "" : ", all-gather of candidates", key_pool ? ", exact ties" : "",
           nonfinite ? ", NaN and inf in q and w" : "", prefill_world && !paths ? ", prefill rows" : "",
           paths ? ", rows to 50037 keys, NaN keys, split top-k" : "", single, paths ? " (one CTA a row)" : "",
           same ? "bit-identical" : "DIFFER");
    CK(cuStreamDestroy(s));
    dsa_inproc_group_destroy(g);
    free(one), free(outs);
    iworld_free(&w);
}

static void test_dcp(const char *config, const char *single, int W, int I, int key_pool, int nonfinite)
{
    test_dcp_as(config, single, W, I, key_pool, nonfinite, 0);
}

/* ---- the two top-k kernels against each other ---- */

/* DCP = 1: one CTA a row against the split top-k at the splits that chunks of 1, 3 and 64 rows get,
 * at 2 CTAs a row (the 50037-key row's chunks of 25K keys: over the plan's bit emit threshold at
 * the shipped models), and at chunks of 3 rows with every chunk emitted from its bits (which the
 * plan keeps for long chunks); every row bit-identical. Each configuration runs after one score
 * kernel: chunks of 1 row after the mma.sync kernel, 2 CTAs a row after the grouped kernel, the
 * others after index_score, each against one CTA a row after the same kernel. */
static void test_paths(const char *config, int key_pool, int nan_keys, int absent)
{
    if (strncmp(config, only, strlen(only)) != 0)
        return;
    dcp_ran++;
    iworld_t w;
    if (world_long(config, &w, 1, 1, key_pool, 0, harness_rng++, 1, nan_keys, absent) != 0) {
        CHECK(0);
        return;
    }
    const size_t n = (size_t)w.T * (size_t)w.cfg.K;
    int32_t *one = malloc(n * 4), *split = malloc(n * 4);
    /* the split top-k after each score kernel, against one CTA a row after the same score kernel
     * (the mma.sync kernel's sums are in another order) */
    /* (after index_score, the first radix pass counted by the scores, by the top-k, and counted with
     * every chunk read twice: the last with a row's last, shorter chunk below the bit emit's 2048 keys
     * and the others at or above it, so that a short chunk's second read meets the long chunks' keys
     * above the bin row-wide) */
    /* (the last: after a call that failed before its top-k, its scores having counted) */
    const int chunks[] = {1, 3, 64, 64, 3, 3, 64, 64, 3}, caps[] = {0, 0, 0, 2, 0, 0, 0, 0, 0},
              bits[] = {0, 0, 0, 0, 1, 0, 0, 2048, 0}, scores[] = {1, 2, 2, 3, 2, 2, 2, 2, 2},
              bins[] = {1, 1, 1, 1, 1, 0, 2, 2, 1}, fails[] = {0, 0, 0, 0, 0, 0, 0, 0, 1};
    for (int i = 0; i < 9; i++) {
        score_kernel = scores[i];
        score_bins = bins[i];
        fail_first = fails[i];
        if (i == 0 || scores[i] != scores[i - 1]) {
            topk_kernel = 1, topk_cap = 0, bit_keys = 0;
            CHECK(run_index(config, &w, w.W, one, 64, 0) == 0);
        }
        topk_kernel = 2, topk_cap = caps[i], bit_keys = bits[i];
        dsa_options_t o = harness_options();
        o.index_tokens = chunks[i];
        dsa_ctx_t ctx;
        int64_t splits = 0;
        int counts = 1; /* the plan has index_score count the first pass (else mode 2 does not exist) */
        if (dsa_ctx_create(config, &o, &ctx) == DSA_SUCCESS) {
            CHECK(dsa_testing_force_index_topk(ctx, topk_kernel) == DSA_SUCCESS &&
                  dsa_testing_index_topk_cap(ctx, topk_cap) == DSA_SUCCESS);
            splits = dsa_index_topk_splits(ctx, w.T, w.cache[w.W].max_blocks);
            const dsa_result_t rc = dsa_testing_index_score_bins(ctx, 2);
            CHECK(rc == DSA_SUCCESS || rc == DSA_ERROR_UNSUPPORTED);
            counts = rc == DSA_SUCCESS;
            dsa_ctx_destroy(ctx);
        }
        if (!counts && score_bins == 2) {
            printf("SKIPPED %s: index_score counts no first pass in this plan (index_score_bins 0): no chunks "
                   "read twice to compare\n",
                   config);
            continue;
        }
        memset(split, 0x5a, n * 4);
        CHECK(run_index(config, &w, w.W, split, chunks[i], 0) == 0);
        int bad = 0;
        for (int t = 0; t < w.T; t++)
            if (memcmp(split + (size_t)t * (size_t)w.cfg.K, one + (size_t)t * (size_t)w.cfg.K, (size_t)w.cfg.K * 4)) {
                if (bad++ < 3)
                    printf("     row %d (request %d, position %lld) differs\n", t, w.req_of[t],
                           (long long)w.positions[t]);
            }
        CHECK(bad == 0 && splits > 1 && (!caps[i] || splits == caps[i]));
        char emit[64] = "";
        if (bits[i])
            snprintf(emit, sizeof emit, bits[i] == 1 ? ", every chunk's emit from its bits"
                                                     : ", chunks of %d keys or more emitted from their bits",
                     bits[i]);
        printf("%s %s%s%s%s, chunks of %d rows (%lld CTAs a row%s, %s%s%s): split top-k against one CTA a row, %d "
               "rows, %d differ\n",
               bad || splits < 2 || (caps[i] && splits != caps[i]) ? "FAIL" : "ok  ", config,
               key_pool ? ", exact ties" : "", nan_keys ? ", NaN keys" : "", absent ? ", an absent request" : "",
               chunks[i], (long long)splits, emit, score_name[score_kernel], bins_name[score_bins],
               fail_first ? ", after a call that failed before its top-k" : "", w.T, bad);
    }
    topk_kernel = 0, topk_cap = 0, bit_keys = 0, score_kernel = 1, score_bins = 1, fail_first = 0;
    free(one), free(split);
    iworld_free(&w);
}

/* ---- every score against the reference ---- */

/* The score of a score key (the inverse of score_key, kernels/dsa_index_select.cuh); *none for 0. */
static float score_of_key(uint32_t k)
{
    if (k == 1u)
        return NAN;
    const uint32_t b = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float s;
    memcpy(&s, &b, 4);
    return s;
}

/* The last key position row t of w sees (the reference's rule): its own, or its request's last;
 * -1 where it has none. */
static int64_t row_last_key(const iworld_t *w, int t)
{
    const ref_index_batch b = iworld_batch(w);
    return ref_index_row_last(&w->cfg, &b, t);
}

/* The keys of w's longest row, at least 1: the row stride of score_keys' out. */
static int64_t longest_row(const iworld_t *w)
{
    int64_t most = 1;
    for (int t = 0; t < w->T; t++)
        most = row_last_key(w, t) + 1 > most ? row_last_key(w, t) + 1 : most;
    return most;
}

/* dsa_index of w's rows in one chunk at DCP = 1 with score kernel `kernel` (forced), then every
 * row's score keys into out [T][most] (dsa_testing_index_keys). 1 on success; else a FAIL line. */
static int score_keys(const char *config, const iworld_t *w, int kernel, int64_t most, uint32_t *out)
{
    dsa_options_t o = harness_options();
    o.index_tokens = 64;
    dsa_ctx_t ctx;
    if (dsa_ctx_create(config, &o, &ctx) != DSA_SUCCESS) {
        printf("FAIL %s: dsa_ctx_create: %s\n", config, dsa_last_error(NULL));
        return 0;
    }
    dev_world_t d;
    upload(w, w->W, &d);
    dsa_index_args_t a = args_of(w, &d);
    const int ok = dsa_testing_force_index_score(ctx, kernel) == DSA_SUCCESS &&
                   dsa_testing_index_keep_keys(ctx, 1) == DSA_SUCCESS && dsa_index(ctx, &a, NULL) == DSA_SUCCESS &&
                   dsa_testing_index_keys(ctx, w->T, most, out) == DSA_SUCCESS;
    if (!ok)
        printf("FAIL %s: %s\n", config, dsa_last_error(ctx));
    release(&d);
    dsa_ctx_destroy(ctx);
    return ok;
}

/* Each key's score on the GPU (score kernel `kernel`: 1 mma.sync, 2 index_score, 3
 * index_score_group) against the reference's: equal NaN-ness, and for numbers |gpu - ref| <= 2^-16 m
 * with m = |k_scale| sum_h |w'_h| sum_i |q_hi k_i| (in double): the products are exact and each of
 * the two fp32 sums of at most 256 terms, in any order, errs by under 256 x 2^-24 of its terms'
 * magnitudes, so 2^-16 m bounds any order of summation, the reference's and the tensor cores' alike (a sum that cancels
 * is judged by its terms, not by its small result). Long rows (up to 50K keys, prefill rows; up to
 * 4K keys of a row checked, evenly spaced), or world_prefill's rows (prefill), one chunk. Prints the
 * largest error in units of 2^-24 m. */
static void test_scores(const char *config, int kernel, int prefill)
{
    if (strncmp(config, only, strlen(only)) != 0)
        return;
    iworld_t w;
    if ((prefill ? world_prefill(config, &w, 1, 1, 0, 0, harness_rng++)
                 : world_long(config, &w, 1, 1, 0, 0, harness_rng++, 1, 0, 0)) != 0) {
        CHECK(0);
        return;
    }
    const ref_index_cfg *c = &w.cfg;
    const int H = c->H, D = c->D, bs = c->bs;
    const int64_t most = longest_row(&w);
    uint32_t *keys = calloc((size_t)w.T * (size_t)most, 4);
    int ok = score_keys(config, &w, kernel, most, keys);
    int64_t checked = 0, bad = 0;
    double worst = 0.0; /* |gpu - ref| / (2^-24 m) */
    uint8_t *q8 = malloc((size_t)H * (size_t)D);
    float *qd = malloc((size_t)H * (size_t)D * 4), *w_eff = malloc((size_t)H * 4), *kd = malloc((size_t)D * 4);
    const iworld_cache_t *cache = &w.cache[w.W];
    for (int t = 0; ok && t < w.T; t++) {
        const int r = w.req_of[t];
        const int64_t last = row_last_key(&w, t);
        ref_index_query_prep(c, w.q + (size_t)t * (size_t)(H * D), w.w + (size_t)t * (size_t)H, (int)w.positions[t], q8,
                             NULL, w_eff);
        for (int i = 0; i < H * D; i++)
            qd[i] = ref_e4m3_decode(q8[i]);
        const int64_t stride = (last + 1) / 4096 + 1; /* at most about 4K keys a row: the CPU's time */
        for (int64_t l = 0; l <= last; l += stride) {
            const int32_t blk = cache->table[(int64_t)r * cache->max_blocks + l / bs];
            const uint32_t k = keys[(size_t)t * (size_t)most + (size_t)l];
            if (blk < 0) {
                bad += k != 0u;
                continue;
            }
            const uint8_t *page = cache->pages + (int64_t)blk * bs * (D + 4);
            for (int i = 0; i < D; i++)
                kd[i] = ref_e4m3_decode(page[(l % bs) * D + i]);
            float k_scale;
            memcpy(&k_scale, page + (int64_t)bs * D + 4 * (l % bs), 4);
            const float want = ref_index_score(H, D, qd, w_eff, kd, k_scale);
            double m = 0.0;
            for (int h = 0; h < H; h++) {
                double terms = 0.0;
                for (int i = 0; i < D; i++)
                    terms += fabs((double)qd[h * D + i] * kd[i]);
                m += fabs((double)w_eff[h]) * terms;
            }
            m *= fabs((double)k_scale);
            const float got = score_of_key(k);
            checked++;
            if (k == 0u || isnan(got) != isnan(want)) {
                bad++;
                continue;
            }
            if (isnan(want))
                continue;
            const double err = fabs((double)got - (double)want), unit = ldexp(m, -24);
            if (unit > 0.0 && err / unit > worst)
                worst = err / unit;
            if (err > ldexp(m, -16)) {
                if (bad < 3)
                    printf("     row %d key %lld: %.9g, reference %.9g (magnitude %.3g)\n", t, (long long)l, got, want, m);
                bad++;
            }
        }
    }
    CHECK(ok && bad == 0 && checked > 0);
    printf("%s %s (%s%s): %lld scores of %d rows against the reference, %lld beyond 2^-16 of their magnitude; "
           "largest error %.1f x 2^-24 of it\n",
           ok && bad == 0 ? "ok  " : "FAIL", config, score_name[kernel], prefill ? ", prefill rows" : "",
           (long long)checked, w.T, (long long)bad, worst);
    free(q8), free(qd), free(w_eff), free(kd), free(keys);
    iworld_free(&w);
}

/* The grouped score kernel against index_score on world_prefill's rows (NaN and inf in some rows'
 * queries and weights: a group's other rows must not see them), one context, one chunk: every key
 * of every row (those below its count) bit-identical, as dsa_testing_index_keys reads them. */
static void test_group_exact(const char *config)
{
    if (strncmp(config, only, strlen(only)) != 0)
        return;
    iworld_t w;
    if (world_prefill(config, &w, 1, 1, 0, 1, harness_rng++) != 0) {
        CHECK(0);
        return;
    }
    const int64_t most = longest_row(&w);
    int64_t total = 0; /* keys of all rows */
    const size_t n = (size_t)w.T * (size_t)most;
    uint32_t *single = calloc(n, 4), *group = calloc(n, 4);
    const int ok = score_keys(config, &w, 2, most, single) && score_keys(config, &w, 3, most, group);
    int64_t differ = 0;
    for (int t = 0; ok && t < w.T; t++) {
        const int64_t last = row_last_key(&w, t);
        for (int64_t l = 0; l <= last; l++) {
            const size_t i = (size_t)t * (size_t)most + (size_t)l;
            if (single[i] != group[i] && differ++ < 3)
                printf("     row %d (request %d, position %lld) key %lld: index_score %08x, index_score_group %08x\n",
                       t, w.req_of[t], (long long)w.positions[t], (long long)l, single[i], group[i]);
        }
        total += last + 1;
    }
    CHECK(ok && differ == 0 && total > 0);
    printf("%s %s (prefill rows, NaN and inf in q and w): index_score_group against index_score, %lld scores of %d "
           "rows, %lld differ\n",
           ok && differ == 0 ? "ok  " : "FAIL", config, (long long)total, w.T, (long long)differ);
    free(single), free(group);
    iworld_free(&w);
}

/* ---- DCP = 2 over NCCL, one process per GPU ---- */

static const char *const nccl_config = "glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", *const nccl_single = "glm5.2_tp1_dcp1_i1_bf16";

static int nccl_rank(int rank, int W, void *arg)
{
    const ncclUniqueId *id = arg;
    iworld_t w;
    if (world_for(nccl_config, &w, W, 1, 4, 1, 20261130u) != 0)
        return 1;
    const size_t n = (size_t)w.T * (size_t)w.cfg.K;
    int32_t *one = malloc(n * 4), *mine = malloc(n * 4);
    int bad = run_index(nccl_single, &w, W, one, 64, rank) != 0;
    dsa_options_t o = harness_options();
    o.device = rank;
    o.nccl_id = id;
    o.dcp_rank = rank;
    dsa_ctx_t ctx;
    if (dsa_ctx_create(nccl_config, &o, &ctx) != DSA_SUCCESS) {
        printf("FAIL rank %d: dsa_ctx_create: %s\n", rank, dsa_last_error(NULL));
        return 1;
    }
    dev_world_t d;
    upload(&w, rank, &d);
    dsa_index_args_t a = args_of(&w, &d);
    /* the fused candidate gather where the group has it, then the all-gather (the fallback): both
     * give DCP = 1's rows (the output is overwritten with garbage in between) */
    for (int fused = 1; fused >= 0; fused--) {
        int wrong = fused == 0 && dsa_testing_fused_exchange(ctx, 0) != DSA_SUCCESS;
        CK(cuMemsetD8(d.topk, 0xab, n * 4));
        wrong |= dsa_index(ctx, &a, NULL) != DSA_SUCCESS;
        CK(cuCtxSynchronize());
        dev_get(mine, d.topk, n * 4);
        wrong |= memcmp(mine, one, n * 4) != 0;
        printf("%s rank %d: %s over NCCL (%s) against %s on the GPU: rows %s\n", wrong ? "FAIL" : "ok  ", rank,
               nccl_config, fused ? "the gather as the context chose it" : "an all-gather of candidates", nccl_single,
               wrong ? "DIFFER" : "bit-identical");
        bad |= wrong;
    }
    release(&d);
    dsa_ctx_destroy(ctx);
    free(one), free(mine);
    iworld_free(&w);
    return bad;
}

static void test_nccl(void)
{
    if (!harness_have_gpus("test_index nccl", 2))
        return;
    ncclUniqueId id;
    CHECK(harness_nccl_ids(&id, 1) == 0);
    CHECK(harness_run_ranks(2, nccl_rank, &id) == 0);
}

/* ---- argument checks ---- */

static void test_args(void)
{
    iworld_t w;
    if (world_for("tiny_tp4_dcp1_i1_bf16", &w, 1, 1, 0, 0, 7u) != 0) {
        CHECK(0);
        return;
    }
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(dsa_ctx_create("tiny_tp4_dcp1_i1_bf16", &o, &ctx) == DSA_SUCCESS);
    dev_world_t d;
    upload(&w, w.W, &d);
    const size_t n = (size_t)w.T * (size_t)w.cfg.K * 4;
    int32_t *sentinel = malloc(n), *after = malloc(n);
    memset(sentinel, 0x5a, n);
    dev_put(d.topk, sentinel, n);
    const dsa_index_args_t good = args_of(&w, &d);
    struct {
        dsa_index_args_t a;
        const char *want;
    } c[12];
    int nc = 0;
    c[nc].a = good, c[nc].a.num_tokens = -1, c[nc++].want = "dsa_index: args->num_tokens is -1, must be >= 0";
    c[nc].a = good, c[nc].a.q = NULL, c[nc++].want = "dsa_index: args->q is NULL";
    c[nc].a = good, c[nc].a.q = (const char *)good.q + 2, c[nc++].want = "dsa_index: args->q is not 16-byte aligned";
    c[nc].a = good, c[nc].a.topk = NULL, c[nc++].want = "dsa_index: args->topk is NULL";
    c[nc].a = good, c[nc].a.idx_cache = (const char *)good.idx_cache + 4,
    c[nc++].want = "dsa_index: args->idx_cache is not 16-byte aligned";
    c[nc].a = good, c[nc].a.num_requests = 0, c[nc++].want = "dsa_index: args->num_requests is 0, must be 1..2^31-1";
    c[nc].a = good, c[nc].a.max_blocks = 0, c[nc++].want = "dsa_index: args->max_blocks is 0, must be 1..";
    c[nc].a = good, c[nc].a.num_cache_blocks = 0, c[nc++].want = "dsa_index: args->num_cache_blocks is 0, must be 1..";
    c[nc].a = good, c[nc].a.topk_stride = 3, c[nc++].want = "dsa_index: args->topk_stride is 3, at least idx_topk (64)";
    c[nc].a = good, c[nc].a.q_stride = 12, c[nc++].want = "dsa_index: args->q_stride is 12, at least idx_heads x idx_head_dim (512)";
    c[nc].a = good, c[nc].a.size = 8, c[nc++].want = "dsa_index: args->size is 8, expected";
    int bad = 0;
    for (int i = 0; i < nc; i++) {
        const dsa_result_t r = dsa_index(ctx, &c[i].a, NULL);
        if (r != DSA_ERROR_INVALID_ARGUMENT || strncmp(dsa_last_error(ctx), c[i].want, strlen(c[i].want)) != 0) {
            printf("FAIL args case %d: %d '%s', want '%s'\n", i, (int)r, dsa_last_error(ctx), c[i].want);
            bad++;
        }
    }
    CHECK(dsa_index(NULL, &good, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(!strcmp(dsa_last_error(NULL), "dsa_index: ctx is NULL"));
    CK(cuCtxSynchronize());
    dev_get(after, d.topk, n);
    CHECK(memcmp(after, sentinel, n) == 0); /* nothing written */
    CHECK(bad == 0);
    printf("%s dsa_index bad arguments: %d cases\n", bad ? "FAIL" : "ok  ", nc);
    release(&d);
    dsa_ctx_destroy(ctx);
    free(sentinel), free(after);
    iworld_free(&w);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    only = argc > 2 ? argv[2] : ""; /* a configuration-name prefix: the sanitizers' shorter runs */
    if (!strcmp(what, "nccl")) { /* before any CUDA call: the ranks fork */
        test_nccl();
        CHECK_DONE();
    }
    harness_start("test_index");
    harness_rng = (unsigned)time(NULL);
    printf("test_index: seed %u\n", harness_rng);
    for (score_kernel = 1; score_kernel <= 3 && (!strcmp(what, "all") || !strcmp(what, "ref")); score_kernel++) {
        test_ref("tiny_tp4_dcp1_i1_bf16", 0);
        test_ref("tiny_tp4_dcp1_i1_bf16", 3);
        test_ref("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 0);
        test_ref("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 0);
        test_ref("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 5);
        test_ref("tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", 0); /* a top-k of 5000 */
        test_ref_as("tiny_tp4_dcp1_i1_bf16", 0, 1);
        test_ref_as("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 0, 1);
        test_ref_as("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 0, 1);
        /* 16 indexer heads of 256 dims, rope interleaved on the last dims, no Hadamard */
        test_ref("tiny_variants_tp4_dcp1_i1_bf16", 0);
        if (score_kernel >= 2) { /* the warpgroup kernels on rows that group */
            prefill_world = 1;
            test_ref("tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", 0);
            test_ref("tiny_tp4_dcp1_i1_bf16", 3);
            test_ref("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 0);
            test_ref("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 0);
            test_ref("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 5);
            prefill_world = 0;
        }
    }
    for (score_kernel = 1; score_kernel <= 3 && (!strcmp(what, "all") || !strcmp(what, "dcp")); score_kernel++) {
        printf("-- dcp, %s\n", score_name[score_kernel]);
        test_dcp("tiny_tp4_dcp2_i1_bf16", "tiny_tp4_dcp1_i1_bf16", 2, 1, 3, 0);
        test_dcp("tiny_tp4_dcp4_i1_fp8_ds_mla", "tiny_tp4_dcp1_i1_bf16", 4, 1, 0, 1);
        test_dcp("tiny_tp4_dcp4_i2_fp8_ds_mla", "tiny_tp4_dcp1_i1_bf16", 4, 2, 3, 0);
        test_dcp("glm5.2_tp4_dcp4_i4_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 4, 4, 0);
        test_dcp("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1);
        /* lists of 5000: two merged in shared memory, eight from global memory (index_merge_smem 0) */
        test_dcp("tiny_k5000_tp4_dcp2_i1_bf16", "tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", 2, 1, 0, 0);
        test_dcp("tiny_k5000_tp8_dcp8_i1_nvfp4_ds_mla", "tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", 8, 1, 3, 0);
        test_dcp("tiny_variants_tp8_dcp2_i1_fp8_ds_mla_p2", "tiny_variants_tp4_dcp1_i1_bf16", 2, 1, 0, 0);
        fused_gather = 0; /* the all-gather, as groups without load/store reach run it */
        test_dcp("tiny_tp4_dcp4_i2_fp8_ds_mla", "tiny_tp4_dcp1_i1_bf16", 4, 2, 3, 0);
        test_dcp("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1);
        fused_gather = 1;
        if (score_kernel >= 2) { /* the warpgroup kernels on rows that group, each rank's own counts */
            prefill_world = 1;
            test_dcp("tiny_tp4_dcp4_i2_fp8_ds_mla", "tiny_tp4_dcp1_i1_bf16", 4, 2, 3, 1);
            test_dcp("glm5.2_tp4_dcp4_i4_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 4, 4, 0);
            test_dcp("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1);
            prefill_world = 0;
        }
        if (!dcp_ran)
            printf("FAIL test_index dcp: no configuration starts with '%s'\n", only);
        CHECK(dcp_ran > 0);
    }
    score_kernel = 1;
    if (!strcmp(what, "all") || !strcmp(what, "paths")) {
        dcp_ran = 0;
        test_paths("tiny_tp4_dcp1_i1_bf16", 0, 1, 0);
        test_paths("tiny_tp4_dcp1_i1_bf16", 3, 0, 1);
        test_paths("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 0, 1, 1);
        test_paths("glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 0, 0);
        test_paths("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 0, 0, 0);
        test_paths("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 5, 1, 0);
        test_paths("tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", 0, 1, 0);
        test_dcp_as("glm5.2_tp4_dcp4_i4_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 4, 4, 0, 1);
        test_dcp_as("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1, 1);
        bit_keys = 1; /* the ranks' split top-k emitting every chunk from its bits (their candidate sink) */
        printf("-- paths, every split top-k chunk emitted from its bits\n");
        test_dcp_as("glm5.2_tp4_dcp4_i4_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 4, 4, 0, 1);
        test_dcp_as("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1, 1);
        bit_keys = 0;
        score_kernel = 2; /* the ranks' split top-k starting from index_score's first-pass counts */
        printf("-- paths, the ranks after index_score\n");
        test_dcp_as("glm5.2_tp4_dcp4_i4_fp8_ds_mla", "glm5.2_tp4_dcp1_i1_fp8_ds_mla", 4, 4, 4, 0, 1);
        test_dcp_as("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla", "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", 8, 1, 0, 1, 1);
        score_kernel = 1;
        if (!dcp_ran)
            printf("FAIL test_index paths: no configuration starts with '%s'\n", only);
        CHECK(dcp_ran > 0);
    }
    if (!strcmp(what, "all") || !strcmp(what, "scores")) {
        for (int k = 1; k <= 3; k++)
            for (int prefill = 0; prefill <= (k >= 2); prefill++) {
                test_scores("tiny_tp4_dcp1_i1_bf16", k, prefill);
                test_scores("tiny_variants_tp4_dcp1_i1_bf16", k, prefill);
                test_scores("glm5.2_tp4_dcp1_i1_fp8_ds_mla", k, prefill);
                test_scores("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", k, prefill);
            }
        test_group_exact("tiny_tp4_dcp1_i1_bf16");
        test_group_exact("glm5.2_tp4_dcp1_i1_fp8_ds_mla");
        test_group_exact("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla");
    }
    if (!strcmp(what, "all") || !strcmp(what, "args"))
        test_args();
    CHECK_DONE();
}
