/* Pins the CPU reference to hand-checked values: format bit patterns, rounding ties, the nvfp4
 * nibble order and scale placement, YaRN cos/sin of DeepSeek-V3.2, and encode/decode round trips
 * of every cache format within each format's error on fresh random data. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../check.h"
#include "ref.h"

static float frand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static void test_bf16(void)
{
    CHECK_EQ_INT(ref_bf16_encode(1.0f), 0x3f80);
    CHECK_EQ_INT(ref_bf16_encode(1.00390625f), 0x3f80);  /* 1 + 2^-8: tie, to even */
    CHECK_EQ_INT(ref_bf16_encode(1.01171875f), 0x3f82);  /* 1 + 3 * 2^-8: tie, to even */
    CHECK_EQ_INT(ref_bf16_encode(-2.0f), 0xc000);
    CHECK(ref_bf16_decode(0x4049) == 3.140625f);
}

static void test_e4m3(void)
{
    CHECK_EQ_INT(ref_e4m3_encode(1.0f), 0x38);
    CHECK_EQ_INT(ref_e4m3_encode(-2.0f), 0xc0);
    CHECK_EQ_INT(ref_e4m3_encode(448.0f), 0x7e);
    CHECK_EQ_INT(ref_e4m3_encode(500.0f), 0x7e);        /* saturates */
    CHECK_EQ_INT(ref_e4m3_encode(464.0f), 0x7e);        /* halfway to 480: the code 0x7f is NaN, so 448 */
    CHECK_EQ_INT(ref_e4m3_encode(470.0f), 0x7e);
    CHECK_EQ_INT(ref_e4m3_encode(-479.0f), 0xfe);
    CHECK_EQ_INT(ref_e4m3_encode(-1e9f), 0xfe);
    CHECK_EQ_INT(ref_e4m3_encode(240.0f), 0x77);         /* 1.875 * 2^7 */
    CHECK_EQ_INT(ref_e4m3_encode(0x1p-6f), 0x08);        /* smallest normal */
    CHECK_EQ_INT(ref_e4m3_encode(0x1p-9f), 0x01);        /* smallest subnormal */
    CHECK_EQ_INT(ref_e4m3_encode(0x1p-10f), 0x00);       /* tie between 0 and 2^-9: to even */
    CHECK_EQ_INT(ref_e4m3_encode(3 * 0x1p-10f), 0x02);   /* 1.5 steps: tie, to even */
    CHECK_EQ_INT(ref_e4m3_encode(1.0625f), 0x38);        /* 1 + 1/16: tie, to even mantissa 0 */
    CHECK_EQ_INT(ref_e4m3_encode(1.1875f), 0x3a);        /* 1 + 3/16: tie, to even mantissa 2 */
    CHECK_EQ_INT(ref_e4m3_encode(0x1.fp-7f), 0x08);      /* subnormal range rounding up into the normals */
    CHECK_EQ_INT(ref_e4m3_encode(NAN), 0x7f);
    CHECK(ref_e4m3_decode(0x7e) == 448.0f);
    CHECK(ref_e4m3_decode(0x01) == 0x1p-9f);
    CHECK(isnan(ref_e4m3_decode(0x7f)) && isnan(ref_e4m3_decode(0xff)));
    /* every finite code decodes and re-encodes to itself */
    int same = 1;
    for (int c = 0; c < 256; c++)
        if ((c & 0x7f) != 0x7f && ref_e4m3_encode(ref_e4m3_decode((uint8_t)c)) != c && c != 0x80)
            same = 0;
    CHECK(same);
}

static void test_e2m1(void)
{
    CHECK_EQ_INT(ref_e2m1_encode(0.25f), 0);   /* tie 0 / 0.5: even code 0 */
    CHECK_EQ_INT(ref_e2m1_encode(0.75f), 2);   /* tie 0.5 / 1: even code 2 */
    CHECK_EQ_INT(ref_e2m1_encode(1.25f), 2);
    CHECK_EQ_INT(ref_e2m1_encode(1.75f), 4);
    CHECK_EQ_INT(ref_e2m1_encode(2.5f), 4);
    CHECK_EQ_INT(ref_e2m1_encode(3.5f), 6);
    CHECK_EQ_INT(ref_e2m1_encode(5.0f), 6);
    CHECK_EQ_INT(ref_e2m1_encode(7.0f), 7);    /* saturates to 6 */
    CHECK_EQ_INT(ref_e2m1_encode(-3.0f), 0xd);
    CHECK(ref_e2m1_decode(0xf) == -6.0f);
}

static void test_scales(void)
{
    CHECK(ref_pow2_ceil(3.0f) == 4.0f);
    CHECK(ref_pow2_ceil(4.0f) == 4.0f);
    CHECK(ref_pow2_ceil(0.3f) == 0.5f);
    CHECK(ref_indexer_scale(448.0f) == 1.0f);
    CHECK(ref_indexer_scale(449.0f) == 2.0f);
    CHECK(ref_indexer_scale(0.0f) == 0x1p-22f); /* max(0, 1e-4) / 448 = 2.2e-7 -> 2^-22 */
    CHECK_EQ_INT(ref_nvfp4_block_scale(6.0f), 0x38);   /* exactly 1.0 */
    CHECK_EQ_INT(ref_nvfp4_block_scale(6.1f), 0x39);   /* 1.0167 rounds to 1.0 < want: next code, 1.125 */
    CHECK_EQ_INT(ref_nvfp4_block_scale(0.0f), 0x01);   /* floor 2^-9 */
}

static void test_nvfp4_layout(void)
{
    CHECK_EQ_INT(ref_nvfp4_scale_byte(0, 512), 0);
    CHECK_EQ_INT(ref_nvfp4_scale_byte(1, 512), 8);
    CHECK_EQ_INT(ref_nvfp4_scale_byte(4, 512), 1);
    CHECK_EQ_INT(ref_nvfp4_scale_byte(31, 512), 31);
    float latent[512], rope[64];
    for (int i = 0; i < 512; i++)
        latent[i] = 0.0f;
    for (int i = 0; i < 64; i++)
        rope[i] = (float)i / 8.0f;
    latent[0] = 0.5f;   /* block 0 amax 6: scale 1 */
    latent[1] = 6.0f;
    latent[16] = -3.0f; /* block 1 amax 3: scale 0.5 */
    uint8_t out[352];
    memset(out, 0xaa, sizeof out);
    ref_nvfp4_ds_mla_encode(latent, rope, 512, 64, out);
    CHECK_EQ_INT(out[0], 0x71);                    /* even element low nibble (0.5 -> 1), odd high (6 -> 7) */
    CHECK_EQ_INT(out[8], 0x0f);                    /* -3 / 0.5 = -6: code 0xf in the low nibble */
    CHECK_EQ_INT(out[320 + 0], 0x38);              /* block 0 scale at byte 0 */
    CHECK_EQ_INT(out[320 + 8], 0x30);              /* block 1 scale (0.5) at byte 8 */
    CHECK_EQ_INT(out[256 + 8], ref_e4m3_encode(1.0f)); /* rope element 8 = 1.0, e4m3 unscaled */
}

static void test_norms_rope_hadamard(void)
{
    float x[4] = {3, 4, 0, 0}, w[4] = {1, 1, 1, 1}, b[4] = {0, 0, 0, 0}, o[4];
    ref_rmsnorm(x, w, 2, 0.0f, o);
    CHECK_NEAR(o[0], 3 / sqrt(12.5), 1e-6);
    CHECK_NEAR(o[1], 4 / sqrt(12.5), 1e-6);
    float y[4] = {1, 2, 3, 4};
    ref_layernorm(y, w, b, 4, 0.0f, o);
    CHECK_NEAR(o[0], -1.5 / sqrt(1.25), 1e-6);
    CHECK_NEAR(o[3], 1.5 / sqrt(1.25), 1e-6);

    float c[2] = {0, 0}, s[2] = {1, 1};
    float r1[4] = {1, 2, 3, 4}, r2[4] = {1, 2, 3, 4};
    ref_rope_apply(r1, 4, c, s, 1);
    CHECK(r1[0] == -2 && r1[1] == 1 && r1[2] == -4 && r1[3] == 3);   /* pairs (0,1), (2,3) */
    ref_rope_apply(r2, 4, c, s, 0);
    CHECK(r2[0] == -3 && r2[1] == -4 && r2[2] == 1 && r2[3] == 2);   /* pairs (0,2), (1,3) */

    /* DeepSeek-V3.2: theta 1e4, YaRN factor 40 over 4096, beta 32/1, rope dim 64; position 1000.
     * Values from an independent float64 evaluation of DeepSeek's yarn formulas: correction
     * range [10, 23]; pair 0 is unscaled (cos 1000), pair 31 divided by 40. */
    ref_rope r = {64, 10000.0, 1, 40.0, 32.0, 1.0, 1.0, 4096};
    float cs[32], sn[32];
    ref_rope_cos_sin(&r, 1000, cs, sn);
    CHECK_NEAR(cs[0], 0.5623790762907029, 2e-7);
    CHECK_NEAR(sn[0], 0.8268795405320025, 2e-7);
    CHECK_NEAR(cs[10], 0.9509402647984133, 2e-7);
    CHECK_NEAR(sn[10], -0.30937455096553057, 2e-7);
    CHECK_NEAR(cs[20], 0.7034407157304698, 2e-7);
    CHECK_NEAR(sn[20], 0.710753937345833, 2e-7);
    CHECK_NEAR(sn[31], 0.003333797404959383, 2e-9);

    float h[4] = {1, 0, 0, 0};
    ref_hadamard(h, 4);
    CHECK(h[0] == 0.5f && h[1] == 0.5f && h[2] == 0.5f && h[3] == 0.5f);
    float v[128], v0[128];
    unsigned seed = 7;
    for (int i = 0; i < 128; i++)
        v0[i] = v[i] = frand(&seed);
    ref_hadamard(v, 128);
    ref_hadamard(v, 128); /* orthonormal and symmetric: its own inverse */
    double e = 0;
    for (int i = 0; i < 128; i++)
        e = fmax(e, fabs(v[i] - v0[i]));
    CHECK(e < 1e-5);
}

/* Round trips on fresh random data, never zeros, each within its format's error bound. */
static void test_round_trips(unsigned seed)
{
    for (int trial = 0; trial < 50; trial++) {
        float latent[512], rope[64], dl[512], dr[64];
        float mag = ldexpf(1.0f, (int)(frand(&seed) * 8)); /* magnitudes from 2^-8 to 2^8 */
        for (int i = 0; i < 512; i++)
            latent[i] = frand(&seed) * mag;
        for (int i = 0; i < 64; i++)
            rope[i] = frand(&seed) * 4;
        uint8_t buf[1152];

        ref_bf16_cache_encode(latent, rope, 512, 64, buf);
        ref_bf16_cache_decode(buf, 512, 64, dl, dr);
        int ok = 1;
        for (int i = 0; i < 512; i++)
            ok &= fabsf(dl[i] - latent[i]) <= fabsf(latent[i]) * 0x1p-8f; /* half a bf16 ulp */
        CHECK(ok);

        for (int pow2 = 0; pow2 < 2; pow2++) {
            ref_fp8_ds_mla_encode(latent, rope, 512, 64, pow2, buf);
            ref_fp8_ds_mla_decode(buf, 512, 64, dl, dr);
            ok = 1;
            for (int i = 0; i < 512; i++) {
                float scale;
                memcpy(&scale, buf + 512 + 4 * (i / 128), 4);
                /* e4m3: half a step of 2^-3 relative, or half the subnormal step, times scale */
                float tol = fmaxf(fabsf(latent[i]) * 0x1p-4f, 0x1p-10f * scale);
                ok &= fabsf(dl[i] - latent[i]) <= tol;
            }
            for (int i = 0; i < 64; i++)
                ok &= dr[i] == ref_bf16_round(rope[i]);
            CHECK(ok);
        }

        ref_nvfp4_ds_mla_encode(latent, rope, 512, 64, buf);
        ref_nvfp4_ds_mla_decode(buf, 512, 64, dl, dr);
        ok = 1;
        for (int s = 0; s < 32; s++) {
            float scale = ref_e4m3_decode(buf[320 + ref_nvfp4_scale_byte(s, 512)]);
            for (int i = 16 * s; i < 16 * s + 16; i++)
                ok &= fabsf(dl[i] - latent[i]) <= scale * 1.0f + 1e-12f; /* half the widest e2m1 step (2) */
        }
        CHECK(ok);

        float k[128], dk[128];
        for (int i = 0; i < 128; i++)
            k[i] = frand(&seed) * mag;
        uint8_t page[16 * 132];
        memset(page, 0, sizeof page);
        int off = (int)(seed % 16);
        ref_indexer_encode(k, 128, 16, off, page);
        ref_indexer_decode(page, 128, 16, off, dk);
        ok = 1;
        for (int i = 0; i < 128; i++)
            ok &= fabsf(dk[i] - k[i]) <= fmaxf(fabsf(k[i]) * 0x1p-4f, 0x1p-10f * mag);
        CHECK(ok);
    }
}

int main(void)
{
    unsigned seed = (unsigned)time(NULL);
    printf("test_ref: seed %u\n", seed);
    test_bf16();
    test_e4m3();
    test_e2m1();
    test_scales();
    test_nvfp4_layout();
    test_norms_rope_hadamard();
    test_round_trips(seed);
    CHECK_DONE();
}
