/* GPU tests of stage A (the prologue) through libdsa, against the CPU reference, on fresh random
 * data, for every configuration linked into the library. Skips loudly without a GPU.
 *
 * Tolerances (each a consequence of the formats, not a fudge):
 * - q_c_out, bf16 latent cache values: within 1 bf16 ulp of the fp32 reference. The result is
 *   rounded to bf16 (half an ulp) and the fp32 math on the GPU (rsqrtf, another summation order)
 *   differs from the reference's in the last bits, which can move a value across a rounding
 *   boundary: one ulp, never more.
 * - rotated k_pe in the cache (bf16 for bf16 and fp8_ds_mla, e4m3 codes for nvfp4_ds_mla): exact.
 *   Its inputs are bf16 values and the same fp32 cos/sin, and the GPU rounds each product and the
 *   sum on their own like ref_rope_apply (kernels/dsa_rope.cuh), so both compute the same fp32
 *   number and round it the same way. (cos/sin: the GPU's table and ref_rope_cos_sin both evaluate
 *   in double and round to fp32; they could differ only for a value within a few double ulps of an
 *   fp32 rounding boundary, about 1e-8 per value, and then rarely change the bf16 result.)
 * - e4m3 codes (fp8 latent, indexer keys, nvfp4 block scales): within 1 code, for the reason of
 *   the first point one step higher up (the indexer key's LayerNorm); sign always equal.
 * - fp32 tile scales of fp8_ds_mla (amax / 448): relative 1e-6 (amax is one fp32 value of the
 *   same rounding story); power-of-two scales (indexer): exact.
 * - e2m1 codes: within 1 step when the block scales agree.
 * - Round trip: the GPU's cache decoded by the reference decoder equals the fp32 values within
 *   the format's own error (half a step of the code plus the tolerance above). */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "../ref/ref.h"
#include "dsa.h"
#include "dsa_testing.h"
#include "harness.h"

static float bf(uint16_t b) { return ref_bf16_decode(b); }

static int within_bf16_ulp(float got, float want)
{
    float ulp = want == 0 ? 1e-38f : ldexpf(1.0f, ilogbf(want) - 7);
    return fabsf(got - want) <= ulp * 1.0001f;
}

/* Rotated rope values are exact: the GPU stores the bf16 rounding of the reference's fp32 value. */
static int bf16_exact(float got, float want)
{
    return got == ref_bf16_decode(ref_bf16_encode(want));
}

static int code_close(uint8_t a, uint8_t b)
{
    if (a == b)
        return 1;
    if ((a & 0x80) != (b & 0x80)) /* zero can carry either sign */
        return (a & 0x7f) <= 1 && (b & 0x7f) <= 1;
    return abs((int)(a & 0x7f) - (int)(b & 0x7f)) <= 1;
}

typedef struct bufs {
    CUdeviceptr q_c, q_out, kv, idx_k, pos, slot, qw, kvw, iw, ib, cache, icache, topk;
} bufs_t;

typedef struct host {
    int T;
    int64_t blocks;
    uint16_t *q_c, *kv, *idx_k, *qw, *kvw, *iw, *ib, *q_out;
    int64_t *pos, *slot;
    uint8_t *cache, *icache, *cache0, *icache0;
    int32_t *topk;
} host_t;

/* Reference of one token's cache entry and indexer key, in fp32 before quantisation. */
static void ref_token(const geo_t *g, const host_t *h, int t, float *latent, float *rope, float *k)
{
    float x[g->L + g->R], w[g->L], c[g->R / 2], s[g->R / 2];
    for (int i = 0; i < g->L + g->R; i++)
        x[i] = bf(h->kv[(size_t)t * (size_t)(g->L + g->R) + (size_t)i]);
    for (int i = 0; i < g->L; i++)
        w[i] = bf(h->kvw[i]);
    ref_rmsnorm(x, w, g->L, g->eps, latent);
    ref_rope_cos_sin(&g->rope, (int)h->pos[t], c, s);
    memcpy(rope, x + g->L, sizeof(float) * (size_t)g->R);
    ref_rope_apply(rope, g->R, c, s, g->rope_interleaved);
    float kin[g->D], kw[g->D], kb[g->D];
    for (int i = 0; i < g->D; i++) {
        kin[i] = bf(h->idx_k[(size_t)t * (size_t)g->D + (size_t)i]);
        kw[i] = bf(h->iw[i]);
        kb[i] = bf(h->ib[i]);
    }
    ref_layernorm(kin, kw, kb, g->D, g->idx_eps, k);
    ref_rope_apply(k + (g->idx_rope_first ? 0 : g->D - g->R), g->R, c, s, g->idx_interleaved);
    if (g->hadamard)
        ref_hadamard(k, g->D);
}

/* A context for the prologue tests. Configurations with dcp > 1 need a DCP group; the prologue
 * never talks to the other ranks, so rank 0 of an in-process group stands alone. */
static dsa_inproc_group_t test_group;

static dsa_result_t create(const geo_t *g, dsa_options_t *o, dsa_ctx_t *ctx)
{
    int W = g->info.dcp;
    dsa_inproc_group_destroy(test_group);
    test_group = NULL;
    if (W > 1 && dsa_inproc_group_create(W, &test_group) != DSA_SUCCESS)
        return DSA_ERROR_INTERNAL;
    o->inproc_group = test_group;
    o->dcp_rank = 0;
    o->cache_dir = getenv("DSA_TEST_CACHE");
    return dsa_ctx_create(g->name, o, ctx);
}

static void make_case(const geo_t *g, int T, int owned_percent, host_t *h, bufs_t *b)
{
    const size_t kvd = (size_t)(g->L + g->R), D = (size_t)g->D, Q = (size_t)g->q, L = (size_t)g->L;
    memset(h, 0, sizeof *h);
    h->T = T;
    h->blocks = (T + g->bs - 1) / g->bs * 2 + 1;
    int64_t slots = h->blocks * g->bs;
    h->q_c = malloc(sizeof(uint16_t) * (size_t)T * Q);
    h->q_out = malloc(sizeof(uint16_t) * (size_t)T * Q);
    h->kv = malloc(sizeof(uint16_t) * (size_t)T * kvd);
    h->idx_k = malloc(sizeof(uint16_t) * (size_t)T * D);
    h->qw = malloc(sizeof(uint16_t) * Q);
    h->kvw = malloc(sizeof(uint16_t) * L);
    h->iw = malloc(sizeof(uint16_t) * D);
    h->ib = malloc(sizeof(uint16_t) * D);
    h->pos = malloc(sizeof(int64_t) * (size_t)T);
    h->slot = malloc(sizeof(int64_t) * (size_t)T);
    size_t cb = (size_t)slots * (size_t)g->bpt, ib = (size_t)h->blocks * (size_t)g->page;
    h->cache = malloc(cb);
    h->cache0 = malloc(cb);
    h->icache = malloc(ib);
    h->icache0 = malloc(ib);
    h->topk = malloc(sizeof(int32_t) * (size_t)T * (size_t)g->topk);
    float mag = ldexpf(1.0f, (int)irand(9) - 4); /* activations from 2^-4 to 2^4 */
    fill_bf16(h->q_c, (size_t)T * Q, mag, 0);
    fill_bf16(h->kv, (size_t)T * kvd, mag, 0);
    fill_bf16(h->idx_k, (size_t)T * D, mag, 0.1f * mag);
    fill_bf16(h->qw, Q, 0.5f, 1.0f);
    fill_bf16(h->kvw, L, 0.5f, 1.0f);
    fill_bf16(h->iw, D, 0.5f, 1.0f);
    fill_bf16(h->ib, D, 0.2f, 0.0f);
    /* slots: a random distinct subset for owned tokens, -1 for the rest, the last few padding */
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)slots);
    for (int64_t i = 0; i < slots; i++)
        perm[i] = i;
    for (int64_t i = slots - 1; i > 0; i--) {
        int64_t j = irand((uint32_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int t = 0; t < T; t++) {
        h->pos[t] = irand((uint32_t)g->maxpos);
        h->slot[t] = (int)irand(100) < owned_percent && t < T - T / 8 ? perm[t] : -1;
    }
    free(perm);
    for (size_t i = 0; i < cb; i++)
        h->cache0[i] = (uint8_t)(0xa5 ^ (i * 7));
    for (size_t i = 0; i < ib; i++)
        h->icache0[i] = (uint8_t)(0x5a ^ (i * 13));
    for (size_t i = 0; i < (size_t)T * (size_t)g->topk; i++)
        h->topk[i] = 0x7eadbeef;

    b->q_c = dev_up(h->q_c, sizeof(uint16_t) * (size_t)T * Q);
    b->q_out = dev_alloc(sizeof(uint16_t) * (size_t)T * Q);
    CK(cuMemsetD8(b->q_out, 0xff, sizeof(uint16_t) * (size_t)T * Q)); /* poison: NaN */
    b->kv = dev_up(h->kv, sizeof(uint16_t) * (size_t)T * kvd);
    b->idx_k = dev_up(h->idx_k, sizeof(uint16_t) * (size_t)T * D);
    b->qw = dev_up(h->qw, sizeof(uint16_t) * Q);
    b->kvw = dev_up(h->kvw, sizeof(uint16_t) * L);
    b->iw = dev_up(h->iw, sizeof(uint16_t) * D);
    b->ib = dev_up(h->ib, sizeof(uint16_t) * D);
    b->pos = dev_up(h->pos, sizeof(int64_t) * (size_t)T);
    b->slot = dev_up(h->slot, sizeof(int64_t) * (size_t)T);
    b->cache = dev_up(h->cache0, cb);
    b->icache = dev_up(h->icache0, ib);
    b->topk = dev_up(h->topk, sizeof(int32_t) * (size_t)T * (size_t)g->topk);
}

static void free_case(host_t *h, bufs_t *b)
{
    CUdeviceptr *d = (CUdeviceptr *)b;
    for (size_t i = 0; i < sizeof *b / sizeof *d; i++)
        cuMemFree(d[i]);
    void *p[] = {h->q_c, h->q_out, h->kv, h->idx_k, h->qw, h->kvw, h->iw, h->ib, h->pos,
                 h->slot, h->cache, h->cache0, h->icache, h->icache0, h->topk};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

static dsa_prologue_args_t args_of(const host_t *h, const bufs_t *b, int indexer, int clear)
{
    dsa_prologue_args_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.num_tokens = h->T;
    a.q_c = (void *)b->q_c;
    a.q_c_out = (void *)b->q_out;
    a.kv = (void *)b->kv;
    a.idx_k = indexer ? (void *)b->idx_k : NULL;
    a.positions = (const int64_t *)b->pos;
    a.slot_mapping = (const int64_t *)b->slot;
    a.q_norm_w = (void *)b->qw;
    a.kv_norm_w = (void *)b->kvw;
    a.idx_norm_w = (void *)b->iw;
    a.idx_norm_b = (void *)b->ib;
    a.kv_cache = (void *)b->cache;
    a.idx_cache = (void *)b->icache;
    a.num_cache_blocks = h->blocks;
    a.topk = (int32_t *)b->topk;
    a.clear_topk = clear;
    return a;
}

/* Checks everything the prologue wrote (and did not write) against the reference. */
static int verify(const geo_t *g, host_t *h, bufs_t *b, int indexer, int clear)
{
    int T = h->T;
    size_t cb = (size_t)(h->blocks * g->bs) * (size_t)g->bpt, ib = (size_t)h->blocks * (size_t)g->page;
    const int L = g->L, R = g->R, D = g->D, sc_at = g->info.cache_scale_offset, rope_at = g->info.cache_rope_offset;
    dev_get(h->q_out, b->q_out, sizeof(uint16_t) * (size_t)T * (size_t)g->q);
    dev_get(h->cache, b->cache, cb);
    dev_get(h->icache, b->icache, ib);
    dev_get(h->topk, b->topk, sizeof(int32_t) * (size_t)T * (size_t)g->topk);
    int bad_q = 0, bad_topk = 0, bad_entry = 0, bad_idx = 0, bad_rt = 0, bad_untouched = 0;
    float *x = malloc(sizeof(float) * (size_t)g->q), *w = malloc(sizeof(float) * (size_t)g->q),
          *o = malloc(sizeof(float) * (size_t)g->q);
    for (int i = 0; i < g->q; i++)
        w[i] = bf(h->qw[i]);
    char *owned = calloc((size_t)(h->blocks * g->bs), 1);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < g->q; i++)
            x[i] = bf(h->q_c[(size_t)t * (size_t)g->q + (size_t)i]);
        ref_rmsnorm(x, w, g->q, g->eps, o);
        for (int i = 0; i < g->q; i++)
            bad_q += !within_bf16_ulp(bf(h->q_out[(size_t)t * (size_t)g->q + (size_t)i]), o[i]);
        for (int i = 0; i < g->topk; i++)
            bad_topk += h->topk[(size_t)t * (size_t)g->topk + (size_t)i] != (clear ? -1 : 0x7eadbeef);
        if (h->slot[t] < 0)
            continue;
        int64_t s = h->slot[t];
        owned[s] = 1;
        float latent[L], rope[R], k[D], dl[L], dr[R];
        ref_token(g, h, t, latent, rope, k);
        uint8_t want[g->bpt];
        const uint8_t *got = h->cache + (size_t)s * (size_t)g->bpt;
        if (g->fmt == DSA_CACHE_BF16) {
            ref_bf16_cache_encode(latent, rope, L, R, want);
            ref_bf16_cache_decode(got, L, R, dl, dr);
            for (int i = 0; i < L; i++)
                bad_entry += !within_bf16_ulp(dl[i], latent[i]);
            for (int i = 0; i < R; i++)
                bad_entry += !bf16_exact(dr[i], rope[i]);
        } else if (g->fmt == DSA_CACHE_FP8_DS_MLA) {
            ref_fp8_ds_mla_encode(latent, rope, L, R, g->info.fp8_scale_pow2, want);
            for (int j = 0; j < L / 128; j++) { /* one fp32 scale per 128 latent values */
                float sg, sw;
                memcpy(&sg, got + sc_at + 4 * j, 4);
                memcpy(&sw, want + sc_at + 4 * j, 4);
                bad_entry += !(fabsf(sg - sw) <= 1e-6f * sw);
            }
            for (int i = 0; i < L; i++)
                bad_entry += !code_close(got[i], want[i]);
            ref_fp8_ds_mla_decode(got, L, R, dl, dr);
            for (int i = 0; i < R; i++)
                bad_entry += !bf16_exact(dr[i], rope[i]);
            for (int i = 0; i < L; i++) {
                float sc;
                memcpy(&sc, got + sc_at + 4 * (i / 128), 4);
                bad_rt += !(fabsf(dl[i] - latent[i]) <= fmaxf(fabsf(latent[i]) * 0x1p-3f, 0x1p-9f * sc));
            }
        } else {
            ref_nvfp4_ds_mla_encode(latent, rope, L, R, want);
            for (int sblk = 0; sblk < L / 16; sblk++) { /* one e4m3 scale per 16 latent values */
                int at = sc_at + ref_nvfp4_scale_byte(sblk, L);
                bad_entry += !code_close(got[at], want[at]);
                if (got[at] == want[at])
                    for (int i = 16 * sblk; i < 16 * sblk + 16; i++) {
                        int cg = (got[i / 2] >> (4 * (i & 1))) & 0xf, cw = (want[i / 2] >> (4 * (i & 1))) & 0xf;
                        bad_entry += cg != cw && !((cg & 8) == (cw & 8) && abs((cg & 7) - (cw & 7)) <= 1) &&
                                     !((cg & 7) == 0 && (cw & 7) <= 1) && !((cw & 7) == 0 && (cg & 7) <= 1);
                    }
            }
            for (int i = 0; i < R; i++)
                bad_entry += got[rope_at + i] != want[rope_at + i]; /* rope e4m3 codes: exact */
            ref_nvfp4_ds_mla_decode(got, L, R, dl, dr);
            for (int i = 0; i < L; i++) {
                float sc = ref_e4m3_decode(got[sc_at + ref_nvfp4_scale_byte(i / 16, L)]);
                bad_rt += !(fabsf(dl[i] - latent[i]) <= 2.0f * sc); /* one widest e2m1 step (2) */
            }
        }
        if (indexer) {
            uint8_t page_want[g->page];
            const uint8_t *page = h->icache + (size_t)(s / g->bs) * (size_t)g->page;
            int off = (int)(s % g->bs);
            memcpy(page_want, page, (size_t)g->page);
            ref_indexer_encode(k, D, g->bs, off, page_want);
            float sg, sw;
            memcpy(&sg, page + g->bs * D + 4 * off, 4);
            memcpy(&sw, page_want + g->bs * D + 4 * off, 4);
            bad_idx += sg != sw;
            for (int i = 0; i < D; i++)
                bad_idx += !code_close(page[off * D + i], page_want[off * D + i]);
            float dk[D];
            ref_indexer_decode(page, D, g->bs, off, dk);
            for (int i = 0; i < D; i++)
                bad_rt += !(fabsf(dk[i] - k[i]) <= fmaxf(fabsf(k[i]) * 0x1p-3f, 0x1p-9f * sg));
        }
    }
    /* nothing outside owned slots changed, byte for byte */
    for (int64_t s = 0; s < h->blocks * g->bs; s++) {
        if (owned[s])
            continue;
        size_t at = (size_t)s * (size_t)g->bpt;
        bad_untouched += memcmp(h->cache + at, h->cache0 + at, (size_t)g->bpt) != 0;
        size_t pa = (size_t)(s / g->bs) * (size_t)g->page, off = (size_t)(s % g->bs), d = (size_t)D;
        bad_untouched += memcmp(h->icache + pa + off * d, h->icache0 + pa + off * d, d) != 0;
        bad_untouched += memcmp(h->icache + pa + (size_t)g->bs * d + 4 * off,
                                h->icache0 + pa + (size_t)g->bs * d + 4 * off, 4) != 0;
    }
    if (!indexer)
        bad_untouched += memcmp(h->icache, h->icache0, ib) != 0;
    free(x);
    free(w);
    free(o);
    free(owned);
    int bad = bad_q + bad_topk + bad_entry + bad_idx + bad_rt + bad_untouched;
    if (bad)
        printf("FAIL %s T=%d: q_c_out %d, topk %d, cache entry %d, indexer %d, round trip %d, untouched %d\n",
               g->name, T, bad_q, bad_topk, bad_entry, bad_idx, bad_rt, bad_untouched);
    return bad == 0;
}

static void test_config(const char *name)
{
    geo_t g;
    if (harness_geo(name, &g) != 0) { /* it says why */
        check_failed++;
        return;
    }
    dsa_options_t o = harness_options();
    o.max_tokens = 1000; /* T = 4096 runs as 5 launches: chunking is exercised */
    dsa_ctx_t ctx;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    dsa_result_t r = create(&g, &o, &ctx);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r != DSA_SUCCESS) {
        printf("FAIL %s: dsa_ctx_create: %s: %s\n", name, dsa_strerror(r), dsa_last_error(NULL));
        check_failed++;
        return;
    }
    const dsa_kernel_info_t *info;
    int nk = dsa_ctx_kernels(ctx, &info);
    for (int i = 0; i < nk; i++)
        printf("  %s: ctx_create %.1f ms; kernel %s %s in %.1f ms, %d registers, %d local bytes, %zu-byte cubin\n",
               name, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, info[i].name,
               info[i].from_cache ? "loaded from cache" : "compiled", info[i].compile_ms, info[i].registers,
               info[i].local_bytes, info[i].cubin_bytes);
    const int Ts[] = {1, 4, 17, 512, 4096};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        host_t h;
        bufs_t b;
        make_case(&g, Ts[i], 60, &h, &b);
        dsa_prologue_args_t a = args_of(&h, &b, 1, 1);
        r = dsa_prologue(ctx, &a, NULL);
        CHECK(r == DSA_SUCCESS);
        CK(cuCtxSynchronize());
        CHECK(verify(&g, &h, &b, 1, 1));
        free_case(&h, &b);
    }
    /* A layer that shares the previous top-k and has no indexer: sentinel top-k stays, indexer
     * cache untouched. */
    {
        host_t h;
        bufs_t b;
        make_case(&g, 33, 60, &h, &b);
        dsa_prologue_args_t a = args_of(&h, &b, 0, 0);
        CHECK(dsa_prologue(ctx, &a, NULL) == DSA_SUCCESS);
        CK(cuCtxSynchronize());
        CHECK(verify(&g, &h, &b, 0, 0));
        free_case(&h, &b);
    }
    dsa_ctx_destroy(ctx);
}

/* The defect dsagen exists to prevent (vLLM 50095): a rank that owns no slot of any token must
 * still normalise every query. Every slot -1, indexer on: q_c_out equals the reference, both
 * caches byte-identical to their poisoned state, top-k all -1. */
static void test_norm_before_slot_check_all_slots_negative(const char *name)
{
    geo_t g;
    if (harness_geo(name, &g) != 0) {
        check_failed++;
        return;
    }
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(create(&g, &o, &ctx) == DSA_SUCCESS);
    host_t h;
    bufs_t b;
    make_case(&g, 257, 0, &h, &b); /* owned_percent 0: every slot -1 */
    dsa_prologue_args_t a = args_of(&h, &b, 1, 1);
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_SUCCESS);
    CK(cuCtxSynchronize());
    CHECK(verify(&g, &h, &b, 1, 1));
    size_t cb = (size_t)(h.blocks * g.bs) * (size_t)g.bpt, ib = (size_t)h.blocks * (size_t)g.page;
    CHECK(memcmp(h.cache, h.cache0, cb) == 0);
    CHECK(memcmp(h.icache, h.icache0, ib) == 0);
    free_case(&h, &b);
    dsa_ctx_destroy(ctx);
}

/* Slots beyond the cache and positions beyond the rope table are counted, never written. */
static void test_rejected(const char *name)
{
    geo_t g;
    if (harness_geo(name, &g) != 0) {
        check_failed++;
        return;
    }
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(create(&g, &o, &ctx) == DSA_SUCCESS);
    host_t h;
    bufs_t b;
    make_case(&g, 64, 100, &h, &b);
    int64_t slots = h.blocks * g.bs;
    h.slot[3] = slots;          /* one past the end */
    h.slot[5] = slots + 12345;
    h.pos[7] = g.maxpos;        /* one past the table */
    h.pos[9] = -2;
    dev_put(b.slot, h.slot, sizeof(int64_t) * (size_t)h.T);
    dev_put(b.pos, h.pos, sizeof(int64_t) * (size_t)h.T);
    dsa_prologue_args_t a = args_of(&h, &b, 1, 1);
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_SUCCESS);
    uint64_t counts[2] = {0, 0};
    CHECK(dsa_take_rejected(ctx, counts) == DSA_SUCCESS);
    CHECK_EQ_INT(counts[0], 2);
    CHECK_EQ_INT(counts[1], 2);
    /* the verifier must not expect entries for the rejected tokens */
    h.slot[3] = h.slot[5] = h.slot[7] = h.slot[9] = -1;
    CHECK(verify(&g, &h, &b, 1, 1));
    CHECK(dsa_take_rejected(ctx, counts) == DSA_SUCCESS && counts[0] == 0 && counts[1] == 0);
    free_case(&h, &b);
    dsa_ctx_destroy(ctx);
}

/* The per-layer call can be captured in a CUDA graph and replayed. */
static void test_graph_capture(const char *name)
{
    geo_t g;
    if (harness_geo(name, &g) != 0) {
        check_failed++;
        return;
    }
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(create(&g, &o, &ctx) == DSA_SUCCESS);
    host_t h;
    bufs_t b;
    make_case(&g, 300, 60, &h, &b);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    dsa_prologue_args_t a = args_of(&h, &b, 1, 1);
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(dsa_prologue(ctx, &a, s) == DSA_SUCCESS);
    CUgraph graph;
    CUgraphExec exec;
    CK(cuStreamEndCapture(s, &graph));
    CK(cuGraphInstantiate(&exec, graph, 0));
    CK(cuGraphLaunch(exec, s));
    CK(cuGraphLaunch(exec, s)); /* replay: same inputs, same result */
    CK(cuStreamSynchronize(s));
    CHECK(verify(&g, &h, &b, 1, 1));
    cuGraphExecDestroy(exec);
    cuGraphDestroy(graph);
    cuStreamDestroy(s);
    free_case(&h, &b);
    dsa_ctx_destroy(ctx);
}

static void test_bad_arguments(const char *name)
{
    dsa_ctx_t ctx;
    dsa_options_t o = harness_options();
    CHECK(dsa_ctx_create("no_such_config", &o, &ctx) == DSA_ERROR_INVALID_ARGUMENT && ctx == NULL);
    CHECK(strstr(dsa_last_error(NULL), "no configuration named 'no_such_config'") != NULL);
    geo_t g;
    if (harness_geo(name, &g) != 0) {
        check_failed++;
        return;
    }
    CHECK(create(&g, &o, &ctx) == DSA_SUCCESS);
    host_t h;
    bufs_t b;
    make_case(&g, 8, 50, &h, &b);
    dsa_prologue_args_t a = args_of(&h, &b, 1, 1);
    a.kv = NULL;
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(dsa_last_error(ctx), "dsa_prologue: args->kv is NULL") == 0);
    a = args_of(&h, &b, 1, 1);
    a.num_tokens = -1;
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(dsa_last_error(ctx), "dsa_prologue: args->num_tokens is -1, must be >= 0") == 0);
    a = args_of(&h, &b, 1, 1);
    a.q_c = (const char *)a.q_c + 2;
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(dsa_last_error(ctx), "dsa_prologue: args->q_c is not 16-byte aligned") == 0);
    a = args_of(&h, &b, 1, 1);
    a.idx_cache = NULL;
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    a = args_of(&h, &b, 1, 1);
    a.num_cache_blocks = 0;
    CHECK(dsa_prologue(ctx, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_prologue(NULL, &a, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    CHECK(dsa_prologue(ctx, NULL, NULL) == DSA_ERROR_INVALID_ARGUMENT);
    free_case(&h, &b);
    dsa_ctx_destroy(ctx);
    dsa_ctx_destroy(NULL);
}

int main(int argc, char **argv)
{
    harness_start("test_prologue"); /* SKIPPED without a CUDA device */
    harness_rng = (unsigned)time(NULL);
    printf("test_prologue: seed %u\n", harness_rng);
    const char *only = argc > 1 ? argv[1] : NULL;
    for (const char *const *n = dsa_configs(); *n; n++) {
        if (only && !strstr(*n, only))
            continue;
        int before = check_failed;
        test_config(*n);
        printf("%s %s\n", check_failed == before ? "ok  " : "FAIL", *n);
    }
    test_norm_before_slot_check_all_slots_negative("glm5.2_tp4_dcp4_i1_fp8_ds_mla");
    test_norm_before_slot_check_all_slots_negative("deepseek_v32_tp8_dcp8_i1_fp8_ds_mla");
    test_rejected("tiny_tp4_dcp2_i1_nvfp4_ds_mla");
    test_graph_capture("glm5.2_tp4_dcp4_i1_fp8_ds_mla");
    test_bad_arguments("tiny_tp4_dcp1_i1_bf16");
    CHECK_DONE();
}
