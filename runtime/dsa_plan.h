/* A generated configuration as libdsa receives it: the files of its folder (plan.txt, config.h,
 * the kernel sources). Linked configurations carry them embedded (out/<config>/glue.c, listed in
 * out/registry.c); dsa_ctx_create_dir reads them from a folder. Either way runtime/plan.c parses
 * plan.txt the same way. Shared by the generated glue and the runtime. */
#ifndef DSA_PLAN_H
#define DSA_PLAN_H

#include <stddef.h>

/* This struct's layout and, with it, plan.txt's format ("dsa-plan 5"; 4: the sources' SHA-256 and
 * the plan's seal; 5: index_topk_split_min_keys). */
#define DSA_PLAN_ABI 5

typedef struct dsa_source {
    const char *name; /* the file's name in the folder, as the kernels include it */
    const char *text;
    const size_t *len;
} dsa_source_t;

typedef struct dsa_plan {
    int abi; /* DSA_PLAN_ABI */
    const char *name;
    int nfiles;
    const dsa_source_t *files;
} dsa_plan_t;

extern const dsa_plan_t *const dsa_registry[]; /* NULL-terminated; out/registry.c */

#endif
