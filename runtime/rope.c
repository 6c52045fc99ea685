/* Rope cos/sin tables, computed once per context in double precision and stored as fp32:
 * plain rope theta^(-2i/d), or YaRN as DeepSeek-V3 defines it (frequencies of long wavelengths
 * divided by factor, a linear ramp between the beta_fast and beta_slow correction dims, cos/sin
 * scaled by mscale). */
#include <math.h>

#include "internal.h"

static double correction_dim(double rotations, int dim, double base, int max_pos)
{
    return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void dsa_rope_table(const dsa_plan_t *p, float *cos_out, float *sin_out)
{
    const int dim = p->qk_rope_dim, half = dim / 2;
    double freq[512];
    double low = 0, high = 1;
    if (p->rope_yarn) {
        low = fmax(floor(correction_dim(p->yarn_beta_fast, dim, p->rope_theta, p->yarn_original_max_positions)), 0);
        high = fmin(ceil(correction_dim(p->yarn_beta_slow, dim, p->rope_theta, p->yarn_original_max_positions)),
                    dim - 1);
        if (low == high)
            high += 0.001;
    }
    for (int i = 0; i < half && i < 512; i++) {
        freq[i] = pow(p->rope_theta, -2.0 * i / dim);
        if (p->rope_yarn) {
            double ramp = fmin(fmax((i - low) / (high - low), 0.0), 1.0);
            freq[i] = freq[i] / p->yarn_factor * ramp + freq[i] * (1.0 - ramp);
        }
    }
    /* Position p+1 from p by the angle-addition rotation, in double, re-anchored on exact
     * cos/sin every 256 positions: the drift stays near 256 double ulps, far below one fp32 ulp,
     * and the table of 200K positions takes milliseconds instead of 13 million trig calls. */
    const double m = p->rope_yarn ? p->rope_mscale : 1.0;
    for (int i = 0; i < half; i++) {
        const double cd = cos(freq[i]), sd = sin(freq[i]);
        double c = 1.0, s = 0.0;
        for (int pos = 0; pos < p->max_positions; pos++) {
            if (pos % 256 == 0) {
                c = cos((double)pos * freq[i]);
                s = sin((double)pos * freq[i]);
            }
            cos_out[(size_t)pos * (size_t)half + (size_t)i] = (float)(c * m);
            sin_out[(size_t)pos * (size_t)half + (size_t)i] = (float)(s * m);
            const double cn = c * cd - s * sd;
            s = s * cd + c * sd;
            c = cn;
        }
    }
}
