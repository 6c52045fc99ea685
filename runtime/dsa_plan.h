/* What a generated configuration tells the runtime about itself: kernels with their sources and
 * launch shape, and the values the runtime needs for argument checks and rope tables. Each
 * out/<config>/glue.c defines one dsa_plan_t; out/registry.c lists them. Internal to libdsa. */
#ifndef DSA_PLAN_H
#define DSA_PLAN_H

#include <stddef.h>

#include "dsa.h"

#define DSA_PLAN_ABI 2

typedef struct dsa_source {
    const char *name; /* as the kernel includes it */
    const char *text;
    const size_t *len;
} dsa_source_t;

typedef struct dsa_kernel_desc {
    const char *name;  /* "prologue" */
    const char *entry; /* extern "C" symbol */
    dsa_source_t source;
    unsigned threads;  /* per CTA */
} dsa_kernel_desc_t;

typedef struct dsa_plan {
    int abi; /* DSA_PLAN_ABI */
    dsa_config_info_t info; /* what dsa_config_info reports */
    const char *symbol; /* the name as a C identifier, in kernel entry names */
    dsa_source_t config_h;
    int nkernels;
    const dsa_kernel_desc_t *kernels;
    const char *rope_entry; /* the rope table kernel, in kernels[0]'s module */
    int ntargets;
    const char *const *targets;
    int attend_heads_per_cta;
    /* rope */
    double rope_theta;
    int rope_yarn;
    double yarn_factor, yarn_beta_fast, yarn_beta_slow, rope_mscale;
    int yarn_original_max_positions;
} dsa_plan_t;

extern const dsa_plan_t *const dsa_registry[]; /* NULL-terminated; out/registry.c */

#endif
