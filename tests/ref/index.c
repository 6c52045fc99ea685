/* CPU reference of stage B, the indexer (see index.h for the contract). Clarity over speed. */
#include "index.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float ref_index_qscale(float amax)
{
    if (isinf(amax))
        return INFINITY; /* frexp leaves the exponent of an infinity unspecified: decide here */
    return ref_indexer_scale(amax);
}

float ref_index_weight(float w, float q_scale, int D, int H)
{
    float inv_d = 1.0f / sqrtf((float)D), inv_h = 1.0f / sqrtf((float)H);
    float x = w * q_scale;
    x = x * inv_d;
    x = x * inv_h;
    return x;
}

float ref_index_relu(float d)
{
    return d > 0.0f ? d : (isnan(d) ? d : 0.0f);
}

void ref_index_query_prep(const ref_index_cfg *c, const uint16_t *q_row, const float *w_row, int pos, uint8_t *q8,
                          float *q_scale, float *w_eff)
{
    int H = c->H, D = c->D, R = c->rope.dim;
    float *x = malloc(sizeof(float) * (size_t)D);
    float *cs = malloc(sizeof(float) * (size_t)(R / 2 + 1)), *sn = malloc(sizeof(float) * (size_t)(R / 2 + 1));
    if (R > 0)
        ref_rope_cos_sin(&c->rope, pos, cs, sn);
    for (int h = 0; h < H; h++) {
        for (int i = 0; i < D; i++)
            x[i] = ref_bf16_decode(q_row[(size_t)h * (size_t)D + (size_t)i]);
        if (R > 0)
            ref_rope_apply(c->rope_first ? x : x + (D - R), R, cs, sn, c->rope_interleaved);
        if (c->hadamard)
            ref_hadamard(x, D);
        float amax = 0.0f;
        for (int i = 0; i < D; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float s = ref_index_qscale(amax);
        for (int i = 0; i < D; i++)
            q8[(size_t)h * (size_t)D + (size_t)i] = ref_e4m3_encode(x[i] / s);
        if (q_scale)
            q_scale[h] = s;
        w_eff[h] = ref_index_weight(w_row[h], s, D, H);
    }
    free(x);
    free(cs);
    free(sn);
}

float ref_index_score(int H, int D, const float *qd, const float *w_eff, const float *kd, float k_scale)
{
    float acc = 0.0f;
    for (int h = 0; h < H; h++) {
        const float *qh = qd + (size_t)h * (size_t)D;
        float dot = 0.0f;
        for (int i = 0; i < D; i++)
            dot = dot + qh[i] * kd[i]; /* e4m3 x e4m3 is exact in fp32: only the sums round */
        float term = w_eff[h] * ref_index_relu(dot);
        acc = acc + term;
    }
    return k_scale * acc;
}

int ref_index_before(float sa, int32_t pa, float sb, int32_t pb)
{
    int na = isnan(sa) != 0, nb = isnan(sb) != 0;
    if (na != nb)
        return nb; /* the number comes first */
    if (!na && sa != sb)
        return sa > sb;
    return pa < pb; /* equal scores (-0 == +0, inf == inf) or both NaN */
}

static int cmp_cand(const void *a, const void *b)
{
    const ref_index_cand *x = a, *y = b;
    if (ref_index_before(x->score, x->pos, y->score, y->pos))
        return -1;
    if (ref_index_before(y->score, y->pos, x->score, x->pos))
        return 1;
    return 0;
}

static int cmp_pos(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int64_t ref_index_row_last(const ref_index_cfg *c, const ref_index_batch *b, int t)
{
    int32_t req = b->req_of_token[t];
    if (req < 0 || req >= b->num_requests)
        return -1;
    int64_t p = b->positions[t], len = b->seq_lens[req];
    if (p < 0 || p > INT32_MAX || len <= 0 || (c->max_positions > 0 && p >= c->max_positions))
        return -1;
    return p < len - 1 ? p : len - 1;
}

int ref_index_local(const ref_index_cfg *c, int W, int I, int rank, const ref_index_batch *b,
                    const ref_index_cache *cache, int t, ref_index_cand *out, int64_t *cands_out)
{
    int H = c->H, D = c->D, K = c->K, bs = c->bs;
    for (int k = 0; k < K; k++)
        out[k] = (ref_index_cand){-INFINITY, -1};
    if (cands_out)
        *cands_out = 0;
    int64_t last = ref_index_row_last(c, b, t);
    if (last < 0)
        return 0;
    int32_t req = b->req_of_token[t];
    const int32_t *table = cache->block_table + (size_t)req * (size_t)cache->max_blocks;
    /* a rank's candidates have distinct local indices below max_blocks * bs */
    int64_t cap = cache->max_blocks * bs;
    if (cap > last + 1)
        cap = last + 1;
    ref_index_cand *cand = malloc(sizeof(ref_index_cand) * (size_t)(cap > 0 ? cap : 1));
    uint8_t *q8 = malloc((size_t)H * (size_t)D);
    float *qd = malloc(sizeof(float) * (size_t)H * (size_t)D), *w_eff = malloc(sizeof(float) * (size_t)H);
    float *kd = malloc(sizeof(float) * (size_t)D), dec[256];
    for (int v = 0; v < 256; v++)
        dec[v] = ref_e4m3_decode((uint8_t)v);
    ref_index_query_prep(c, b->q + (size_t)t * (size_t)H * (size_t)D, b->w + (size_t)t * (size_t)H,
                         (int)b->positions[t], q8, NULL, w_eff);
    for (size_t i = 0; i < (size_t)H * (size_t)D; i++)
        qd[i] = dec[q8[i]];
    size_t page_bytes = (size_t)bs * ((size_t)D + 4);
    int64_t n = 0;
    for (int64_t g = 0; g <= last; g++) {
        if (ref_dcp_owner(g, W, I) != rank)
            continue;
        int64_t l = ref_dcp_local_index(g, W, I);
        if (l / bs >= cache->max_blocks)
            break; /* local indices only grow with g */
        int64_t slot = ref_dcp_slot(l, table, cache->max_blocks, bs);
        if (slot < 0 || slot >= cache->num_blocks * bs)
            continue; /* absent: not a candidate, never read */
        const uint8_t *page = cache->pages + (size_t)(slot / bs) * page_bytes;
        int off = (int)(slot % bs);
        for (int i = 0; i < D; i++)
            kd[i] = dec[page[(size_t)off * (size_t)D + (size_t)i]];
        float k_scale;
        memcpy(&k_scale, page + (size_t)bs * (size_t)D + 4 * (size_t)off, 4);
        cand[n].score = ref_index_score(H, D, qd, w_eff, kd, k_scale);
        cand[n].pos = (int32_t)g;
        n++;
    }
    qsort(cand, (size_t)n, sizeof *cand, cmp_cand);
    int kept = n < K ? (int)n : K;
    memcpy(out, cand, sizeof *cand * (size_t)kept);
    if (cands_out)
        *cands_out = n;
    free(cand);
    free(q8);
    free(qd);
    free(w_eff);
    free(kd);
    return kept;
}

int ref_index_merge(const ref_index_cfg *c, const ref_index_cand *gathered, int W, int32_t *out)
{
    int K = c->K;
    ref_index_cand *all = malloc(sizeof(ref_index_cand) * (size_t)W * (size_t)K);
    int n = 0;
    for (int i = 0; i < W * K; i++)
        if (gathered[i].pos >= 0)
            all[n++] = gathered[i];
    qsort(all, (size_t)n, sizeof *all, cmp_cand);
    int kept = n < K ? n : K;
    for (int k = 0; k < kept; k++)
        out[k] = all[k].pos;
    qsort(out, (size_t)kept, sizeof *out, cmp_pos);
    for (int k = kept; k < K; k++)
        out[k] = -1;
    free(all);
    return kept;
}

int ref_index_row(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int t,
                  int32_t *out)
{
    ref_index_cand *list = malloc(sizeof(ref_index_cand) * (size_t)c->K);
    int n = ref_index_local(c, 1, 1, 0, b, cache, t, list, NULL);
    for (int k = 0; k < c->K; k++)
        out[k] = k < n ? list[k].pos : -1;
    qsort(out, (size_t)n, sizeof *out, cmp_pos);
    free(list);
    return n;
}

void ref_index_dcp1(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int32_t *out)
{
    for (int t = 0; t < b->T; t++)
        ref_index_row(c, b, cache, t, out + (size_t)t * (size_t)c->K);
}

void ref_index_simulate(const ref_index_cfg *c, int W, int I, const ref_index_batch *b,
                        const ref_index_cache *caches, int32_t *out)
{
    size_t K = (size_t)c->K, T = (size_t)b->T;
    ref_index_cand *gathered = malloc(sizeof(ref_index_cand) * (size_t)W * K);
    for (int t = 0; t < b->T; t++) {
        for (int r = 0; r < W; r++) /* each rank's local top-k; the all-gather puts them in rank order */
            ref_index_local(c, W, I, r, b, &caches[r], t, gathered + (size_t)r * K, NULL);
        for (int r = 0; r < W; r++) /* every rank merges the same gathered lists */
            ref_index_merge(c, gathered, W, out + ((size_t)r * T + (size_t)t) * K);
    }
    free(gathered);
}

/* ---- a GPU's rows against the reference ---- */

/* The slot of candidate g in a DCP = 1 cache (table: its request's row), or -1 when absent. */
static int64_t present_slot(const ref_index_cfg *c, const ref_index_cache *cache, const int32_t *table, int32_t g)
{
    int64_t slot = ref_dcp_slot(g, table, cache->max_blocks, c->bs);
    return slot >= 0 && slot < cache->num_blocks * c->bs ? slot : -1;
}

/* The reference score of candidate g of a row (qd, w_eff from its query prep) and its magnitude
 * |k_scale| * sum_h |w'_h| * relu(dot_h) (in double). */
static float key_score(const ref_index_cfg *c, const ref_index_cache *cache, const int32_t *table, const float *qd,
                       const float *w_eff, int32_t g, double *mag)
{
    const int H = c->H, D = c->D;
    const int64_t slot = present_slot(c, cache, table, g);
    const uint8_t *page = cache->pages + (size_t)(slot / c->bs) * (size_t)c->bs * ((size_t)D + 4);
    const size_t off = (size_t)(slot % c->bs);
    float *kd = malloc(sizeof(float) * (size_t)D), ks;
    memcpy(&ks, page + (size_t)c->bs * (size_t)D + 4 * off, 4);
    for (int i = 0; i < D; i++)
        kd[i] = ref_e4m3_decode(page[off * (size_t)D + (size_t)i]);
    const float s = ref_index_score(H, D, qd, w_eff, kd, ks);
    double m = 0;
    for (int h = 0; h < H; h++) {
        double dot = 0;
        for (int i = 0; i < D; i++)
            dot += (double)qd[(size_t)h * (size_t)D + (size_t)i] * kd[i];
        m += fabs(w_eff[h]) * (dot > 0 ? dot : 0);
    }
    *mag = fabs(ks) * m;
    free(kd);
    return s;
}

/* Whether candidates g1 and g2 of a row have the same key (its D bytes and its scale): scores equal
 * bit for bit on any deterministic kernel, so the rule's tie-break decides between them. */
static int same_key(const ref_index_cfg *c, const ref_index_cache *cache, const int32_t *table, int32_t g1,
                    int32_t g2)
{
    const int64_t s1 = present_slot(c, cache, table, g1), s2 = present_slot(c, cache, table, g2);
    const size_t D = (size_t)c->D, bs = (size_t)c->bs;
    const uint8_t *p1 = cache->pages + (size_t)(s1 / c->bs) * bs * (D + 4), *o1 = p1 + (size_t)(s1 % c->bs) * D;
    const uint8_t *p2 = cache->pages + (size_t)(s2 / c->bs) * bs * (D + 4), *o2 = p2 + (size_t)(s2 % c->bs) * D;
    return memcmp(o1, o2, D) == 0 && memcmp(p1 + bs * D + 4 * (size_t)(s1 % c->bs), p2 + bs * D + 4 * (size_t)(s2 % c->bs), 4) == 0;
}

static int row_contains(const int32_t *row, int K, int32_t g)
{
    for (int j = 0; j < K && row[j] >= 0; j++)
        if (row[j] == g)
            return 1;
    return 0;
}

int ref_index_check_row(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int t,
                        const int32_t *got, const int32_t *ref, int *differ, FILE *log)
{
    const int K = c->K, H = c->H, D = c->D;
    if (differ)
        *differ = 0;
    const int64_t last = ref_index_row_last(c, b, t);
    const int32_t *table = last >= 0 ? cache->block_table + (size_t)b->req_of_token[t] * (size_t)cache->max_blocks
                                     : NULL;
    int valid = 1;
    for (int j = 0; j < K; j++) { /* ascending candidates of the row, -1 only at the end */
        if (got[j] < 0) {
            for (int k = j; k < K; k++)
                valid &= got[k] == -1;
            break;
        }
        valid &= got[j] <= last && (j == 0 || got[j] > got[j - 1]);
        if (valid)
            valid &= present_slot(c, cache, table, got[j]) >= 0;
    }
    if (!valid) {
        if (log)
            fprintf(log, "FAIL row %d: the GPU row is not ascending positions of the row's keys, -1 padded\n", t);
        return 0;
    }
    if (memcmp(got, ref, sizeof(int32_t) * (size_t)K) == 0)
        return 1;
    /* as many keys as the reference: min(idx_topk, the row's keys), never fewer */
    int ng = 0, nr = 0;
    while (ng < K && got[ng] >= 0)
        ng++;
    while (nr < K && ref[nr] >= 0)
        nr++;
    if (ng != nr) {
        if (log)
            fprintf(log, "FAIL row %d: the GPU row has %d keys, the reference %d\n", t, ng, nr);
        return 0;
    }
    /* the row's query, prepared once */
    uint8_t *q8 = malloc((size_t)H * (size_t)D);
    float *qd = malloc(sizeof(float) * (size_t)H * (size_t)D), *w_eff = malloc(sizeof(float) * (size_t)H);
    ref_index_query_prep(c, b->q + (size_t)t * (size_t)H * (size_t)D, b->w + (size_t)t * (size_t)H,
                         (int)b->positions[t], q8, NULL, w_eff);
    for (size_t i = 0; i < (size_t)H * (size_t)D; i++)
        qd[i] = ref_e4m3_decode(q8[i]);
    /* the k-th score of the reference's set: its lowest */
    double kth = INFINITY, mag_k = 0;
    for (int j = 0; j < K && ref[j] >= 0; j++) {
        double m;
        const float s = key_score(c, cache, table, qd, w_eff, ref[j], &m);
        if (s < kth)
            kth = s, mag_k = m;
    }
    int ok = 1, n = 0;
    for (int side = 0; side < 2; side++) {
        const int32_t *x = side ? ref : got, *y = side ? got : ref;
        for (int j = 0; j < K && x[j] >= 0; j++) {
            if (row_contains(y, K, x[j]))
                continue;
            double m;
            const float s = key_score(c, cache, table, qd, w_eff, x[j], &m);
            const double tol = ldexp(fmax(m, mag_k), -16);
            n++;
            if (!(fabs(s - kth) <= tol)) {
                if (log)
                    fprintf(log, "FAIL row %d: position %d (%s only) has score %.9g, the k-th is %.9g "
                            "(tolerance %.3g)\n", t, x[j], side ? "reference" : "GPU", s, kth, tol);
                ok = 0;
            }
        }
    }
    /* identical keys tie exactly everywhere: the smaller position is in, the larger out */
    for (int j = 0; ok && j < K && got[j] >= 0; j++) {
        if (row_contains(ref, K, got[j]))
            continue;
        for (int i = 0; i < K && ref[i] >= 0; i++)
            if (ref[i] < got[j] && !row_contains(got, K, ref[i]) && same_key(c, cache, table, got[j], ref[i])) {
                if (log)
                    fprintf(log, "FAIL row %d: position %d is in and %d out, the same key: a tie goes to the "
                            "smaller position\n", t, got[j], ref[i]);
                ok = 0;
                break;
            }
    }
    if (ok && log)
        fprintf(log, "note row %d: %d positions differ, each within rounding of the k-th score %.9g\n", t, n, kth);
    if (differ)
        *differ = n;
    free(q8), free(qd), free(w_eff);
    return ok;
}
