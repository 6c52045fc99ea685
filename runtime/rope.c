/* Rope frequencies of a configuration: plain theta^(-2i/d), or YaRN as DeepSeek-V3 defines it
 * (frequencies of long wavelengths divided by factor, a linear ramp between the beta_fast and
 * beta_slow correction dims, cos/sin scaled by mscale). The context computes its cos/sin table on
 * the GPU from these: cos and sin of pos * freq[i], in double, times mscale (the rope table kernel
 * of prologue.cu). */
#include <math.h>

#include "internal.h"

static double correction_dim(double rotations, int dim, double base, int max_pos)
{
    return dim * log(max_pos / (rotations * 2.0 * M_PI)) / (2.0 * log(base));
}

void dsa_rope_freqs(const dsa_plan_t *p, double *freq, double *mscale)
{
    const int dim = p->info.qk_rope_dim, half = dim / 2;
    double low = 0, high = 1;
    if (p->rope_yarn) {
        low = fmax(floor(correction_dim(p->yarn_beta_fast, dim, p->rope_theta, p->yarn_original_max_positions)), 0);
        high = fmin(ceil(correction_dim(p->yarn_beta_slow, dim, p->rope_theta, p->yarn_original_max_positions)),
                    dim - 1);
        if (low == high)
            high += 0.001;
    }
    for (int i = 0; i < half; i++) {
        freq[i] = pow(p->rope_theta, -2.0 * i / dim);
        if (p->rope_yarn) {
            double ramp = fmin(fmax((i - low) / (high - low), 0.0), 1.0);
            freq[i] = freq[i] / p->yarn_factor * ramp + freq[i] * (1.0 - ramp);
        }
    }
    *mscale = p->rope_yarn ? p->rope_mscale : 1.0;
}
