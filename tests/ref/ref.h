/* CPU reference of dsagen's numerics: number formats, norms, rope (plain and YaRN), Hadamard, the
 * three MLA cache formats and the indexer cache page, and the prologue of one token. Plain C11,
 * written for clarity; the GPU kernels are tested against it. */
#ifndef DSA_REF_H
#define DSA_REF_H

#include <stdint.h>

/* ---- number formats (round to nearest even; fp8/fp4 conversions saturate) ---- */
uint16_t ref_bf16_encode(float x);
float ref_bf16_decode(uint16_t b);
float ref_bf16_round(float x);
uint8_t ref_e4m3_encode(float x); /* bias 7, max 448, NaN -> 0x7F */
float ref_e4m3_decode(uint8_t b);
uint8_t ref_e2m1_encode(float x); /* 4-bit code: sign bit 3; magnitudes 0 .5 1 1.5 2 3 4 6 */
float ref_e2m1_decode(uint8_t code);
float ref_pow2_ceil(float x);     /* 2^ceil(log2 x), x > 0 */

/* ---- norms ---- */
void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *out);
void ref_layernorm(const float *x, const float *w, const float *b, int n, float eps, float *out);

/* ---- rope ---- */
typedef struct ref_rope {
    int dim;            /* rotated dims (pairs = dim / 2) */
    double theta;
    int yarn;           /* 0: plain */
    double factor, beta_fast, beta_slow, mscale;
    int original_max_positions;
} ref_rope;

/* cos and sin of position pos for pair i = 0..dim/2-1 (fp32, YaRN-corrected when configured). */
void ref_rope_cos_sin(const ref_rope *r, int pos, float *cos_out, float *sin_out);
/* Rotates x[0..dim): interleaved pairs (2i, 2i+1), or NeoX pairs (i, i + dim/2). */
void ref_rope_apply(float *x, int dim, const float *c, const float *s, int interleaved);

/* Orthonormal Walsh-Hadamard transform of x[0..n), n a power of two (scale n^-0.5). */
void ref_hadamard(float *x, int n);

/* ---- MLA cache entries: latent [kv_lora] then rope [rope] ---- */
void ref_bf16_cache_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, uint8_t *out);
void ref_bf16_cache_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope);
/* fp8_ds_mla: e4m3 latent, fp32 scale per 128 values (max(amax/448, FLT_MIN), or rounded up to a
 * power of two when pow2), bf16 rope. */
void ref_fp8_ds_mla_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, int pow2, uint8_t *out);
void ref_fp8_ds_mla_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope);
/* nvfp4_ds_mla: e2m1 latent (even element low nibble), e4m3 rope, e4m3 scale per 16 values,
 * block s at byte (kv_lora/64)*(s&3) + (s>>2) of the scale area. */
uint8_t ref_nvfp4_block_scale(float amax);
int ref_nvfp4_scale_byte(int s, int kv_lora);
void ref_nvfp4_ds_mla_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, uint8_t *out);
void ref_nvfp4_ds_mla_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope);

/* ---- indexer K cache page: [bs x dim e4m3][bs x fp32 scale] ---- */
float ref_indexer_scale(float amax); /* 2^ceil(log2(max(amax, 1e-4) / 448)) */
void ref_indexer_encode(const float *k, int dim, int bs, int offset, uint8_t *page);
void ref_indexer_decode(const uint8_t *page, int dim, int bs, int offset, float *k);

#endif

/* ---- stage C: sparse MLA, the DCP mapping and the LSE merge ---- */

/* Owner rank, local index and local slot of global position g under DCP (W ranks, interleave I,
 * block size bs): owner (g / I) % W, local index (g / (W I)) I + g % I, slot from the owner's
 * block table row (blocks of this request), or -1 when the row has no such block. */
int ref_dcp_owner(int64_t g, int W, int I);
int64_t ref_dcp_local_index(int64_t g, int W, int I);
int64_t ref_dcp_slot(int64_t local, const int32_t *block_row, int64_t row_len, int bs);

/* Attention of H heads of one token over n keys (each kv_dim = latent + rope floats, the first
 * latent of which are the values): scores (q . k) * scale in fp32, softmax, out = sum p v
 * (latent dims), lse natural log. The empty head, out 0 and lse -inf: n == 0, and a head whose
 * softmax sum is not finite (a NaN or inf in its query or in a key), as the merge takes a NaN
 * partial for an empty one. */
void ref_sparse_mla(const float *q, int H, const float *keys, int n, int kv_dim, int latent, float scale, float *out,
                    float *lse);

/* Merge of W partials (o_r [H][latent], L_r [H]) into o, L in rank order, fp32: NaN/+inf L_r are
 * -inf, -inf partials weigh 0, an all-empty row is 0 / -inf. */
void ref_merge(const float *const *o, const float *const *L, int W, int H, int latent, float *out, float *lse);
