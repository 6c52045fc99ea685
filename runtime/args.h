/* Argument checks of the per-layer calls: every pointer, stride, size and count checked before
 * anything is enqueued, with a message naming the argument; nothing is written on a failure. */
#ifndef DSA_ARGS_H
#define DSA_ARGS_H

#include "ctx.h"

typedef struct dsa_prologue_strides {
    int64_t q_c, kv, idx_k; /* elements per row */
} dsa_prologue_strides_t;

typedef struct dsa_attend_strides {
    int64_t q_lat, q_pe, topk; /* elements per row */
} dsa_attend_strides_t;

typedef struct dsa_index_strides {
    int64_t q, weights, topk; /* elements per row */
} dsa_index_strides_t;

/* DSA_SUCCESS and the row strides (0 in the arguments: dense), or the first bad argument. */
DSA_HIDDEN dsa_result_t dsa_check_prologue(dsa_ctx_t ctx, const dsa_prologue_args_t *a, dsa_prologue_strides_t *s);
DSA_HIDDEN dsa_result_t dsa_check_attend(dsa_ctx_t ctx, const dsa_attend_args_t *a, dsa_attend_strides_t *s);
DSA_HIDDEN dsa_result_t dsa_check_index(dsa_ctx_t ctx, const dsa_index_args_t *a, dsa_index_strides_t *s);

#endif
