/* Stage B (the indexer) on the CPU: the reference's rules pinned by hand-checked values (the total
 * order, relu, the weight formula, query prep, the score, the merge), then the DCP simulation: W
 * ranks, each with its own shard of the indexer K cache (written by ref_indexer_encode through
 * random block tables), score their own keys, keep a local top-k and merge the all-gathered lists;
 * every rank's rows must equal DCP = 1 on the same inputs bit for bit, for W in 1, 2, 4, 8 and
 * interleave 1 and 4. DCP = 1 is itself checked against an independent selection (every
 * candidate scored, the top-k taken by counting the candidates ranked before each one). Worlds
 * include exact ties across ranks (keys drawn from a pool of 3, or one key everywhere), requests
 * shorter than K, ranks owning no key of a row, rows with no key (absent blocks, an empty
 * request, bad request indices or positions), prefill rows of several requests, NaN and inf in
 * queries, weights, keys and key scales, -0 against +0, and K above and below the candidate count;
 * and the shipped geometries (DeepSeek-V3.2: 64 heads NeoX, GLM-5.2: 32 heads interleaved, K 2048,
 * bs 64). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "index.h"
#include "index_world.h"
#include "ref.h"

/* ---- unit checks of the rules ---- */

static void test_order(void)
{
    CHECK(ref_index_before(2.0f, 9, 1.0f, 0));          /* higher score first */
    CHECK(!ref_index_before(1.0f, 0, 2.0f, 9));
    CHECK(ref_index_before(1.0f, 3, 1.0f, 4));           /* tie: smaller position */
    CHECK(!ref_index_before(1.0f, 4, 1.0f, 3));
    CHECK(ref_index_before(-0.0f, 3, 0.0f, 4));          /* -0 == +0: tie by position */
    CHECK(ref_index_before(0.0f, 3, -0.0f, 4));
    CHECK(!ref_index_before(-0.0f, 4, 0.0f, 3));
    CHECK(!ref_index_before(0.0f, 4, -0.0f, 3));
    CHECK(ref_index_before(INFINITY, 1, INFINITY, 2));   /* equal infinities tie */
    CHECK(!ref_index_before(INFINITY, 2, INFINITY, 1));
    CHECK(ref_index_before(-INFINITY, 9, NAN, 0));       /* NaN below every number */
    CHECK(!ref_index_before(NAN, 0, -INFINITY, 9));
    CHECK(!ref_index_before(NAN, 0, -1e30f, 9));
    CHECK(ref_index_before(NAN, 1, NAN, 2));             /* two NaNs: by position */
    CHECK(!ref_index_before(NAN, 2, -NAN, 1));
    CHECK(!ref_index_before(5.0f, 7, 5.0f, 7));          /* irreflexive */
}

static void test_relu_weight_qscale(void)
{
    CHECK(ref_index_relu(2.5f) == 2.5f);
    CHECK(ref_index_relu(-1.0f) == 0.0f && !signbit(ref_index_relu(-1.0f)));
    CHECK(ref_index_relu(-0.0f) == 0.0f && !signbit(ref_index_relu(-0.0f))); /* -0 -> +0 */
    CHECK(isnan(ref_index_relu(NAN)));                                      /* NaN stays */
    CHECK(ref_index_relu(-INFINITY) == 0.0f && ref_index_relu(INFINITY) == INFINITY);
    /* w' = ((w * q_scale) * (1/sqrtf(D))) * (1/sqrtf(H)), left to right: these two values differ
     * from w q_scale (1/sqrtf(D) 1/sqrtf(H)) and from w q_scale / sqrtf(D H) respectively */
    CHECK(1.0f / sqrtf(128.0f) == 0x1.6a09e6p-4f && 1.0f / sqrtf(32.0f) == 0x1.6a09e6p-3f);
    CHECK(ref_index_weight(-0x1.0dde9cp-1f, 0x1p-8f, 128, 32) == -0x1.0dde9cp-15f);
    CHECK(ref_index_weight(0x1.a399dp-2f, 0x1p-8f, 128, 32) == 0x1.a399cep-16f);
    CHECK(ref_index_weight(1.0f, 0x1p-8f, 128, 64) == 0x1.6a09e6p-15f); /* 64^-0.5 is exact */
    CHECK(isnan(ref_index_weight(0.0f, INFINITY, 128, 64)));
    CHECK(ref_index_qscale(448.0f) == 1.0f);
    CHECK(ref_index_qscale(1.0f) == 0x1p-8f);   /* 2^ceil(log2(1/448)) */
    CHECK(ref_index_qscale(0.0f) == 0x1p-22f);  /* max(amax, 1e-4) / 448 = 2.2e-7 -> 2^-22 */
    CHECK(ref_index_qscale(INFINITY) == INFINITY);
}

static ref_index_cfg unit_cfg(int hadamard, int rope_first)
{
    ref_index_cfg c;
    memset(&c, 0, sizeof c);
    c.H = 1, c.D = 128, c.K = 4, c.bs = 16;
    c.rope = (ref_rope){64, 10000.0, 0, 1.0, 0, 0, 1.0, 0};
    c.rope_first = rope_first, c.hadamard = hadamard;
    return c;
}

static void test_query_prep(void)
{
    uint16_t q[128];
    uint8_t q8[128];
    float s, we, w = 0.75f;
    ref_index_cfg c = unit_cfg(0, 1);
    memset(q, 0, sizeof q);
    q[0] = ref_bf16_encode(1.0f);
    /* position 0: cos 1, sin 0, so the rope leaves e0; amax 1 -> scale 2^-8, 1 / 2^-8 = 256 = 0x78 */
    ref_index_query_prep(&c, q, &w, 0, q8, &s, &we);
    int rest0 = 1;
    for (int i = 1; i < 128; i++)
        rest0 &= q8[i] == 0;
    CHECK(q8[0] == 0x78 && rest0 && s == 0x1p-8f);
    CHECK(we == ((0.75f * 0x1p-8f) * (1.0f / sqrtf(128.0f))) * 1.0f);
    /* Hadamard: e0 -> every dim 2^-3.5 (0x1.6a09e6p-4f); scale 2^-12; 362.04 -> 352 = 0x7b */
    c.hadamard = 1;
    ref_index_query_prep(&c, q, &w, 0, q8, &s, &we);
    int all = 1;
    for (int i = 0; i < 128; i++)
        all &= q8[i] == 0x7b;
    CHECK(all && s == 0x1p-12f);
    /* NaN at dim 5 (no Hadamard): NeoX pair (5, 37) both NaN, amax ignores it */
    c.hadamard = 0;
    q[5] = 0x7fc0;
    ref_index_query_prep(&c, q, &w, 0, q8, &s, &we);
    CHECK(q8[5] == 0x7f && q8[37] == 0x7f && q8[0] == 0x78 && q8[6] == 0 && s == 0x1p-8f);
    /* +inf at dim 0: x0 = inf, x32 = inf * 0 = NaN; amax inf -> scale inf, w' inf */
    q[5] = 0;
    q[0] = 0x7f80;
    ref_index_query_prep(&c, q, &w, 0, q8, &s, &we);
    CHECK(s == INFINITY && we == INFINITY && q8[0] == 0x7f && q8[32] == 0x7f && q8[1] == 0 && q8[127] == 0);
    /* rope on the last 64 dims at position 1000: the first 64 stay as they are */
    c.rope_first = 0;
    for (int i = 0; i < 128; i++)
        q[i] = ref_bf16_encode(1.0f);
    ref_index_query_prep(&c, q, &w, 1000, q8, &s, &we);
    int kept = 1, moved = 0;
    for (int i = 0; i < 64; i++)
        kept &= q8[i] == ref_e4m3_encode(1.0f / s);
    for (int i = 64; i < 128; i++)
        moved += q8[i] != q8[0];
    CHECK(kept && moved > 0);
    /* the same through the rope function directly (two products, one subtraction, no FMA) */
    float x[128], cs[32], sn[32];
    for (int i = 0; i < 128; i++)
        x[i] = 1.0f;
    ref_rope_cos_sin(&c.rope, 1000, cs, sn);
    ref_rope_apply(x + 64, 64, cs, sn, 0);
    volatile float p0 = 1.0f * cs[3], p1 = 1.0f * sn[3];
    CHECK(x[64 + 3] == p0 - p1 && x[64 + 3 + 32] == p1 + p0);
}

static void test_score(void)
{
    float qd[256], kd[128], we[2] = {0.5f, 7.0f};
    memset(qd, 0, sizeof qd);
    memset(kd, 0, sizeof kd);
    qd[0] = 2, qd[1] = 3, qd[128] = -1;
    kd[0] = 1, kd[1] = 1;
    CHECK(ref_index_score(2, 128, qd, we, kd, 4.0f) == 10.0f); /* 4 (0.5 * 5 + 7 * relu(-1)) */
    CHECK(ref_index_score(2, 128, qd, we, kd, -1.0f) == -2.5f);
    we[1] = INFINITY; /* inf * relu(-1) = inf * 0 = NaN */
    CHECK(isnan(ref_index_score(2, 128, qd, we, kd, 4.0f)));
    we[1] = 7.0f;
    kd[2] = NAN; /* 0 * NaN in both heads */
    CHECK(isnan(ref_index_score(2, 128, qd, we, kd, 4.0f)));
    kd[2] = 0;
    memset(qd, 0, sizeof qd);
    float z = ref_index_score(2, 128, qd, we, kd, 1.0f), nz = ref_index_score(2, 128, qd, we, kd, -1.0f);
    CHECK(z == 0 && !signbit(z) && nz == 0 && signbit(nz)); /* +0 accumulator; a negative scale gives -0 */
    we[0] = -0.5f, we[1] = -7.0f; /* terms -0: the sums start from +0, so +0 + -0 = +0 */
    z = ref_index_score(2, 128, qd, we, kd, 1.0f);
    CHECK(z == 0 && !signbit(z));
    CHECK(isnan(ref_index_score(2, 128, qd, we, kd, NAN)));
}

static void test_merge(void)
{
    ref_index_cfg c = unit_cfg(0, 1);
    c.K = 4;
    int32_t out[4];
    /* rank 0: 5 at 10, NaN at 2, then padding whose score (+inf) must be ignored;
     * rank 1: +0 at 7, -0 at 3, inf at 8, -inf at 1 (merge does not rely on list order) */
    ref_index_cand g[8] = {{5, 10}, {NAN, 2}, {INFINITY, -1}, {INFINITY, -1},
                           {0.0f, 7}, {-0.0f, 3}, {INFINITY, 8}, {-INFINITY, 1}};
    CHECK_EQ_INT(ref_index_merge(&c, g, 2, out), 4);
    CHECK(out[0] == 3 && out[1] == 7 && out[2] == 8 && out[3] == 10); /* inf 8, 5 10, 0 3, 0 7 */
    g[4].pos = -1, g[5].pos = -1, g[6].pos = -1; /* three left: 10, 1 (-inf), 2 (NaN) */
    CHECK_EQ_INT(ref_index_merge(&c, g, 2, out), 3);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 10 && out[3] == -1);
    for (int i = 0; i < 8; i++)
        g[i].pos = -1;
    CHECK_EQ_INT(ref_index_merge(&c, g, 2, out), 0);
    CHECK(out[0] == -1 && out[3] == -1);
}

/* ---- the DCP simulation ---- */

typedef struct stats {
    int rows, empty_rows, short_rows, cut_rows, cut_ties, idle_rank_rows, nan_rows, inf_rows, mismatch;
} stats_t;

/* Independent of ref_index_before: NaN flag ascending, score descending, position ascending. */
static int oracle_before(float sa, int32_t pa, float sb, int32_t pb)
{
    if (isnan(sa) || isnan(sb))
        return isnan(sa) ? (isnan(sb) && pa < pb) : 1;
    return sa > sb || (sa == sb && pa < pb);
}

/* Row t at DCP = 1 by brute force from the unsharded cache: expected [K], returns its count. */
static int oracle_row(const iworld_t *w, int t, int32_t *expect, stats_t *st)
{
    const ref_index_cfg *c = &w->cfg;
    int H = c->H, D = c->D, K = c->K, bs = c->bs;
    for (int k = 0; k < K; k++)
        expect[k] = -1;
    int req = w->req_of[t];
    int64_t p = w->positions[t];
    if (req < 0 || req >= w->nreq || p < 0 || p > INT32_MAX || w->seq_lens[req] <= 0) {
        st->empty_rows++;
        return 0;
    }
    int64_t last = p < w->seq_lens[req] - 1 ? p : w->seq_lens[req] - 1;
    float *score = malloc(sizeof(float) * (size_t)(last + 1));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(last + 1));
    uint8_t *q8 = malloc((size_t)H * (size_t)D);
    float *qd = malloc(sizeof(float) * (size_t)H * (size_t)D), *we = malloc(sizeof(float) * (size_t)H);
    float *kd = malloc(sizeof(float) * (size_t)D);
    ref_index_query_prep(c, w->q + (size_t)t * (size_t)H * (size_t)D, w->w + (size_t)t * (size_t)H, (int)p, q8, NULL,
                         we);
    for (int i = 0; i < H * D; i++)
        qd[i] = ref_e4m3_decode(q8[i]);
    int n = 0;
    for (int64_t g = 0; g <= last; g++) {
        int64_t slot = iworld_slot(w, w->W, req, g);
        if (slot < 0)
            continue;
        const uint8_t *page = w->cache[w->W].pages + (size_t)(slot / bs) * (size_t)bs * (size_t)(D + 4);
        for (int i = 0; i < D; i++)
            kd[i] = ref_e4m3_decode(page[(size_t)(slot % bs) * (size_t)D + (size_t)i]);
        float ks;
        memcpy(&ks, page + (size_t)bs * (size_t)D + 4 * (size_t)(slot % bs), 4);
        score[n] = ref_index_score(H, D, qd, we, kd, ks);
        pos[n++] = (int32_t)g;
    }
    /* the k-th ranked candidate for every k, by counting */
    int32_t *at = malloc(sizeof(int32_t) * (size_t)(n + 1));
    for (int j = 0; j < n; j++) {
        int before = 0;
        for (int i = 0; i < n; i++)
            before += oracle_before(score[i], pos[i], score[j], pos[j]);
        at[before] = j;
    }
    int m = 0;
    for (int r = 0; r < n && r < K; r++)
        expect[m++] = pos[at[r]];
    for (int a = 1; a < m; a++) /* insertion sort into ascending positions */
        for (int b = a; b > 0 && expect[b - 1] > expect[b]; b--) {
            int32_t tmp = expect[b];
            expect[b] = expect[b - 1];
            expect[b - 1] = tmp;
        }
    st->rows++;
    st->empty_rows += n == 0;
    st->short_rows += n > 0 && n < K;
    if (n > K) {
        st->cut_rows++;
        float a = score[at[K - 1]], b = score[at[K]];
        st->cut_ties += a == b || (isnan(a) && isnan(b));
    }
    int any_nan = 0, any_inf = 0;
    for (int i = 0; i < n; i++)
        any_nan |= isnan(score[i]) != 0, any_inf |= isinf(score[i]) != 0;
    st->nan_rows += any_nan;
    st->inf_rows += any_inf;
    if (n > 0 && w->W > 1) { /* does some rank own none of the row's keys? */
        int idle = 0;
        for (int r = 0; r < w->W; r++) {
            int has = 0;
            for (int64_t g = 0; g <= last && !has; g++)
                has = iworld_slot(w, r, req, g) >= 0;
            idle += !has;
        }
        st->idle_rank_rows += idle > 0;
    }
    free(score);
    free(pos);
    free(q8);
    free(qd);
    free(we);
    free(kd);
    free(at);
    return m;
}

/* A row's output is valid: strictly ascending positions of the row's request within its causal
 * range and present in the cache, then -1 only. */
static int row_valid(const iworld_t *w, int t, const int32_t *row)
{
    int K = w->cfg.K, k = 0;
    for (; k < K && row[k] >= 0; k++) {
        int req = w->req_of[t];
        if (req < 0 || req >= w->nreq || row[k] > w->positions[t] || row[k] >= w->seq_lens[req] ||
            (k > 0 && row[k] <= row[k - 1]) || iworld_slot(w, w->W, req, row[k]) < 0)
            return 0;
    }
    for (; k < K; k++)
        if (row[k] != -1)
            return 0;
    return 1;
}

static stats_t check_world(const char *what, const iworld_t *w)
{
    stats_t st;
    memset(&st, 0, sizeof st);
    int W = w->W, T = w->T, K = w->cfg.K;
    size_t rowb = sizeof(int32_t) * (size_t)K;
    int32_t *d1 = malloc(rowb * (size_t)T), *dw = malloc(rowb * (size_t)T * (size_t)W), *ex = malloc(rowb);
    ref_index_batch b = iworld_batch(w);
    ref_index_cache whole = iworld_cache(w, W), shards[8];
    for (int s = 0; s < W; s++)
        shards[s] = iworld_cache(w, s);
    ref_index_dcp1(&w->cfg, &b, &whole, d1);
    ref_index_simulate(&w->cfg, W, w->I, &b, shards, dw);
    int bad_oracle = 0, bad_valid = 0, bad_dcp = 0;
    for (int t = 0; t < T; t++) {
        const int32_t *row = d1 + (size_t)t * (size_t)K;
        int n = oracle_row(w, t, ex, &st);
        if (memcmp(ex, row, rowb) != 0) {
            if (!bad_oracle)
                printf("FAIL %s: row %d (request %d, position %lld): DCP = 1 differs from the oracle (%d keys)\n", what,
                       t, w->req_of[t], (long long)w->positions[t], n);
            bad_oracle++;
        }
        bad_valid += !row_valid(w, t, row);
        for (int r = 0; r < W; r++)
            if (memcmp(dw + ((size_t)r * (size_t)T + (size_t)t) * (size_t)K, row, rowb) != 0) {
                if (!bad_dcp)
                    printf("FAIL %s W=%d I=%d: rank %d row %d differs from DCP = 1\n", what, W, w->I, r, t);
                bad_dcp++;
            }
    }
    CHECK(bad_oracle == 0);
    CHECK(bad_valid == 0);
    CHECK(bad_dcp == 0);
    st.mismatch = bad_oracle + bad_valid + bad_dcp;
    free(d1);
    free(dw);
    free(ex);
    return st;
}

/* Requests: short ones (1, 3, 5 keys: below K, some ranks own none), longer ones, an empty one (5)
 * and one whose blocks are absent from every cache (6). Rows: a decode row per request, prefill
 * rows of requests 3, 4 and 1, and a row positioned past its request's end (sees all of it). */
static const int32_t LENS[] = {1, 5, 40, 300, 129, 0, 20, 3};
static const int32_t ROW_REQ[] = {0, 1, 2, 3, 4, 5, 6, 7, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 2, 1};
static const int64_t ROW_POS[] = {0, 4, 39, 299, 128, 0, 19, 2, 0, 1, 15, 16, 17, 150, 298, 3, 64, 100, 60, 2};

static ref_index_cfg small_cfg(int variant, int K)
{
    ref_index_cfg c;
    if (variant == 0) {
        iworld_cfg_of("tiny_", &c); /* 4 heads, NeoX, rope first, Hadamard, YaRN rope, bs 16 */
    } else {
        memset(&c, 0, sizeof c);    /* interleaved, rope on the last dims, no Hadamard, plain rope */
        c.H = 3, c.D = 128, c.bs = 16;
        c.rope = (ref_rope){64, 10000.0, 0, 1.0, 0, 0, 1.0, 0};
        c.rope_interleaved = 1, c.rope_first = 0, c.hadamard = 0;
    }
    c.K = K;
    return c;
}

static iworld_opts_t std_opts(int W, int I, unsigned seed)
{
    iworld_opts_t o;
    memset(&o, 0, sizeof o);
    o.W = W, o.I = I, o.seed = seed;
    o.nreq = (int)(sizeof LENS / sizeof LENS[0]);
    o.lens = LENS;
    o.T = (int)(sizeof ROW_REQ / sizeof ROW_REQ[0]);
    o.row_req = ROW_REQ;
    o.row_pos = ROW_POS;
    o.absent_req = 6;
    return o;
}

static stats_t run_world(const char *what, const ref_index_cfg *c, const iworld_opts_t *o)
{
    iworld_t w;
    iworld_build(&w, c, o);
    stats_t st = check_world(what, &w);
    iworld_free(&w);
    return st;
}

static void test_dcp_grid(unsigned seed)
{
    const int Ws[] = {1, 2, 4, 8}, Is[] = {1, 4};
    stats_t tie_total, nf_total;
    memset(&tie_total, 0, sizeof tie_total);
    memset(&nf_total, 0, sizeof nf_total);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            int W = Ws[i], I = Is[j];
            unsigned s = seed + (unsigned)(i * 2 + j) * 101u;
            /* independent random keys, K 16: long rows are cut, short ones take all */
            ref_index_cfg c = small_cfg(0, 16);
            iworld_opts_t o = std_opts(W, I, s);
            stats_t st = run_world("random keys", &c, &o);
            CHECK(st.cut_rows > 0 && st.short_rows > 0 && st.empty_rows >= 2);
            if (W > 1)
                CHECK(st.idle_rank_rows > 0); /* e.g. the 1-key request: ranks 1.. own nothing */
            /* keys drawn from 3 vectors per request: exact ties straddling the cut, across ranks */
            c = small_cfg(1, j == 0 ? 16 : 64);
            o = std_opts(W, I, s + 1);
            o.key_pool = 3;
            st = run_world("pooled keys (exact ties)", &c, &o);
            tie_total.cut_ties += st.cut_ties;
            CHECK(st.cut_ties > 0);
            /* NaN and inf in queries, weights and keys */
            c = small_cfg((i + j) % 2, 32);
            o = std_opts(W, I, s + 2);
            o.nonfinite = 1;
            o.nan_keys = 7;
            st = run_world("NaN and inf", &c, &o);
            nf_total.nan_rows += st.nan_rows;
            nf_total.inf_rows += st.inf_rows;
            CHECK(st.nan_rows > 0);
        }
    CHECK(nf_total.inf_rows > 0);
    printf("exact ties at the cut: %d rows; rows with NaN scores %d, with inf scores %d\n", tie_total.cut_ties,
           nf_total.nan_rows, nf_total.inf_rows);
}

/* One key everywhere in a request: every score ties, so the top K are the K smallest positions,
 * which sit on different ranks (I = 1) or on one (I = 4). */
static void test_identical_keys(unsigned seed)
{
    static const int32_t lens[] = {24};
    static const int32_t rq[] = {0, 0};
    static const int64_t rp[] = {23, 2};
    const int Ws[] = {1, 8, 4, 2}, Is[] = {1, 1, 4, 4};
    for (int i = 0; i < 4; i++) {
        ref_index_cfg c = small_cfg(i % 2, 4);
        iworld_opts_t o;
        memset(&o, 0, sizeof o);
        o.W = Ws[i], o.I = Is[i], o.seed = seed + (unsigned)i, o.nreq = 1, o.lens = lens;
        o.T = 2, o.row_req = rq, o.row_pos = rp, o.key_pool = 1, o.absent_req = -1;
        iworld_t w;
        iworld_build(&w, &c, &o);
        check_world("identical keys", &w);
        int32_t out[8 * 2 * 4]; /* [W][T][K] */
        ref_index_batch b = iworld_batch(&w);
        ref_index_cache sh[8];
        for (int s = 0; s < w.W; s++)
            sh[s] = iworld_cache(&w, s);
        ref_index_simulate(&c, w.W, w.I, &b, sh, out);
        for (int r = 0; r < w.W; r++) {
            const int32_t *row0 = out + (r * 2 + 0) * 4, *row1 = out + (r * 2 + 1) * 4;
            CHECK(row0[0] == 0 && row0[1] == 1 && row0[2] == 2 && row0[3] == 3);
            CHECK(row1[0] == 0 && row1[1] == 1 && row1[2] == 2 && row1[3] == -1); /* prefill at 2: 3 keys < K */
        }
        iworld_free(&w);
    }
}

/* Zero keys score +0; a negative page scale (a corrupt cache) turns a zero score into -0. -0 and
 * +0 tie, so the top K are the smallest positions whatever their signs. */
static void test_signed_zero(unsigned seed)
{
    static const int32_t lens[] = {40};
    static const int32_t rq[] = {0};
    static const int64_t rp[] = {39};
    const int Ws[] = {1, 4, 2}, Is[] = {1, 1, 4};
    float zero[128] = {0};
    for (int i = 0; i < 3; i++) {
        ref_index_cfg c = small_cfg(i % 2, 16);
        iworld_opts_t o;
        memset(&o, 0, sizeof o);
        o.W = Ws[i], o.I = Is[i], o.seed = seed + (unsigned)i, o.nreq = 1, o.lens = lens;
        o.T = 1, o.row_req = rq, o.row_pos = rp, o.absent_req = -1;
        iworld_t w;
        iworld_build(&w, &c, &o);
        for (int g = 0; g < 40; g++) {
            iworld_put_key(&w, 0, g, zero);
            if (g % 2 == 1 || g < 6)
                iworld_put_scale(&w, 0, g, -1.0f); /* -0: positions 0-5 and every odd one */
        }
        ref_index_cand list[16];
        ref_index_batch b = iworld_batch(&w);
        ref_index_cache whole = iworld_cache(&w, w.W);
        CHECK_EQ_INT(ref_index_local(&c, 1, 1, 0, &b, &whole, 0, list, NULL), 16);
        int neg = 0, pos_ok = 1;
        for (int k = 0; k < 16; k++) {
            neg += signbit(list[k].score) != 0 && list[k].score == 0;
            pos_ok &= list[k].pos == k; /* position order within the tie */
        }
        CHECK(neg == 11 && pos_ok); /* -0 at 0-5, 7, 9, 11, 13, 15; +0 at 6, 8, 10, 12, 14 */
        int32_t row[16];
        ref_index_row(&c, &b, &whole, 0, row);
        int first16 = 1;
        for (int k = 0; k < 16; k++)
            first16 &= row[k] == k;
        CHECK(first16);
        check_world("-0 and +0", &w);
        iworld_free(&w);
    }
}

/* Rows with no candidates from bad inputs: a request index out of range, a negative position, a
 * position past INT32_MAX; and blocks missing from a table or pointing past the cache (absent keys). */
static void test_bad_rows(unsigned seed)
{
    ref_index_cfg c = small_cfg(0, 16);
    iworld_opts_t o = std_opts(4, 1, seed);
    iworld_t w;
    iworld_build(&w, &c, &o);
    w.req_of[0] = -1;
    w.req_of[1] = w.nreq;
    w.positions[2] = -5;
    w.positions[3] = (int64_t)INT32_MAX + 1;
    stats_t st = check_world("bad rows", &w);
    CHECK(st.empty_rows >= 6);
    ref_index_batch b = iworld_batch(&w);
    ref_index_cache whole = iworld_cache(&w, w.W);
    int32_t row[16];
    int none = 1;
    for (int t = 0; t < 4; t++) {
        none &= ref_index_row(&c, &b, &whole, t, row) == 0;
        for (int k = 0; k < 16; k++)
            none &= row[k] == -1;
    }
    CHECK(none);
    /* request 3's first block cleared in the unsharded table, its second pointing past the cache:
     * the DCP = 1 row at position 298 (299 keys) has neither positions 0..15 nor 16..31 */
    iworld_cache_t *u = &w.cache[w.W];
    u->table[3 * u->max_blocks + 0] = -1;
    u->table[3 * u->max_blocks + 1] = (int32_t)u->num_blocks; /* positions 16..31 past the cache */
    ref_index_cand list[16];
    int64_t n;
    CHECK(w.req_of[14] == 3 && w.positions[14] == 298);
    ref_index_local(&c, 1, 1, 0, &b, &whole, 14, list, &n);
    CHECK_EQ_INT(n, 299 - 32);
    int outside = 0;
    for (int k = 0; k < 16; k++)
        outside += list[k].pos < 32;
    CHECK(outside == 0);
    /* a row at a position past the rope table (max_positions) has no keys, however long its request
     * says it is (the kernels' keys workspace holds max_positions / W keys a row): at the last
     * position of the table it has its keys */
    ref_index_cfg bounded = c;
    bounded.max_positions = 299;
    CHECK(w.req_of[14] == 3);
    w.positions[14] = 299;
    CHECK(ref_index_row(&bounded, &b, &whole, 14, row) == 0 && row[0] == -1);
    CHECK(ref_index_row(&c, &b, &whole, 14, row) > 0); /* unbounded: the same row has keys */
    w.positions[14] = 298;
    CHECK(ref_index_row(&bounded, &b, &whole, 14, row) > 0);
    iworld_free(&w);
}

/* The shipped geometries: K 2048 over a request of 2100 keys (cut) and shorter ones. */
static void test_shipped(unsigned seed)
{
    static const int32_t lens[] = {2100, 300, 1};
    static const int32_t rq[] = {0, 1, 2, 0, 0};
    static const int64_t rp[] = {2099, 299, 0, 2060, 700};
    const char *names[] = {"deepseek_v32_tp1_dcp1_i1_fp8_ds_mla", "glm5.2_tp4_dcp4_i4_fp8_ds_mla"};
    const int Ws[] = {2, 4}, Is[] = {1, 4};
    for (int i = 0; i < 2; i++) {
        ref_index_cfg c;
        CHECK(iworld_cfg_of(names[i], &c) == 0);
        CHECK(c.K == 2048 && c.bs == 64 && c.D == 128 && c.H == (i == 0 ? 64 : 32) && c.rope_interleaved == i);
        iworld_opts_t o;
        memset(&o, 0, sizeof o);
        o.W = Ws[i], o.I = Is[i], o.seed = seed + (unsigned)i, o.nreq = 3, o.lens = lens;
        o.T = 5, o.row_req = rq, o.row_pos = rp, o.absent_req = -1, o.key_pool = i == 1 ? 40 : 0;
        stats_t st = run_world(names[i], &c, &o);
        CHECK(st.cut_rows == 2 && st.short_rows == 3);
    }
}

/* ref_index_check_row on rows of t (at DCP = 1): its verdict, and its log must contain want (NULL:
 * the log stays empty). */
static int check_row(const iworld_t *w, int t, const int32_t *got, const int32_t *ref, int *differ, const char *want)
{
    const ref_index_batch b = iworld_batch(w);
    const ref_index_cache whole = iworld_cache(w, w->W);
    char *text = NULL;
    size_t len = 0;
    FILE *log = open_memstream(&text, &len);
    const int ok = ref_index_check_row(&w->cfg, &b, &whole, t, got, ref, differ, log);
    fclose(log);
    const int logged = want ? strstr(text, want) != NULL : len == 0;
    if (!logged)
        printf("FAIL check_row row %d: logged '%s', want '%s'\n", t, text, want ? want : "nothing");
    CHECK(logged);
    free(text);
    return ok;
}

static int row_has(const int32_t *row, int K, int32_t g)
{
    for (int k = 0; k < K; k++)
        if (row[k] == g)
            return 1;
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The rule GPU rows are judged by (ref_index_check_row; test_index and dsa-demo use it): the
 * reference's own row passes silently; a key swapped for one within rounding of the k-th score
 * passes with a note; one swapped for the same key at a larger position (an exact tie broken the
 * wrong way) fails, and so does a key a few ranks below the k-th, a row with fewer keys than the
 * reference, rows out of order, beyond the row's position, with padding in the middle, naming an
 * absent key, or with keys where the row has none. */
static void test_check_row(unsigned seed, int pinned)
{
    const ref_index_cfg c = small_cfg(0, 16);
    const iworld_opts_t o = std_opts(1, 1, seed);
    iworld_t w;
    iworld_build(&w, &c, &o);
    const int K = c.K, t = 3; /* request 3 at position 299: 300 keys, cut to 16 */
    const size_t rowb = sizeof(int32_t) * (size_t)K;
    CHECK(w.req_of[t] == 3 && w.positions[t] == 299);
    ref_index_batch b = iworld_batch(&w);
    ref_index_cache whole = iworld_cache(&w, w.W);
    ref_index_cfg every = c;
    every.K = 300;
    ref_index_cand *order = malloc(sizeof *order * 300);
    CHECK(ref_index_local(&every, 1, 1, 0, &b, &whole, t, order, NULL) == 300);
    const int32_t kth = order[K - 1].pos, next = order[K].pos, low = order[299].pos, near = order[K + 8].pos;
    /* a pinned world is one whose k-th score is positive and whose keys eight ranks below the cut and
     * last lie beyond 2^-2 of the magnitude from it (seeds 1 and 2 of std_opts); in a random world
     * the k-th score may be 0 (ReLU), tied with every key below it, and only the checks that hold
     * for any world run */
    if (pinned)
        CHECK(order[K - 1].score > 0);
    const int bs = c.bs, D = c.D;
    int64_t sk = iworld_slot(&w, w.W, 3, kth), sn = iworld_slot(&w, w.W, 3, next);
    uint8_t *pk = w.cache[w.W].pages + (size_t)(sk / bs) * (size_t)bs * (size_t)(D + 4);
    uint8_t *pn = w.cache[w.W].pages + (size_t)(sn / bs) * (size_t)bs * (size_t)(D + 4);
    uint8_t *scale_n = pn + (size_t)bs * (size_t)D + 4 * (size_t)(sn % bs);
    const uint8_t *scale_k = pk + (size_t)bs * (size_t)D + 4 * (size_t)(sk % bs);
    memcpy(pn + (size_t)(sn % bs) * (size_t)D, pk + (size_t)(sk % bs) * (size_t)D, (size_t)D);
    int32_t *ref = malloc(rowb), *got = malloc(rowb);
    int differ = -1;
    char want[128];
    if (pinned) {
        /* the first key outside the top K takes the k-th key's bytes, its scale 2^-20 larger:
         * within rounding of the k-th score, and now above it; kth in place of next passes, with
         * a note */
        float scale;
        memcpy(&scale, scale_k, 4);
        scale *= 1.0f + 0x1p-20f;
        memcpy(scale_n, &scale, 4);
        CHECK(ref_index_row(&c, &b, &whole, t, ref) == K);
        CHECK(check_row(&w, t, ref, ref, &differ, NULL) == 1 && differ == 0);
        int at = -1;
        for (int k = 0; k < K; k++)
            if (ref[k] == next)
                at = k;
        CHECK(at >= 0 && !row_has(ref, K, kth));
        memcpy(got, ref, rowb);
        got[at >= 0 ? at : 0] = kth;
        qsort(got, (size_t)K, sizeof *got, cmp_i32);
        CHECK(check_row(&w, t, got, ref, &differ, "note row 3: 2 positions differ") == 1 && differ == 2);
    }
    /* an exact tie: next the same key as kth (its scale too); the smaller position is in, the
     * larger may not be (in any world: the tie's group at the cut keeps its smallest positions) */
    memcpy(scale_n, scale_k, 4);
    CHECK(ref_index_row(&c, &b, &whole, t, ref) == K);
    CHECK(check_row(&w, t, ref, ref, &differ, NULL) == 1 && differ == 0);
    const int32_t small = kth < next ? kth : next, large = kth < next ? next : kth;
    CHECK(row_has(ref, K, small) && !row_has(ref, K, large));
    memcpy(got, ref, rowb);
    for (int k = 0; k < K; k++)
        if (got[k] == small)
            got[k] = large;
    qsort(got, (size_t)K, sizeof *got, cmp_i32);
    snprintf(want, sizeof want, "FAIL row 3: position %d is in and %d out, the same key", (int)large, (int)small);
    CHECK(check_row(&w, t, got, ref, NULL, want) == 0);
    if (pinned) {
        /* a key eight ranks below the cut, and the lowest-ranked key, instead of one in the set: the
         * tolerance (2^-16 of the magnitude) pinned, not only any tolerance below the random
         * worlds' gaps (a mutation to 2^-2 passes both) */
        const int32_t below[2] = {near, low};
        for (int i = 0; i < 2; i++) {
            memcpy(got, ref, rowb);
            got[K - 1 - (ref[K - 1] == small)] = below[i]; /* not the tie's key */
            qsort(got, (size_t)K, sizeof *got, cmp_i32);
            snprintf(want, sizeof want, "FAIL row 3: position %d (GPU only)", (int)below[i]);
            CHECK(check_row(&w, t, got, ref, NULL, want) == 0);
        }
    }
    /* a row one key short */
    memcpy(got, ref, rowb);
    got[K - 1] = -1;
    snprintf(want, sizeof want, "FAIL row 3: the GPU row has %d keys, the reference %d", K - 1, K);
    CHECK(check_row(&w, t, got, ref, NULL, want) == 0);
    /* malformed rows */
    memcpy(got, ref, rowb);
    got[0] = ref[1], got[1] = ref[0];
    CHECK(check_row(&w, t, got, ref, NULL, "FAIL row 3: the GPU row is not ascending") == 0);
    memcpy(got, ref, rowb);
    got[K - 1] = 300; /* past the row's position */
    CHECK(check_row(&w, t, got, ref, NULL, "FAIL row 3: the GPU row is not ascending") == 0);
    memcpy(got, ref, rowb);
    got[0] = -1; /* padding before a position */
    CHECK(check_row(&w, t, got, ref, NULL, "FAIL row 3: the GPU row is not ascending") == 0);
    /* rows 5 (an empty request) and 6 (a request whose blocks no cache has): no candidates */
    for (int r = 5; r <= 6; r++) {
        CHECK(w.req_of[r] == r);
        CHECK(ref_index_row(&c, &b, &whole, r, ref) == 0);
        CHECK(check_row(&w, r, ref, ref, NULL, NULL) == 1);
        memcpy(got, ref, rowb);
        got[0] = 0;
        CHECK(check_row(&w, r, got, ref, NULL, "the GPU row is not ascending") == 0);
    }
    free(order), free(ref), free(got);
    iworld_free(&w);
}

int main(int argc, char **argv)
{
    unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
    printf("test_index_ref: seed %u\n", seed);
    test_order();
    test_relu_weight_qscale();
    test_query_prep();
    test_score();
    test_merge();
    test_dcp_grid(seed);
    test_identical_keys(seed);
    test_signed_zero(seed);
    test_bad_rows(seed);
    test_shipped(seed);
    test_check_row(seed, 0);
    test_check_row(1, 1);
    test_check_row(2, 1);
    CHECK_DONE();
}
