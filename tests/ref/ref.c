/* CPU reference of dsagen's numerics (see ref.h). Clarity over speed. */
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

uint16_t ref_bf16_encode(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ref_bf16_decode(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

float ref_bf16_round(float x)
{
    return ref_bf16_decode(ref_bf16_encode(x));
}

uint8_t ref_e4m3_encode(float x)
{
    if (isnan(x))
        return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs((double)x);
    uint8_t code;
    if (a < 0.015625) { /* below the smallest normal 2^-6: subnormal steps of 2^-9 */
        double q = nearbyint(a * 512.0); /* default rounding mode: to nearest even */
        code = (uint8_t)q;             /* q == 8 is the smallest normal, which encodes as 8 too */
    } else {
        int e;
        double m = frexp(a, &e) * 2.0 - 1.0; /* a = (1 + m) 2^(e-1) */
        e -= 1;
        double q = nearbyint(m * 8.0);
        if (q == 8.0) {
            q = 0.0;
            e += 1;
        }
        int biased = e + 7;
        if (biased > 15 || (biased == 15 && q > 6.0))
            code = 0x7e; /* saturate to 448 */
        else
            code = (uint8_t)((biased << 3) | (int)q);
    }
    return sign | code;
}

float ref_e4m3_decode(uint8_t b)
{
    int e = (b >> 3) & 0xf, m = b & 7;
    if (e == 15 && m == 7)
        return NAN;
    double v = e == 0 ? m * 0x1p-9 : ldexp(1.0 + m / 8.0, e - 7);
    return (float)((b & 0x80) ? -v : v);
}

static const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

uint8_t ref_e2m1_encode(float x)
{
    uint8_t sign = signbit(x) ? 8 : 0;
    float a = fabsf(x);
    if (isnan(x))
        return 7; /* e2m1 has no NaN; callers never pass one */
    if (a >= 6.0f)
        return sign | 7;
    int best = 0;
    for (int c = 1; c < 8; c++) {
        float dc = fabsf(a - e2m1_values[c]), db = fabsf(a - e2m1_values[best]);
        if (dc < db || (dc == db && (c & 1) == 0))
            best = c; /* ties go to the even code (mantissa bit 0) */
    }
    return (uint8_t)(sign | best);
}

float ref_e2m1_decode(uint8_t code)
{
    float v = e2m1_values[code & 7];
    return (code & 8) ? -v : v;
}

float ref_pow2_ceil(float x)
{
    int e;
    float m = frexpf(x, &e); /* x = m 2^e, m in [0.5, 1) */
    return m == 0.5f ? ldexpf(1.0f, e - 1) : ldexpf(1.0f, e);
}

void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++)
        out[i] = x[i] * r * w[i];
}

void ref_layernorm(const float *x, const float *w, const float *b, int n, float eps, float *out)
{
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    float r = (float)(1.0 / sqrt(var + eps));
    for (int i = 0; i < n; i++)
        out[i] = (float)(x[i] - mean) * r * w[i] + b[i];
}

/* YaRN, as DeepSeek-V3 defines it: the dims whose wavelength is short against the original
 * context keep their frequency, long ones are divided by factor, a linear ramp in between. */
static double yarn_correction_dim(double rotations, int dim, double base, int max_pos)
{
    return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void ref_rope_cos_sin(const ref_rope *r, int pos, float *cos_out, float *sin_out)
{
    int half = r->dim / 2;
    double low = 0, high = 0;
    if (r->yarn) {
        low = floor(yarn_correction_dim(r->beta_fast, r->dim, r->theta, r->original_max_positions));
        high = ceil(yarn_correction_dim(r->beta_slow, r->dim, r->theta, r->original_max_positions));
        if (low < 0)
            low = 0;
        if (high > r->dim - 1)
            high = r->dim - 1;
        if (low == high)
            high += 0.001;
    }
    for (int i = 0; i < half; i++) {
        double freq = pow(r->theta, -2.0 * i / r->dim);
        double mscale = 1.0;
        if (r->yarn) {
            double ramp = (i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double smooth = 1.0 - ramp;
            freq = freq / r->factor * (1.0 - smooth) + freq * smooth;
            mscale = r->mscale;
        }
        double a = (double)pos * freq;
        cos_out[i] = (float)(cos(a) * mscale);
        sin_out[i] = (float)(sin(a) * mscale);
    }
}

void ref_rope_apply(float *x, int dim, const float *c, const float *s, int interleaved)
{
    int half = dim / 2;
    for (int i = 0; i < half; i++) {
        int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c[i] - x1 * s[i];
        x[b] = x0 * s[i] + x1 * c[i];
    }
}

void ref_hadamard(float *x, int n)
{
    for (int h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    float s = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++)
        x[i] *= s;
}

static void put_bf16(uint8_t *p, float x)
{
    uint16_t b = ref_bf16_encode(x);
    p[0] = (uint8_t)(b & 0xff);
    p[1] = (uint8_t)(b >> 8);
}

static float get_bf16(const uint8_t *p)
{
    return ref_bf16_decode((uint16_t)(p[0] | p[1] << 8));
}

static void put_f32(uint8_t *p, float x)
{
    memcpy(p, &x, 4);
}

static float get_f32(const uint8_t *p)
{
    float x;
    memcpy(&x, p, 4);
    return x;
}

void ref_bf16_cache_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, uint8_t *out)
{
    for (int i = 0; i < kv_lora; i++)
        put_bf16(out + 2 * i, latent[i]);
    for (int i = 0; i < rope_dim; i++)
        put_bf16(out + 2 * kv_lora + 2 * i, rope[i]);
}

void ref_bf16_cache_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope)
{
    for (int i = 0; i < kv_lora; i++)
        latent[i] = get_bf16(in + 2 * i);
    for (int i = 0; i < rope_dim; i++)
        rope[i] = get_bf16(in + 2 * kv_lora + 2 * i);
}

static float amax_of(const float *x, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++)
        m = fmaxf(m, fabsf(x[i]));
    return m;
}

void ref_fp8_ds_mla_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, int pow2, uint8_t *out)
{
    for (int j = 0; j < kv_lora / 128; j++) {
        float scale = fmaxf(amax_of(latent + 128 * j, 128) / 448.0f, FLT_MIN);
        if (pow2)
            scale = ref_pow2_ceil(scale);
        put_f32(out + kv_lora + 4 * j, scale);
        for (int i = 0; i < 128; i++)
            out[128 * j + i] = ref_e4m3_encode(latent[128 * j + i] / scale);
    }
    int rope_off = kv_lora + 4 * (kv_lora / 128);
    for (int i = 0; i < rope_dim; i++)
        put_bf16(out + rope_off + 2 * i, rope[i]);
}

void ref_fp8_ds_mla_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope)
{
    for (int i = 0; i < kv_lora; i++)
        latent[i] = ref_e4m3_decode(in[i]) * get_f32(in + kv_lora + 4 * (i / 128));
    int rope_off = kv_lora + 4 * (kv_lora / 128);
    for (int i = 0; i < rope_dim; i++)
        rope[i] = get_bf16(in + rope_off + 2 * i);
}

uint8_t ref_nvfp4_block_scale(float amax)
{
    float want = fmaxf(amax / 6.0f, 0x1p-9f);
    uint8_t code = ref_e4m3_encode(want);
    if (ref_e4m3_decode(code) < want && code < 0x7e)
        code++; /* rounding fell below: the next code up keeps |x| / scale <= 6 */
    return code;
}

int ref_nvfp4_scale_byte(int s, int kv_lora)
{
    return (kv_lora / 64) * (s & 3) + (s >> 2);
}

void ref_nvfp4_ds_mla_encode(const float *latent, const float *rope, int kv_lora, int rope_dim, uint8_t *out)
{
    int rope_off = kv_lora / 2, scale_off = rope_off + rope_dim;
    for (int s = 0; s < kv_lora / 16; s++) {
        uint8_t code = ref_nvfp4_block_scale(amax_of(latent + 16 * s, 16));
        float scale = ref_e4m3_decode(code);
        out[scale_off + ref_nvfp4_scale_byte(s, kv_lora)] = code;
        for (int i = 0; i < 16; i += 2) {
            uint8_t lo = ref_e2m1_encode(latent[16 * s + i] / scale);
            uint8_t hi = ref_e2m1_encode(latent[16 * s + i + 1] / scale);
            out[(16 * s + i) / 2] = (uint8_t)(lo | hi << 4);
        }
    }
    for (int i = 0; i < rope_dim; i++)
        out[rope_off + i] = ref_e4m3_encode(rope[i]);
}

void ref_nvfp4_ds_mla_decode(const uint8_t *in, int kv_lora, int rope_dim, float *latent, float *rope)
{
    int rope_off = kv_lora / 2, scale_off = rope_off + rope_dim;
    for (int i = 0; i < kv_lora; i++) {
        float scale = ref_e4m3_decode(in[scale_off + ref_nvfp4_scale_byte(i / 16, kv_lora)]);
        uint8_t byte = in[i / 2];
        latent[i] = ref_e2m1_decode((i & 1) ? byte >> 4 : byte & 0xf) * scale;
    }
    for (int i = 0; i < rope_dim; i++)
        rope[i] = ref_e4m3_decode(in[rope_off + i]);
}

float ref_indexer_scale(float amax)
{
    return ref_pow2_ceil(fmaxf(amax, 1e-4f) / 448.0f);
}

void ref_indexer_encode(const float *k, int dim, int bs, int offset, uint8_t *page)
{
    float scale = ref_indexer_scale(amax_of(k, dim));
    for (int i = 0; i < dim; i++)
        page[offset * dim + i] = ref_e4m3_encode(k[i] / scale);
    put_f32(page + bs * dim + 4 * offset, scale);
}

void ref_indexer_decode(const uint8_t *page, int dim, int bs, int offset, float *k)
{
    float scale = get_f32(page + bs * dim + 4 * offset);
    for (int i = 0; i < dim; i++)
        k[i] = ref_e4m3_decode(page[offset * dim + i]) * scale;
}

int ref_dcp_owner(int64_t g, int W, int I)
{
    return (int)((g / I) % W);
}

int64_t ref_dcp_local_index(int64_t g, int W, int I)
{
    return (g / ((int64_t)W * I)) * I + g % I;
}

int64_t ref_dcp_slot(int64_t local, const int32_t *block_row, int64_t row_len, int bs)
{
    int64_t b = local / bs;
    if (b >= row_len || block_row[b] < 0)
        return -1;
    return (int64_t)block_row[b] * bs + local % bs;
}

void ref_sparse_mla(const float *q, int H, const float *keys, int n, int kv_dim, int latent, float scale, float *out,
                    float *lse)
{
    for (int h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * (size_t)kv_dim;
        float *oh = out + (size_t)h * (size_t)latent;
        for (int d = 0; d < latent; d++)
            oh[d] = 0.0f;
        if (n == 0) {
            lse[h] = -INFINITY;
            continue;
        }
        float m = -INFINITY;
        float *s = malloc(sizeof(float) * (size_t)n);
        for (int j = 0; j < n; j++) {
            double dot = 0;
            for (int d = 0; d < kv_dim; d++)
                dot += (double)qh[d] * keys[(size_t)j * (size_t)kv_dim + (size_t)d];
            s[j] = (float)dot * scale;
            m = fmaxf(m, s[j]);
        }
        double l = 0;
        double *acc = calloc((size_t)latent, sizeof(double));
        for (int j = 0; j < n; j++) {
            double p = exp((double)s[j] - m);
            l += p;
            for (int d = 0; d < latent; d++)
                acc[d] += p * keys[(size_t)j * (size_t)kv_dim + (size_t)d];
        }
        if (isfinite(l)) {
            for (int d = 0; d < latent; d++)
                oh[d] = (float)(acc[d] / l);
            lse[h] = (float)(m + log(l));
        } else { /* a score not a number (a NaN or inf in q or a key): the empty head, 0 and -inf */
            lse[h] = -INFINITY;
        }
        free(acc);
        free(s);
    }
}

void ref_merge(const float *const *o, const float *const *L, int W, int H, int latent, float *out, float *lse)
{
    for (int h = 0; h < H; h++) {
        float m = -INFINITY;
        for (int r = 0; r < W; r++) {
            float x = L[r][h];
            if (!isnan(x) && x != INFINITY)
                m = fmaxf(m, x);
        }
        float *oh = out + (size_t)h * (size_t)latent;
        for (int d = 0; d < latent; d++)
            oh[d] = 0.0f;
        if (m == -INFINITY) {
            lse[h] = -INFINITY;
            continue;
        }
        float sum = 0.0f;
        for (int r = 0; r < W; r++) {
            float x = L[r][h];
            if (!isnan(x) && x != INFINITY && x != -INFINITY)
                sum += expf(x - m);
        }
        float total = m + logf(sum);
        lse[h] = total;
        for (int r = 0; r < W; r++) {
            float x = L[r][h];
            if (isnan(x) || x == INFINITY || x == -INFINITY)
                continue;
            float w = expf(x - total);
            for (int d = 0; d < latent; d++)
                oh[d] += w * o[r][(size_t)h * (size_t)latent + (size_t)d];
        }
    }
}
