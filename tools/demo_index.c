/* dsa-demo's stage B, the indexer (demo.h): its inputs, the indexer cache that the prologue writes,
 * dsa_index on each rank's GPU, its CPU simulation, and the comparison of top-k rows with DCP = 1. */
#include <math.h>
#include <string.h>

#include "demo.h"

static unsigned rng;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

void demo_index_init(demo_index_t *x, const geo_t *g, const world_t *w)
{
    memset(x, 0, sizeof *x);
    x->cfg = geo_index_cfg(g);
    const size_t D = (size_t)x->cfg.D, H = (size_t)x->cfg.H, T = (size_t)w->T;
    x->page_bytes = (size_t)x->cfg.bs * (D + 4);
    if ((size_t)g->page != x->page_bytes) {
        fprintf(stderr, "dsa-demo: %s: indexer page of %d bytes, the reference reads %zu\n", g->name, g->page,
                x->page_bytes);
        exit(1);
    }
    for (int r = 0; r < w->nreq; r++)
        x->npos += w->len[r];
    rng = 20261214u; /* the same draws in every process */
    x->k = malloc(sizeof(uint16_t) * (size_t)x->npos * D);
    x->norm_w = malloc(sizeof(uint16_t) * D);
    x->norm_b = malloc(sizeof(uint16_t) * D);
    x->q = malloc(sizeof(uint16_t) * T * H * D);
    x->w = malloc(sizeof(float) * T * H);
    for (size_t i = 0; i < (size_t)x->npos * D; i++)
        x->k[i] = ref_bf16_encode(frand() + 0.125f);
    for (size_t i = 0; i < D; i++) {
        x->norm_w[i] = ref_bf16_encode(1.0f + 0.25f * frand());
        x->norm_b[i] = ref_bf16_encode(0.125f * frand());
    }
    for (size_t t = 0; t < T; t++) {
        const float mag = ldexpf(1.0f, (int)(rng >> 29) - 3); /* a magnitude per row, 2^-3 .. 2^4 */
        for (size_t i = 0; i < H * D; i++)
            x->q[t * H * D + i] = ref_bf16_encode(frand() * mag);
        for (size_t h = 0; h < H; h++)
            x->w[t * H + h] = frand();
    }
    for (int s = 0; s <= w->W; s++)
        x->pages[s] = calloc(demo_index_cache_bytes(x, w, s), 1);
}

void demo_index_free(demo_index_t *x, const world_t *w)
{
    free(x->k), free(x->norm_w), free(x->norm_b), free(x->q), free(x->w);
    for (int s = 0; s <= w->W; s++)
        free(x->pages[s]);
    memset(x, 0, sizeof *x);
}

size_t demo_index_cache_bytes(const demo_index_t *x, const world_t *w, int s)
{
    return (size_t)w->shard[s].num_blocks * x->page_bytes;
}

static ref_index_batch batch_of(const demo_index_t *x, const world_t *w)
{
    return (ref_index_batch){w->T, w->nreq, x->q, x->w, w->pos_of, w->req_of, w->len};
}

static ref_index_cache cache_of(const demo_index_t *x, const world_t *w, int s)
{
    const world_shard_t *sh = &w->shard[s];
    return (ref_index_cache){sh->table, sh->max_blocks, x->pages[s], sh->num_blocks};
}

void demo_index_upload(const demo_index_t *x, const world_t *w, int rank, demo_index_dev_t *d)
{
    const size_t D = (size_t)x->cfg.D;
    d->k = demo_up(x->k, sizeof(uint16_t) * (size_t)x->npos * D);
    d->norm_w = demo_up(x->norm_w, sizeof(uint16_t) * D);
    d->norm_b = demo_up(x->norm_b, sizeof(uint16_t) * D);
    d->cache[0] = demo_up(x->pages[rank], demo_index_cache_bytes(x, w, rank)); /* zeros */
    d->cache[1] = demo_up(x->pages[w->W], demo_index_cache_bytes(x, w, w->W));
}

CUdeviceptr demo_index_gpu(dsa_ctx_t ctx, demo_index_t *x, const world_t *w, int rank, const demo_index_dev_t *d)
{
    const size_t T = (size_t)w->T, H = (size_t)x->cfg.H, D = (size_t)x->cfg.D, K = (size_t)x->cfg.K;
    CK(dsa_cu.cuCtxSynchronize());
    CK(dsa_cu.cuMemcpyDtoH(x->pages[w->W], d->cache[1], demo_index_cache_bytes(x, w, w->W)));
    const world_shard_t *sh = &w->shard[rank];
    CUdeviceptr topk;
    CK(dsa_cu.cuMemAlloc(&topk, T * K * 4));
    CK(dsa_cu.cuMemsetD8(topk, 0x5a, T * K * 4));
    dsa_index_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = w->T;
    a.q = (const void *)demo_up(x->q, T * H * D * 2);
    a.weights = (const float *)demo_up(x->w, T * H * 4);
    a.positions = (const int64_t *)demo_up(w->pos_of, T * 8);
    a.req_of_token = (const int32_t *)demo_up(w->req_of, T * 4);
    a.seq_lens = (const int32_t *)demo_up(w->len, (size_t)w->nreq * 4);
    a.block_table = (const int32_t *)demo_up(sh->table, (size_t)(w->nreq * sh->max_blocks) * 4);
    a.num_requests = w->nreq, a.max_blocks = sh->max_blocks;
    a.idx_cache = (const void *)d->cache[0], a.num_cache_blocks = sh->num_blocks;
    a.topk = (int32_t *)topk;
    DSA(dsa_index(ctx, &a, NULL));
    return topk;
}

/* Rows choosing among more keys than they keep, and the most keys a row has (every key of the
 * demo's requests is in the cache: a row has min(position, len - 1) + 1). */
static void choosing(const demo_index_t *x, const world_t *w, int *rows, int64_t *most)
{
    *rows = 0, *most = 0;
    for (int t = 0; t < w->T; t++) {
        const int64_t len = w->len[w->req_of[t]], n = (w->pos_of[t] < len - 1 ? w->pos_of[t] : len - 1) + 1;
        *rows += n > x->cfg.K;
        *most = n > *most ? n : *most;
    }
}

int demo_index_compare(const demo_index_t *x, world_t *w, const int32_t *rows)
{
    const int T = w->T, K = x->cfg.K, W = w->W;
    const size_t n = (size_t)T * (size_t)K;
    int32_t *ref = malloc(n * 4);
    const ref_index_batch b = batch_of(x, w);
    const ref_index_cache whole = cache_of(x, w, W);
    ref_index_dcp1(&x->cfg, &b, &whole, ref);
    int same = 1, equal = 0, near = 0, bad = 0;
    for (int r = 1; r < W; r++)
        for (int t = 0; t < T; t++)
            if (memcmp(rows + (size_t)r * n + (size_t)t * (size_t)K, rows + (size_t)t * (size_t)K,
                       (size_t)K * 4) != 0) {
                if (same)
                    printf("  rank %d's top-k row %d differs from rank 0's\n", r, t);
                same = 0;
            }
    for (int t = 0; t < T; t++) {
        const int32_t *got = rows + (size_t)t * (size_t)K, *want = ref + (size_t)t * (size_t)K;
        if (memcmp(got, want, (size_t)K * 4) == 0) {
            equal++;
            continue;
        }
        if (ref_index_check_row(&x->cfg, &b, &whole, t, got, want, NULL, stdout))
            near++;
        else
            bad++;
    }
    int choose;
    int64_t most;
    choosing(x, w, &choose, &most);
    printf("  stage B (index)%s: against DCP = 1 on the CPU %d of %d rows equal, %d within\n"
           "  rounding of the k-th score, %d wrong (%d rows choose %d of up to %lld keys)\n",
           W == 1 ? "" : same ? ", the same rows on every rank" : ", rows NOT the same on every rank", equal, T, near,
           bad, choose, K, (long long)most);
    memcpy(w->topk, rows, n * 4);
    free(ref);
    return same && bad == 0;
}

int demo_index_cpu(demo_index_t *x, const geo_t *g, world_t *w)
{
    const int D = x->cfg.D, R = x->cfg.rope.dim, W = w->W, T = w->T, K = x->cfg.K;
    float *in = malloc(sizeof(float) * (size_t)D * 4), *nw = in + D, *nb = nw + D, *k = nb + D;
    float *cs = malloc(sizeof(float) * (size_t)(R / 2 + 1)), *sn = malloc(sizeof(float) * (size_t)(R / 2 + 1));
    for (int i = 0; i < D; i++)
        nw[i] = ref_bf16_decode(x->norm_w[i]), nb[i] = ref_bf16_decode(x->norm_b[i]);
    /* the prologue's step 5 for every key: LayerNorm, RoPE, Hadamard, e4m3 into its owner's page and
     * into the unsharded one */
    int64_t at = 0;
    for (int r = 0; r < w->nreq; r++)
        for (int64_t p = 0; p < w->len[r]; p++, at++) {
            for (int i = 0; i < D; i++)
                in[i] = ref_bf16_decode(x->k[(size_t)at * (size_t)D + (size_t)i]);
            ref_layernorm(in, nw, nb, D, g->idx_eps, k);
            ref_rope_cos_sin(&x->cfg.rope, (int)p, cs, sn);
            ref_rope_apply(k + (x->cfg.rope_first ? 0 : D - R), R, cs, sn, x->cfg.rope_interleaved);
            if (x->cfg.hadamard)
                ref_hadamard(k, D);
            const int s[2] = {ref_dcp_owner(p, W, w->I), W};
            for (int c = 0; c < 2; c++) {
                const world_shard_t *sh = &w->shard[s[c]];
                const int64_t l = c == 0 ? ref_dcp_local_index(p, W, w->I) : p;
                const int64_t slot = ref_dcp_slot(l, sh->table + (size_t)r * (size_t)sh->max_blocks,
                                                  sh->max_blocks, w->bs);
                ref_indexer_encode(k, D, w->bs, (int)(slot % w->bs),
                                   x->pages[s[c]] + (size_t)(slot / w->bs) * x->page_bytes);
            }
        }
    const size_t n = (size_t)T * (size_t)K;
    int32_t *rows = malloc(n * 4 * (size_t)W), *ref = malloc(n * 4);
    const ref_index_batch b = batch_of(x, w);
    ref_index_cache caches[8];
    for (int s = 0; s < W; s++)
        caches[s] = cache_of(x, w, s);
    const ref_index_cache whole = cache_of(x, w, W);
    ref_index_simulate(&x->cfg, W, w->I, &b, caches, rows);
    ref_index_dcp1(&x->cfg, &b, &whole, ref);
    int equal = 0;
    for (int t = 0; t < T; t++) {
        int same = 1;
        for (int r = 0; r < W; r++)
            same &= memcmp(rows + (size_t)r * n + (size_t)t * (size_t)K, ref + (size_t)t * (size_t)K,
                           (size_t)K * 4) == 0;
        equal += same;
    }
    int choose;
    int64_t most;
    choosing(x, w, &choose, &most);
    printf("  stage B (index), CPU simulation: %d of %d rows bit-identical to DCP = 1 on every one of the %d\n"
           "  ranks (%d rows choose %d of up to %lld keys)\n",
           equal, T, W, choose, K, (long long)most);
    memcpy(w->topk, rows, n * 4);
    free(in), free(cs), free(sn), free(rows), free(ref);
    return equal == T;
}
