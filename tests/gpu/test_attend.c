/* GPU tests of stage C through libdsa, on the CPU's batch (tests/ref/world.c): for every linked
 * configuration, W = dcp ranks on one GPU (the in-process group, one thread per rank, as DCP
 * ranks would be processes) run dsa_attend on their shards, and each rank's output equals DCP = 1
 * of the CPU reference on the same inputs, two query heads of which the host made NaN (the empty
 * head: 0 and LSE -inf) and two rows whose position lies outside the rope table (their query
 * without its rope part, each row counted once in every rank's dsa_take_rejected). Then the edge
 * cases: keys all on one rank, a rank with none, rows with no valid key. `test_attend CONFIG RANK
 * W` (the NCCL test uses it) runs one rank of a group whose ncclUniqueId is read from stdin.
 *
 * Tolerances, as FlashMLA's tests compare bf16 output against an fp32 reference over the same
 * bf16-dequantised keys (its atol/rtol on elements, and a cosine bound): the kernel multiplies
 * bf16 P (softmax weights rounded to bf16, each off by up to 2^-9 of itself) by V, which moves an
 * output by up to 2^-9 of the largest |v| among the row's keys, and rounds the output to bf16
 * (2^-8 of itself, up to an ulp with the fp32 differences): each element within 2^-7 of its value
 * plus 2^-8 of the row's largest key value, and per row cosine similarity >= 0.99999; the LSE
 * comes from fp32 weights and fp32 sums of exact bf16 products: 1e-5 relative (of max(|L|, 1)). */
#include <cuda.h>
#include <nccl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "../ref/ref.h"
#include "../ref/world.h"
#include "dsa.h"
#include "dsa_testing.h"
#include "harness.h"

typedef struct rank_io {
    dsa_ctx_t ctx;
    CUstream stream;
    dsa_attend_args_t a;
    CUdeviceptr d[10]; /* the buffers as allocated (free_rank_io) */
    CUdeviceptr out;   /* the output: d[8], or 4 bytes into it (setup_rank's off4) */
    dsa_result_t rc;
} rank_io_t;

/* The world's inputs of rank r, on the device. q_lat and q_pe are drawn here (bf16); the packed
 * query the reference sees is rebuilt from them with the reference rope. With off4, out sits 4
 * bytes past cuMemAlloc's alignment: the API's least (bf16 pairs), where a wider store faults. */
static void setup_rank(world_t *w, const geo_t *g, int r, uint16_t *q_lat, uint16_t *q_pe, rank_io_t *io, int off4)
{
    memset(&io->a, 0, sizeof io->a);
    io->a.size = sizeof io->a;
    world_shard_t *sh = &w->shard[r];
    size_t T = (size_t)w->T, H = (size_t)w->H, L = (size_t)g->L, R = (size_t)g->R;
    int n = 0;
    io->d[n++] = dev_up(q_lat, T * H * L * 2);
    io->d[n++] = dev_up(q_pe, T * H * R * 2);
    io->d[n++] = dev_up(w->pos_of, T * 8);
    io->d[n++] = dev_up(w->topk, T * (size_t)w->K * 4);
    io->d[n++] = dev_up(w->req_of, T * 4);
    io->d[n++] = dev_up(w->len, (size_t)w->nreq * 4);
    io->d[n++] = dev_up(sh->table, (size_t)(w->nreq * sh->max_blocks) * 4);
    io->d[n++] = dev_up(sh->cache, (size_t)(sh->num_blocks * w->bs * w->bpt));
    io->d[n] = dev_alloc(T * H * L * 2 + 4);
    io->out = io->d[n++] + (off4 ? 4 : 0);
    CK(cuMemsetD8(io->out, 0xff, T * H * L * 2)); /* poison: NaN */
    io->d[n] = dev_alloc(T * H * 4);
    CK(cuMemsetD8(io->d[n++], 0xff, T * H * 4));
    dsa_attend_args_t *a = &io->a;
    a->num_tokens = w->T;
    a->q_lat = (void *)io->d[0];
    a->q_pe = (void *)io->d[1];
    a->positions = (const int64_t *)io->d[2];
    a->topk = (const int32_t *)io->d[3];
    a->req_of_token = (const int32_t *)io->d[4];
    a->seq_lens = (const int32_t *)io->d[5];
    a->block_table = (const int32_t *)io->d[6];
    a->num_requests = w->nreq;
    a->max_blocks = sh->max_blocks;
    a->kv_cache = (void *)io->d[7];
    a->num_cache_blocks = sh->num_blocks;
    a->out = (void *)io->out;
    a->lse = (float *)io->d[9];
}

/* Frees what setup_rank allocated and destroys the rank's context. */
static void free_rank_io(rank_io_t *io)
{
    for (int k = 0; k < 10; k++)
        if (io->d[k])
            cuMemFree(io->d[k]);
    dsa_ctx_destroy(io->ctx);
}

static void make_queries(world_t *w, const geo_t *g, uint16_t **q_lat, uint16_t **q_pe)
{
    size_t T = (size_t)w->T, H = (size_t)w->H, L = (size_t)g->L, R = (size_t)g->R;
    for (int r = 0; r < w->W; r++) {
        q_lat[r] = malloc(T * H * L * 2);
        q_pe[r] = malloc(T * H * R * 2);
        for (size_t i = 0; i < T * H * L; i++)
            q_lat[r][i] = ref_bf16_encode(frand());
        for (size_t i = 0; i < T * H * R; i++)
            q_pe[r][i] = ref_bf16_encode(frand());
        for (size_t t = 0; t < T; t++) {
            /* a position outside the rope table: the row's rope part is not formed (zeros) */
            const int in_table = w->pos_of[t] >= 0 && w->pos_of[t] < g->maxpos;
            float c[R / 2], s[R / 2];
            if (in_table)
                ref_rope_cos_sin(&g->rope, (int)w->pos_of[t], c, s);
            for (size_t h = 0; h < H; h++) {
                float *q = w->q + (((size_t)r * T + t) * H + h) * (L + R);
                for (size_t d = 0; d < L; d++)
                    q[d] = ref_bf16_decode(q_lat[r][(t * H + h) * L + d]);
                for (size_t d = 0; d < R; d++)
                    q[L + d] = in_table ? ref_bf16_decode(q_pe[r][(t * H + h) * R + d]) : 0.0f;
                if (in_table)
                    ref_rope_apply(q + L, g->R, c, s, g->rope_interleaved);
                for (size_t d = L; d < L + R; d++)
                    q[d] = ref_bf16_round(q[d]); /* the packed query is bf16 */
            }
        }
    }
}

static void *run_rank(void *arg)
{
    rank_io_t *io = arg;
    io->rc = dsa_attend(io->ctx, &io->a, io->stream);
    return NULL;
}

/* Compares rank r's output and LSE with the DCP = 1 reference; returns the number of bad values. */
static int compare(const world_t *w, int r, const rank_io_t *io, const float *eo, const float *el, double *worst)
{
    size_t T = (size_t)w->T, H = (size_t)w->H, L = (size_t)w->latent;
    uint16_t *o = malloc(T * H * L * 2);
    float *l = malloc(T * H * 4);
    dev_get(o, io->out, T * H * L * 2);
    dev_get(l, io->d[9], T * H * 4);
    float *smax = malloc(T * H * 4), *vmax = malloc(T * sizeof(float)); /* per (row, head) and per row */
    for (size_t t = 0; t < T; t++) {
        world_score_absmax(w, r, (int)t, smax + t * H);
        vmax[t] = world_row_vmax(w, (int)t);
    }
    int bad = 0;
    for (size_t i = 0; i < T * H; i++) {
        const float *e = eo + ((size_t)r * T * H + i) * L;
        float el_i = el[(size_t)r * T * H + i];
        const double row_vmax = vmax[i / H];
        double m = 0, dot = 0, ne = 0, ng = 0, nb = 0;
        for (size_t d = 0; d < L; d++)
            m = fmax(m, fabs(e[d]));
        for (size_t d = 0; d < L; d++) {
            float got = ref_bf16_decode(o[i * L + d]);
            double err = fabs(got - e[d]);
            worst[0] = fmax(worst[0], m > 0 ? err / m : err);
            bad += !world_out_close(e[d], got, row_vmax);
            dot += (double)got * e[d];
            ne += (double)e[d] * e[d];
            ng += (double)got * got;
            nb += (fabs(e[d]) + row_vmax) * (fabs(e[d]) + row_vmax);
        }
        if (ne > 0) {
            double cs = dot / sqrt(ne * ng);
            worst[1] = fmin(worst[1], cs);
            /* DCP = 1: the output's own bf16 rounding (2^-9 of each value) keeps 1 - cosine near 1e-6.
             * DCP > 1 adds the exchange's bf16 partials: each moves an output value by at most 2^-9
             * of the row's largest latent value (a partial is a convex combination of the keys'
             * values), which is not small against a head whose partials cancel. Then 1 - cosine is
             * at most about |error|^2 / (2 |e|^2) with |error|^2 <= 2^-18 sum (|e_d| + vmax)^2; the
             * bound below is four times that. */
            const double floor_cs = w->W > 1 ? fmin(0.99999, 1.0 - 2.0 * 0x1p-18 * nb / ne) : 0.99999;
            bad += !(cs >= floor_cs);
        } else {
            bad += ng != 0; /* no key: exactly 0 */
        }
        if (isinf(el_i)) {
            bad += !(l[i] == el_i);
        } else {
            /* 1e-5 relative, plus the scores' own rounding: a score is a kv_dim-term fp32 dot product
             * (576: 36 steps of 16 products) that the tensor cores accumulate (plus the split-K sum),
             * each addition truncating (round toward zero), so its error is a few ulp of its largest
             * partial sum, at most scale * sum |q_d k_d| (smax); the LSE moves by at most the largest
             * score error. 2^-20 * smax is 16 ulp of that bound. The two misses seen on an H200
             * (5.5e-5 and 9.8e-5 relative to max(|L|, 1)) were not this: the query's RoPE had been
             * contracted into an FMA and a bf16 query element rounded the other way than here; the
             * packing now rounds like the reference and the worst seen since is 3e-6. */
            double err = fabs(l[i] - el_i) / fmax(fabs(el_i), 1.0);
            worst[2] = fmax(worst[2], err);
            if (!(fabs(l[i] - el_i) <= 1e-5 * fmax(fabs(el_i), 1.0) + 0x1p-20 * smax[i])) {
                if (bad < 4) /* enough to tell a rounding outlier from a wrong row */
                    printf("  rank %d row %zu head %zu: LSE %.7g, expected %.7g (score bound %.4g)\n", r, i / H, i % H,
                           (double)l[i], (double)el_i, (double)smax[i]);
                bad++;
            }
        }
    }
    free(o);
    free(l);
    free(smax);
    free(vmax);
    return bad;
}

/* The world of configuration g (tests/ref/world.h): its DCP group and interleave, cache format,
 * heads per rank, top-k and softmax scale, as libdsa reports them. */
static void build_world(world_t *w, const geo_t *g, int mode, unsigned seed)
{
    const world_shape_t shape = {g->info.dcp, g->info.interleave, g->bs, g->fmt, g->L, g->R, g->bpt,
                                 g->info.heads_local, g->topk, 0};
    world_build(w, &shape, mode, seed);
    w->scale = g->info.softmax_scale;
}

/* The same call again on ranks r0..r1-1 of this process with a path of the context turned off by
 * its testing switch (sw(ctx, 0); what: the two paths, for the line), which must give bit-identical
 * outputs and LSEs (the path only orders or places the same sums), and no barrier may have timed out
 * (dsa_take_rejected reports that); the switch is set back on where the context has the path. 1
 * when all is well. Used for the fused path's barriers over NCCL (the barrier kernel against NCCL
 * all-gathers, dsa_testing_device_barrier) and for a split row's merge (in the cluster of its
 * split CTAs against the split merge kernel, dsa_testing_attend_cluster_merge). */
static int path_ab(const char *name, rank_io_t *io, int r0, int r1, size_t out_bytes, size_t lse_bytes,
                   dsa_result_t (*sw)(dsa_ctx_t, int), const char *what)
{
    int ok = 1, had = 1;
    unsigned char *first[8], *again = malloc(out_bytes + lse_bytes);
    for (int r = r0; r < r1; r++) {
        first[r] = malloc(out_bytes + lse_bytes);
        dev_get(first[r], io[r].out, out_bytes);
        dev_get(first[r] + out_bytes, io[r].d[9], lse_bytes);
        had &= sw(io[r].ctx, 1) == DSA_SUCCESS; /* which path the first call had */
        CHECK(sw(io[r].ctx, 0) == DSA_SUCCESS);
        CK(cuMemsetD8(io[r].out, 0xff, out_bytes)); /* poison again */
        CK(cuMemsetD8(io[r].d[9], 0xff, lse_bytes));
    }
    pthread_t th[8];
    for (int r = r0; r < r1; r++)
        pthread_create(&th[r], NULL, run_rank, &io[r]);
    for (int r = r0; r < r1; r++)
        pthread_join(th[r], NULL);
    CK(cuStreamSynchronize(io[r0].stream));
    for (int r = r0; r < r1; r++) {
        uint64_t counts[2];
        if (io[r].rc != DSA_SUCCESS || dsa_take_rejected(io[r].ctx, counts) != DSA_SUCCESS) {
            printf("FAIL %s rank %d: %s\n", name, r, dsa_last_error(io[r].ctx));
            ok = 0;
            continue;
        }
        dev_get(again, io[r].out, out_bytes);
        dev_get(again + out_bytes, io[r].d[9], lse_bytes);
        const int same = memcmp(first[r], again, out_bytes + lse_bytes) == 0;
        if (had)
            printf("%s %s rank %d: %s: outputs %s\n", same ? "ok  " : "FAIL", name, r, what,
                   same ? "bit-identical" : "DIFFER");
        else /* the second path twice: compared, but no A/B, and not counted as one */
            printf("SKIPPED %s rank %d: %s: this context has only the second path (outputs %s)\n", name, r, what,
                   same ? "bit-identical" : "DIFFER");
        ok &= same;
        CHECK(sw(io[r].ctx, had) == DSA_SUCCESS);
    }
    for (int r = r0; r < r1; r++)
        free(first[r]);
    free(again);
    return ok && !had ? -1 : ok;
}

/* A path_ab result checked: compared and equal passes, unequal fails, not compared (-1: the context
 * has only the second path) is neither, said as SKIPPED above. */
static void check_ab(int ab)
{
    if (ab >= 0)
        CHECK(ab == 1);
}

/* nccl_id NULL: all W ranks in this process (in-process group, one thread each). Otherwise only
 * rank `only_rank`, on GPU only_rank, in a group over NCCL that the other processes join. */
/* The exchange of the next DCP worlds: 1 fused (each rank stores its partials into their owners'
 * receive buffers; what the in-process group and NCCL windows in one NVLink domain get), 0 the
 * all-to-all (dsa_testing_fused_exchange). */
static int fused_exchange = 1;
/* The target the contexts compile for (NULL: the configuration's first, sm_90a): "sm_90" runs the
 * mma.sync loop that targets without warpgroup MMA take, on this H200. */
static const char *target;

static void run_world(const char *name, int mode, unsigned seed, const void *nccl_id, int only_rank, int splits)
{
    geo_t g;
    if (harness_geo(name, &g) != 0) { /* it says why */
        check_failed++;
        return;
    }
    const int W = g.info.dcp, H = g.info.heads_local;
    world_t w;
    harness_rng = seed;
    build_world(&w, &g, mode, seed);
    /* the host's positions outside the rope table (rows 3 and 4; their keys as built): the rows'
     * query has no rope part (make_queries' zeros), and each row is counted once in every rank's
     * rejected[1] (at DCP = 1 by the attend kernel, at DCP > 1 by pack_q) */
    const uint64_t bad_positions = w.T > 4 ? 2 : 0;
    if (bad_positions) {
        w.pos_of[3] = g.maxpos;
        w.pos_of[4] = -1;
    }
    uint16_t *q_lat[8], *q_pe[8];
    make_queries(&w, &g, q_lat, q_pe);
    /* the host's NaN in a query head (row 1, every rank's last head; row 2, rank 0's head 0): every
     * score of it NaN, so the empty head, output exactly 0 and LSE -inf (compare: no reference
     * value) at every W, through every loop and the merges */
    for (int r = 0; r < W; r++) {
        q_lat[r][(1 * (size_t)H + (size_t)H - 1) * (size_t)g.L] = 0x7fc0;
        world_poison_query(&w, r, 1, H - 1);
    }
    q_lat[0][(2 * (size_t)H + 0) * (size_t)g.L] = 0x7fc0;
    world_poison_query(&w, 0, 2, 0);
    size_t n = (size_t)W * (size_t)w.T * (size_t)H;
    float *eo = malloc(n * (size_t)g.L * 4), *el = malloc(n * 4);
    world_expect(&w, eo, el);

    dsa_inproc_group_t group = NULL;
    if (W > 1 && !nccl_id)
        dsa_inproc_group_create(W, &group);
    rank_io_t io[8];
    memset(io, 0, sizeof io);
    CUstream stream;
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    int ok = 1;
    const int r0 = nccl_id ? only_rank : 0, r1 = nccl_id ? only_rank + 1 : W;
    for (int r = r0; r < r1; r++) {
        dsa_options_t o = harness_options();
        o.attend_tokens = 4; /* 11 rows: three chunks, so chunking is exercised */
        o.target = target;
        o.inproc_group = group;
        o.nccl_id = nccl_id;
        o.device = nccl_id ? only_rank : 0;
        o.dcp_rank = r;
        if (dsa_ctx_create(name, &o, &io[r].ctx) != DSA_SUCCESS) {
            printf("FAIL %s: dsa_ctx_create: %s\n", name, dsa_last_error(NULL));
            ok = 0;
            break;
        }
        if (splits && dsa_testing_force_attend_splits(io[r].ctx, splits) != DSA_SUCCESS) {
            printf("FAIL %s: %s\n", name, dsa_last_error(io[r].ctx));
            ok = 0;
            break;
        }
        /* in-process ranks always reach each other's buffers: the fused exchange must be there */
        if (W > 1 && (!nccl_id || !fused_exchange) &&
            dsa_testing_fused_exchange(io[r].ctx, fused_exchange) != DSA_SUCCESS) {
            printf("FAIL %s: %s\n", name, dsa_last_error(io[r].ctx));
            ok = 0;
            break;
        }
        io[r].stream = stream;
        /* out 4 bytes off where seed + r is odd: the cases' seeds are consecutive, so a run
         * alternates, and the ranks of a DCP group differ */
        setup_rank(&w, &g, r, q_lat[r], q_pe[r], &io[r], (seed + (unsigned)r) % 2);
    }
    pthread_t th[8];
    for (int r = r0; ok && r < r1; r++)
        pthread_create(&th[r], NULL, run_rank, &io[r]);
    for (int r = r0; ok && r < r1; r++)
        pthread_join(th[r], NULL);
    CK(cuStreamSynchronize(stream));
    double worst[3] = {0, 1, 0};
    int bad = 0;
    for (int r = r0; ok && r < r1; r++) {
        if (io[r].rc != DSA_SUCCESS) {
            printf("FAIL %s rank %d: %s\n", name, r, dsa_last_error(io[r].ctx));
            ok = 0;
            continue;
        }
        bad += compare(&w, r, &io[r], eo, el, worst);
        uint64_t counts[2] = {0, 0};
        if (dsa_take_rejected(io[r].ctx, counts) != DSA_SUCCESS || counts[0] != 0 || counts[1] != bad_positions) {
            printf("FAIL %s rank %d: rejected %llu / %llu (slots / positions), expected 0 / %llu: %s\n", name, r,
                   (unsigned long long)counts[0], (unsigned long long)counts[1], (unsigned long long)bad_positions,
                   dsa_last_error(io[r].ctx));
            bad++;
        }
    }
    CHECK(ok && bad == 0);
    if (ok && nccl_id && W > 1 && fused_exchange) {
        const size_t out_bytes = (size_t)w.T * (size_t)H * (size_t)g.L * 2, lse_bytes = (size_t)w.T * (size_t)H * 4;
        check_ab(path_ab(name, io, r0, r1, out_bytes, lse_bytes, dsa_testing_device_barrier,
                         "the fused path's barriers, the barrier kernel against NCCL all-gathers"));
    }
    const int used = ok ? dsa_testing_attend_splits(io[r0].ctx, w.T) : 0; /* per chunk of attend_tokens rows */
    if (ok && splits > 0 && used != splits) { /* a forced count is what the calls used */
        printf("FAIL %s: %d splits a row forced, the calls used %d\n", name, splits, used);
        CHECK(used == splits);
    }
    /* split rows merged in their CTAs' cluster: the same bits as the split merge kernel's; the runs
     * that force 4 or 8 splits are there for it, and on an H100 or H200 they always cluster */
    const int in_cluster = ok ? dsa_testing_attend_merges_in_cluster(io[r0].ctx, w.T) : 0;
    if (ok && (splits == 4 || splits == 8) && !in_cluster) {
        printf("FAIL %s: %d splits a row, not merged in their cluster\n", name, splits);
        CHECK(in_cluster);
    }
    if (ok && bad == 0 && in_cluster) {
        const size_t out_bytes = (size_t)w.T * (size_t)H * (size_t)g.L * 2, lse_bytes = (size_t)w.T * (size_t)H * 4;
        check_ab(path_ab(name, io, r0, r1, out_bytes, lse_bytes, dsa_testing_attend_cluster_merge,
                         "split rows merged in their cluster against the split merge kernel"));
    }
    printf("%s %s%s%s mode %d%s%s, %d split%s a row%s: %d bad; worst rel err %.2e, min cosine %.7f, worst lse rel %.2e\n",
           ok && bad == 0 ? "ok  " : "FAIL", name, target ? " at " : "", target ? target : "", mode, nccl_id ? " (NCCL rank)" : "",
           W > 1 ? (fused_exchange ? ", fused exchange" : ", all-to-all") : "", used, used == 1 ? "" : "s",
           in_cluster ? " merged in the cluster" : "", bad,
           worst[0], worst[1], worst[2]);
    for (int r = r0; r < r1; r++)
        free_rank_io(&io[r]);
    for (int r = 0; r < W; r++) {
        free(q_lat[r]);
        free(q_pe[r]);
    }
    dsa_inproc_group_destroy(group);
    cuStreamDestroy(stream);
    free(eo);
    free(el);
    world_free(&w);
}

/* splits 0: as the runtime chooses (chunks of 4 rows split each row's top-k over as many CTAs as
 * the plan allows, where its top-k is long enough); otherwise forced, so both paths see the rows. */
static void test_config(const char *name, int mode, unsigned seed, int splits)
{
    run_world(name, mode, seed, NULL, 0, splits);
}

/* dsa_attend's argument checks: each bad argument gives DSA_ERROR_INVALID_ARGUMENT and a message
 * naming it, and nothing runs (the poisoned output stays as it was). */
static void test_bad_arguments(void)
{
    const char *name = "tiny_tp4_dcp1_i1_fp8_ds_mla"; /* dcp 1: one rank, no group */
    geo_t g;
    CHECK(harness_geo(name, &g) == 0);
    world_t w;
    harness_rng = 7;
    build_world(&w, &g, TOPK_MIXED, 7);
    uint16_t *q_lat[1], *q_pe[1];
    make_queries(&w, &g, q_lat, q_pe);
    rank_io_t io;
    memset(&io, 0, sizeof io);
    dsa_options_t o = harness_options();
    CHECK(dsa_ctx_create(name, &o, &io.ctx) == DSA_SUCCESS);
    setup_rank(&w, &g, 0, q_lat[0], q_pe[0], &io, 1);
    const dsa_attend_args_t good = io.a;
    struct {
        const char *want; /* a part of the message */
        dsa_attend_args_t a;
    } c[8];
    int nc = 0;
    for (int i = 0; i < 8; i++)
        c[i].a = good;
    c[nc].want = "dsa_attend: args->kv_cache is NULL";
    c[nc++].a.kv_cache = NULL;
    c[nc].want = "dsa_attend: args->num_tokens is -1, must be >= 0";
    c[nc++].a.num_tokens = -1;
    c[nc].want = "dsa_attend: args->kv_cache is not 16-byte aligned";
    c[nc++].a.kv_cache = (const char *)good.kv_cache + 8;
    c[nc].want = "dsa_attend: args->num_cache_blocks is 0, must be 1..";
    c[nc++].a.num_cache_blocks = 0;
    c[nc].want = "dsa_attend: args->num_cache_blocks is 2147483647, must be 1..";
    c[nc++].a.num_cache_blocks = 2147483647;
    c[nc].want = "dsa_attend: args->topk_stride is 1, at least idx_topk";
    c[nc++].a.topk_stride = 1;
    c[nc].want = "dsa_attend: args->size is 8, expected";
    c[nc++].a.size = 8;
    c[nc].want = "dsa_attend: args->seq_lens is NULL";
    c[nc++].a.seq_lens = NULL;
    for (int i = 0; i < nc; i++) {
        CHECK(dsa_attend(io.ctx, &c[i].a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
        if (!strstr(dsa_last_error(io.ctx), c[i].want)) {
            printf("FAIL bad argument %d: got '%s', want '%s'\n", i, dsa_last_error(io.ctx), c[i].want);
            check_failed++;
        }
    }
    CHECK(dsa_attend(NULL, &io.a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_attend(io.ctx, NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(dsa_last_error(io.ctx), "dsa_attend: args is NULL") == 0);
    CK(cuCtxSynchronize());
    size_t bytes = (size_t)w.T * (size_t)w.H * (size_t)w.latent * 2;
    unsigned char *out = malloc(bytes);
    dev_get(out, io.out, bytes);
    int untouched = 1;
    for (size_t i = 0; i < bytes; i++)
        untouched &= out[i] == 0xff;
    CHECK(untouched);
    CHECK(dsa_attend(io.ctx, &io.a, NULL) == DSA_SUCCESS); /* the good arguments still work */
    CK(cuCtxSynchronize());
    printf("%s dsa_attend bad arguments: %d cases\n", untouched ? "ok  " : "FAIL", nc + 3);
    free(out);
    free_rank_io(&io);
    free(q_lat[0]);
    free(q_pe[0]);
    world_free(&w);
}

/* The whole step over NCCL, one process per GPU: the production path. */
typedef struct nccl_job {
    const char *name;
    unsigned seed;
    const ncclUniqueId *id;
} nccl_job_t;

static int nccl_rank(int rank, int W, void *arg)
{
    (void)W;
    const nccl_job_t *j = arg;
    run_world(j->name, TOPK_MIXED, j->seed, j->id, rank, 0);
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

static int test_nccl(const char *name, unsigned seed)
{
    dsa_config_info_t info;
    if (harness_config(name, &info) != 0) /* the registry only: CUDA stays uninitialised before the fork */
        return 1;
    int W = info.dcp;
    char what[256];
    snprintf(what, sizeof what, "test_attend --nccl %s", name);
    if (!harness_have_gpus(what, W))
        return 0;
    ncclUniqueId id;
    if (harness_nccl_ids(&id, 1) != 0)
        return 1;
    nccl_job_t job = {name, seed, &id};
    int failed = harness_run_ranks(W, nccl_rank, &job);
    printf("%s whole stage C over NCCL, %d processes, %s\n", failed ? "FAIL" : "ok  ", W, name);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--nccl")) {
        unsigned seed = (unsigned)time(NULL);
        printf("test_attend --nccl: seed %u\n", seed);
        return test_nccl(argv[2], seed);
    }
    harness_start("test_attend"); /* SKIPPED without a CUDA device */
    const char *env_seed = getenv("DSA_TEST_SEED"); /* reproduce a run: the seed it printed */
    unsigned seed = env_seed ? (unsigned)strtoul(env_seed, NULL, 10) : (unsigned)time(NULL);
    printf("test_attend: seed %u\n", seed);
    const char *only = argc > 1 ? argv[1] : NULL;
    for (const char *const *n = dsa_configs(); *n; n++)
        if (!only || strstr(*n, only))
            test_config(*n, TOPK_MIXED, seed++, 0);
    if (!only) {
        test_config("tiny_tp4_dcp4_i2_fp8_ds_mla", TOPK_ONE_RANK, seed++, 0);
        test_config("glm5.2_tp4_dcp4_i1_fp8_ds_mla", TOPK_SKIP_LAST, seed++, 0);
        test_config("tiny_tp4_dcp2_i2_nvfp4_ds_mla", TOPK_EMPTY, seed++, 0);
        test_config("tiny_tp4_dcp1_i1_bf16", TOPK_EMPTY, seed++, 0);
        /* the other path of the configurations whose rows split: one CTA a row, or two */
        test_config("deepseek_v32_tp1_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("glm5.2_tp4_dcp1_i1_fp8_ds_mla", TOPK_SKIP_LAST, seed++, 1);
        test_config("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("glm5.2_tp1_dcp1_i1_bf16", TOPK_EMPTY, seed++, 2);
        /* two splits a row, the few-splits merge entry: into out (DCP = 1) and into the exchange */
        test_config("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 2);
        test_config("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", TOPK_SKIP_LAST, seed++, 2);
        /* split rows merged in clusters of 8 (32 heads) and 4 (16), against the split merge kernel */
        test_config("deepseek_v32_tp4_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 8);
        test_config("glm5.2_tp4_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 4);
        /* a top-k of three segments (2048, 2048 and 904 entries), each compacted by the
         * producers alone, the third count in the first's slot again: one CTA a row at 16, 32,
         * 64 and 2 x 64 heads (each segment many tiles, the tiles' barriers carried across the
         * segments); the loop over every configuration above runs them with the rows split (a
         * split's segments of few or no kept entries) */
        test_config("tiny_k5000_tp8_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("tiny_k5000_tp8_dcp1_i1_nvfp4_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("tiny_k5000_tp4_dcp2_i1_bf16", TOPK_SKIP_LAST, seed++, 1);
        test_config("tiny_k5000_tp8_dcp8_i1_nvfp4_ds_mla", TOPK_MIXED, seed++, 1);
        fused_exchange = 0; /* the all-to-all exchange, as groups without load/store reach run it */
        test_config("tiny_tp4_dcp4_i1_fp8_ds_mla", TOPK_MIXED, seed++, 0);
        test_config("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", TOPK_MIXED, seed++, 1);
        /* split rows merged into the all-to-all's send buffer */
        test_config("glm5.2_tp2_dcp2_i1_nvfp4_ds_mla", TOPK_MIXED, seed++, 0);
        fused_exchange = 1;
        test_config("glm5.2_tp4_dcp1_i1_fp8_ds_mla", TOPK_EMPTY, seed++, 0);
        /* the mma.sync loop, which plain sm_90 and sm_100a builds run, on this H200: each cache
         * format, DCP, rows split and not, a top-k of three segments */
        target = "sm_90";
        test_config("tiny_tp4_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 0);
        test_config("tiny_tp4_dcp2_i1_bf16", TOPK_SKIP_LAST, seed++, 0);
        test_config("tiny_tp4_dcp2_i2_nvfp4_ds_mla", TOPK_MIXED, seed++, 0);
        test_config("deepseek_v32_tp8_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 1);
        test_config("tiny_k5000_tp4_dcp1_i1_fp8_ds_mla", TOPK_MIXED, seed++, 1);
        target = NULL;
    }
    if (!only || !strcmp(only, "args"))
        test_bad_arguments();
    CHECK_DONE();
}
