/* The DCP simulation on the CPU: W ranks, each with its own shard of the caches (written by the
 * reference encoders), its own block tables and top-k mapping, attend for the gathered heads and
 * merge by LSE; the result equals DCP = 1 on the same inputs within fp32 rounding, for W in 1, 2,
 * 4, 8 and interleave 1 and 4, including rows whose keys all live on one rank, a rank with no
 * keys for any row, rows with no valid key at all, duplicated and unsorted top-k entries, and
 * prefill and decode rows mixed.
 *
 * Tolerance: both sides accumulate each key set in double and round to fp32; DCP = W splits the
 * set and merges up to 8 fp32 partials (exp, log, weighted sums in fp32), a few fp32 ulps of the
 * row's largest value: 4e-6 relative to the row's largest |output|, 2e-6 relative for the LSE. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "ref.h"
#include "world.h"

static double worst_o, worst_l;

static void compare(const char *what, int W, int I, int fmt, int mode, unsigned seed)
{
    world_t w;
    /* a small world of the shipped latent and rope widths: block 16, 4 heads per rank, top-k 64 */
    const world_shape_t shape = {W, I, 16, fmt, 512, 64, world_cache_bytes(fmt, 512, 64), 4, 64, 0};
    world_build(&w, &shape, mode, seed);
    /* the host's NaN in one head of row 1 of every rank (its last) and in head 0 of row 2 of rank 0:
     * the empty head, output 0 and LSE -inf, on both sides */
    for (int r = 0; r < W; r++)
        world_poison_query(&w, r, 1, w.H - 1);
    world_poison_query(&w, 0, 2, 0);
    size_t n = (size_t)W * (size_t)w.T * (size_t)w.H, lat = (size_t)w.latent;
    float *eo = malloc(sizeof(float) * n * lat), *el = malloc(sizeof(float) * n);
    float *so = malloc(sizeof(float) * n * lat), *sl = malloc(sizeof(float) * n);
    world_expect(&w, eo, el);
    world_simulate(&w, so, sl);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        float m = 0;
        for (size_t d = 0; d < lat; d++)
            m = fmaxf(m, fabsf(eo[i * lat + d]));
        for (size_t d = 0; d < lat; d++) {
            double e = fabs(so[i * lat + d] - eo[i * lat + d]);
            worst_o = fmax(worst_o, m > 0 ? e / m : e);
            bad += !(e <= 4e-6 * m) && !(m == 0 && e == 0);
        }
        if (isinf(el[i]) || isinf(sl[i])) {
            bad += !(el[i] == sl[i]); /* both -inf: no key on any rank */
        } else {
            double e = fabs(sl[i] - el[i]);
            worst_l = fmax(worst_l, e / fmax(fabs(el[i]), 1.0));
            bad += !(e <= 2e-6 * fmax(fabs(el[i]), 1.0));
        }
        const size_t t = i / (size_t)w.H % (size_t)w.T, h = i % (size_t)w.H, r = i / ((size_t)w.H * (size_t)w.T);
        const int poisoned = (t == 1 && h == (size_t)w.H - 1) || (r == 0 && t == 2 && h == 0);
        if (mode == TOPK_EMPTY || poisoned) { /* no valid key, or a NaN query: output 0 and LSE -inf, on both sides */
            float ms = 0;
            for (size_t d = 0; d < lat; d++)
                ms = fmaxf(ms, fabsf(so[i * lat + d]));
            bad += !(el[i] == -INFINITY && sl[i] == -INFINITY && m == 0 && ms == 0);
        }
    }
    if (bad)
        printf("FAIL %s W=%d I=%d fmt=%d: %d values differ\n", what, W, I, fmt, bad);
    CHECK(bad == 0);
    free(eo);
    free(el);
    free(so);
    free(sl);
    world_free(&w);
}

static void test_mapping(void)
{
    /* W = 4, I = 2: positions 0..15 belong to ranks 0 0 1 1 2 2 3 3 0 0 1 1 2 2 3 3 */
    const int owners[16] = {0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3};
    for (int g = 0; g < 16; g++)
        CHECK_EQ_INT(ref_dcp_owner(g, 4, 2), owners[g]);
    CHECK_EQ_INT(ref_dcp_local_index(8, 4, 2), 2); /* rank 0's third position */
    CHECK_EQ_INT(ref_dcp_local_index(9, 4, 2), 3);
    CHECK_EQ_INT(ref_dcp_local_index(17, 4, 2), 5);
    int32_t row[3] = {7, 2, -1};
    CHECK_EQ_INT(ref_dcp_slot(5, row, 3, 4), 2 * 4 + 1);
    CHECK_EQ_INT(ref_dcp_slot(9, row, 3, 4), -1); /* a block the table does not have */
    CHECK_EQ_INT(ref_dcp_slot(12, row, 3, 4), -1);
}

/* ref_sparse_mla by hand: one head, two keys (value 2 and 6, rope 0 and 1), the query's rope 2 ln 3
 * and scale 1/2: scores 0 and ln 3, weights 1/4 and 3/4, out 2/4 + 18/4 = 5, lse ln 4. Every GPU
 * test of stage C compares with this function, so its scale, softmax and LSE are pinned here. */
static void test_sparse_mla_by_hand(void)
{
    const float q[2] = {0.0f, 2.0f * logf(3.0f)}, keys[4] = {2.0f, 0.0f, 6.0f, 1.0f};
    float out[1], lse[1];
    ref_sparse_mla(q, 1, keys, 2, 2, 1, 0.5f, out, lse);
    CHECK(fabsf(out[0] - 5.0f) < 1e-5f);
    CHECK(fabsf(lse[0] - logf(4.0f)) < 1e-6f);
    ref_sparse_mla(q, 1, keys, 1, 2, 1, 0.5f, out, lse); /* the first key alone: its value, lse its score 0 */
    CHECK(out[0] == 2.0f && lse[0] == 0.0f);
}

/* The empty head of ref_sparse_mla: a NaN or inf in the query or in a key makes its head 0 and -inf */
static void test_empty_head(void)
{
    enum { H = 2, N = 3, KV = 4, LAT = 3 };
    float q[H * KV] = {1, 0, 0, 0, 0, 1, 0, 0}, keys[N * KV], out[H * LAT], lse[H];
    for (int i = 0; i < N * KV; i++)
        keys[i] = 0.25f * (float)(i % 5);
    ref_sparse_mla(q, H, keys, N, KV, LAT, 1.0f, out, lse);
    CHECK(isfinite(lse[0]) && isfinite(lse[1]) && out[1] > 0); /* finite: a softmax of the keys */
    q[KV] = NAN; /* head 1's query */
    ref_sparse_mla(q, H, keys, N, KV, LAT, 1.0f, out, lse);
    CHECK(isfinite(lse[0]) && lse[1] == -INFINITY && out[3] == 0 && out[4] == 0 && out[5] == 0);
    q[KV] = INFINITY;
    ref_sparse_mla(q, H, keys, N, KV, LAT, 1.0f, out, lse);
    CHECK(lse[1] == -INFINITY && out[3] == 0);
    q[KV] = 0;
    keys[KV + 1] = NAN; /* key 1: every head's score of it */
    ref_sparse_mla(q, H, keys, N, KV, LAT, 1.0f, out, lse);
    CHECK(lse[0] == -INFINITY && lse[1] == -INFINITY && out[0] == 0 && out[5] == 0);
}

static void test_merge_edges(void)
{
    float o0[2] = {1, 2}, o1[2] = {3, 4}, L0[1] = {NAN}, L1[1] = {0.5f}, out[2], lse[1];
    const float *o[2] = {o0, o1}, *L[2] = {L0, L1};
    ref_merge(o, L, 2, 1, 2, out, lse); /* a NaN LSE counts as -inf: weight 0, never NaN */
    CHECK(out[0] == 3 && out[1] == 4 && lse[0] == 0.5f);
    L0[0] = INFINITY;
    ref_merge(o, L, 2, 1, 2, out, lse);
    CHECK(out[0] == 3 && lse[0] == 0.5f);
    L0[0] = -INFINITY;
    L1[0] = -INFINITY;
    ref_merge(o, L, 2, 1, 2, out, lse); /* all empty: 0 and -inf */
    CHECK(out[0] == 0 && out[1] == 0 && lse[0] == -INFINITY);
    L0[0] = 1.0f;
    L1[0] = 1.0f;
    ref_merge(o, L, 2, 1, 2, out, lse); /* equal weights: the mean, LSE + ln 2 */
    CHECK_NEAR(out[0], 2.0, 1e-6);
    CHECK_NEAR(lse[0], 1.0 + log(2.0), 1e-6);
}

int main(void)
{
    unsigned seed = (unsigned)time(NULL);
    printf("test_attend_ref: seed %u\n", seed);
    test_mapping();
    test_merge_edges();
    test_sparse_mla_by_hand();
    test_empty_head();
    const int Ws[] = {1, 2, 4, 8}, Is[] = {1, 4};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            compare("mixed", Ws[i], Is[j], (i + j) % 3, TOPK_MIXED, seed + (unsigned)(i * 2 + j));
    compare("one rank holds every key", 4, 4, WORLD_FP8, TOPK_ONE_RANK, seed);
    compare("one rank holds every key", 2, 1, WORLD_NVFP4, TOPK_ONE_RANK, seed);
    compare("a rank with no key", 4, 1, WORLD_BF16, TOPK_SKIP_LAST, seed);
    compare("a rank with no key", 8, 4, WORLD_FP8, TOPK_SKIP_LAST, seed);
    compare("no valid key", 4, 4, WORLD_NVFP4, TOPK_EMPTY, seed);
    printf("worst relative difference: output %.3g, lse %.3g\n", worst_o, worst_l);
    CHECK_DONE();
}
