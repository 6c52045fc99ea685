/* CPU reference of stage B, the indexer: query preparation, scores, the total order of candidate
 * keys, one row's top-k at DCP = 1, one rank's local top-k under DCP and the merge of the W local
 * lists. This is the contract the GPU kernels are tested against; every rule below is exact (fp32,
 * fixed order of operations), so that DCP = W and DCP = 1 give bit-identical rows.
 *
 * Inputs of a call (T rows):
 *   q            [T][H][D] bf16 (bits), the indexer queries before RoPE (the host's wq_b output)
 *   w            [T][H] fp32, the head weights (the host's weights_proj output)
 *   positions    [T] int64, the row's position within its request
 *   req_of_token [T] int32, seq_lens [num_requests] int32
 *   this rank's block table [num_requests][max_blocks] int32 (-1 unused) and indexer K cache pages
 *   [num_blocks][bs (D + 4)] (docs/layouts.md: bs x D e4m3 token-major, then bs fp32 scales).
 *
 * 1. Query prep, per (t, h), all fp32, no rounding to bf16 between steps:
 *    x = bf16 -> fp32 of q[t][h];
 *    RoPE (ref_rope_apply: y_a = x_a c - x_b s, y_b = x_a s + x_b c, each product rounded to fp32,
 *      then the fp32 subtraction or addition; no FMA) on the R = rope.dim dims x[0..R) when
 *      rope_first, else x[D-R..D), in the configured style, with ref_rope_cos_sin at positions[t];
 *    ref_hadamard (butterflies, then times 1/sqrtf(D)) when hadamard;
 *    amax = max |x_i| with fmaxf (a NaN element is ignored; all NaN gives 0);
 *    q_scale = ref_indexer_scale(amax) = 2^ceil(log2(max(amax, 1e-4) / 448)), except amax = +inf
 *      gives q_scale = +inf (decided here rather than left to frexp's unspecified exponent);
 *    q8_i = ref_e4m3_encode(x_i / q_scale) (a division; NaN -> 0x7F, saturating at +-448);
 *    w'[t][h] = ((w[t][h] * q_scale) * (1/sqrtf(D))) * (1/sqrtf(H)), left to right, fp32, both
 *      constants fp32 (1.0f / sqrtf((float)D), 1.0f / sqrtf((float)H)).
 * 2. Score of a key with e4m3 values k8 and fp32 scale k_scale (read from the owner's page):
 *    dot_h = sum over i = 0..D-1 ascending of dec(q8[h][i]) * dec(k8[i]), fp32, from +0
 *      (dec = ref_e4m3_decode; each product is exact in fp32);
 *    relu(d) = d > 0 ? d : (d is NaN ? d : +0): a NaN dot stays NaN;
 *    acc = sum over h = 0..H-1 ascending of w'[h] * relu(dot_h), fp32, from +0 (product rounded,
 *      then added);
 *    score = k_scale * acc.
 *    NaN anywhere (query, weight, key byte 0x7F/0xFF, scale) gives a NaN score; it never traps.
 * 3. Candidates of row t: req = req_of_token[t]; positions g with
 *    0 <= g <= min(positions[t], seq_lens[req] - 1) (causal; a decode row at len - 1 sees all),
 *    and whose key is present: under DCP (W ranks, interleave I) rank r scores only the g it owns
 *    (ref_dcp_owner(g, W, I) == r), at local index l = ref_dcp_local_index(g, W, I) and slot
 *    ref_dcp_slot(l, block_table[req], max_blocks, bs). A slot of -1 (a -1 table entry, or a block
 *    beyond max_blocks) or a slot at or beyond num_blocks * bs means the key is absent: it is not
 *    a candidate and its page is never read. A row whose req is outside [0, num_requests), whose
 *    position is negative or above INT32_MAX, or whose request has seq_lens <= 0 has no
 *    candidates. At DCP = 1, W = I = 1, r = 0 and l = g.
 * 4. Total order (ref_index_before): a before b when score_a > score_b, or the scores are equal
 *    (numerically: -0 == +0, equal infinities tie) and pos_a < pos_b; a NaN score ranks below
 *    every number (including -inf); two NaNs tie and order by position. Positions of a row are
 *    distinct, so this is a strict total order and the top-k set is unique.
 * 5. The row's top-k: the first K candidates in this order (all of them when there are at most K).
 *    Output [T][K] int32: the selected positions in ascending position order, then -1 padding.
 * 6. DCP > 1: each rank computes its local top-k as K (score, position) pairs sorted by the total
 *    order, then padding (position -1; its score is ignored, the reference writes -inf). The W
 *    lists are all-gathered in rank order ([W][K]) and every rank merges them: entries with a
 *    negative position are ignored, the rest are ordered by the same total order, the first K kept
 *    and written in ascending position order with -1 padding. Exact: ownership partitions the
 *    candidates, scores do not depend on the rank, and a key among the first K globally has at
 *    most K - 1 keys before it, hence also among its owner's candidates: it is in its owner's
 *    list. So DCP = W equals DCP = 1, bit for bit, on every rank.
 *
 * Positions in lists and outputs are int32: a candidate is below seq_lens[req], an int32. */
#ifndef DSA_INDEX_H
#define DSA_INDEX_H

#include <stdint.h>
#include <stdio.h>

#include "ref.h"

/* The indexer's geometry (the spec's geometry.indexer plus the main rope and the block size). */
typedef struct ref_index_cfg {
    int H;                /* idx_heads */
    int D;                /* idx_head_dim (a power of two when hadamard) */
    int K;                /* idx_topk */
    int bs;               /* KV block size (tokens per indexer page) */
    ref_rope rope;        /* the main MLA's rope; rope.dim = R = qk_rope_dim <= D */
    int rope_interleaved; /* indexer rope style: 1 interleaved pairs (2i, 2i+1), 0 NeoX (i, i+R/2) */
    int rope_first;       /* 1: RoPE on dims [0, R), 0: on [D-R, D) */
    int hadamard;         /* 1: orthonormal Hadamard rotation after RoPE */
    int64_t max_positions; /* the rope table's rows: a row at a position past them has no keys; 0: no bound */
} ref_index_cfg;

/* One call's row inputs (identical on every rank). */
typedef struct ref_index_batch {
    int T, num_requests;
    const uint16_t *q;            /* [T][H][D] bf16 bits */
    const float *w;               /* [T][H] */
    const int64_t *positions;     /* [T] */
    const int32_t *req_of_token;  /* [T] */
    const int32_t *seq_lens;      /* [num_requests] */
} ref_index_batch;

/* One rank's indexer K cache (at DCP = 1, the whole cache). */
typedef struct ref_index_cache {
    const int32_t *block_table;   /* [num_requests][max_blocks], -1 unused */
    int64_t max_blocks;
    const uint8_t *pages;         /* [num_blocks][bs * (D + 4)] */
    int64_t num_blocks;
} ref_index_cache;

/* A local top-k entry: what a rank contributes to the exchange. */
typedef struct ref_index_cand {
    float score;
    int32_t pos;                  /* -1: padding */
} ref_index_cand;

/* q_scale of a query head from its amax (step 1). */
float ref_index_qscale(float amax);
/* w' = ((w * q_scale) * (1/sqrtf(D))) * (1/sqrtf(H)) (step 1). */
float ref_index_weight(float w, float q_scale, int D, int H);
/* relu with NaN kept (step 2). */
float ref_index_relu(float d);

/* Step 1 for one row: q_row [H][D] bf16 bits, w_row [H], the row's position pos (>= 0) ->
 * q8 [H][D] e4m3, q_scale [H] (may be NULL), w_eff [H]. */
void ref_index_query_prep(const ref_index_cfg *c, const uint16_t *q_row, const float *w_row, int pos, uint8_t *q8,
                          float *q_scale, float *w_eff);

/* Step 2 for one key: qd [H][D] = ref_e4m3_decode of the row's q8, w_eff [H], kd [D] =
 * ref_e4m3_decode of the key's bytes, k_scale its page scale. */
float ref_index_score(int H, int D, const float *qd, const float *w_eff, const float *kd, float k_scale);

/* Step 4: 1 when (sa, pa) comes before (sb, pb), else 0. */
int ref_index_before(float sa, int32_t pa, float sb, int32_t pb);

/* Steps 1-3 and 5 on rank `rank` of W (interleave I) for row t: out [K] sorted by the total order,
 * then padding. Returns the number of non-padding entries (min(K, this rank's candidates)).
 * cands_out, when not NULL, receives this rank's candidate count before the cut. */
int ref_index_local(const ref_index_cfg *c, int W, int I, int rank, const ref_index_batch *b,
                    const ref_index_cache *cache, int t, ref_index_cand *out, int64_t *cands_out);

/* Step 6: gathered [W][K] (rank order) -> out [K] ascending positions, -1 padded. Returns the
 * number of positions written. */
int ref_index_merge(const ref_index_cfg *c, const ref_index_cand *gathered, int W, int32_t *out);

/* The last candidate position of row t (step 3), or -1 when the row has none (its request out of
 * range, or its position outside the rope table, as the kernels take it). */
int64_t ref_index_row_last(const ref_index_cfg *c, const ref_index_batch *b, int t);

/* DCP = 1, one row: out [K] ascending positions, -1 padded; returns their number. */
int ref_index_row(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int t,
                  int32_t *out);

/* Whole calls: DCP = 1 (out [T][K]); DCP = W simulated (caches [W], one per rank; out [W][T][K],
 * each rank's rows after its merge). */
void ref_index_dcp1(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int32_t *out);
void ref_index_simulate(const ref_index_cfg *c, int W, int I, const ref_index_batch *b,
                        const ref_index_cache *caches, int32_t *out);

/* Row t of a GPU's top-k (got [K]) against the reference's (ref [K], ref_index_row over cache, the
 * unsharded DCP = 1 cache of the same keys). got must be ascending positions of the row's candidates
 * (step 3), then -1 padding. Its set must equal ref's, except where each key in one set and not the
 * other has a reference score within rounding of the k-th (the lowest score of ref's set): the GPU
 * sums the dot products on tensor cores and the heads in a tree, the reference in sequence, so a
 * score may differ by a few ulps of its magnitude m = |k_scale| * sum_h |w'_h| * relu(dot_h); the
 * tolerance is 2^-16 m, the larger m of the key and the k-th (the sums have at most 256 terms, each
 * rounding at most 2^-24 of the running magnitude). Writes to log (NULL: nowhere) a "FAIL row t: ..."
 * line per fault, or a "note row t: ..." line for an accepted difference. Returns 1 when
 * acceptable, else 0; *differ (may be NULL) gets the number of keys in one set only. */
int ref_index_check_row(const ref_index_cfg *c, const ref_index_batch *b, const ref_index_cache *cache, int t,
                        const int32_t *got, const int32_t *ref, int *differ, FILE *log);

#endif
