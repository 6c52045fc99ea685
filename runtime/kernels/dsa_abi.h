/* The parameter blocks that the host (C11) passes to dsagen's kernels (CUDA C++ through NVRTC).
 * Both sides include this one file, so the layouts cannot drift apart. */
#ifndef DSA_ABI_H
#define DSA_ABI_H

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

/* Bumped whenever a parameter block changes; generated glue and the runtime check it. */
#define DSA_ABI_VERSION 1

/* Stage A, one launch: one CTA per token. Activations and weights are bf16 (as uint16_t bits). */
typedef struct dsa_prologue_params {
    const uint16_t *q_c;          /* [T, q_lora_rank], row stride q_c_stride elements */
    uint16_t *q_c_out;            /* [T, q_lora_rank], dense */
    const uint16_t *kv;           /* [T, kv_lora_rank + qk_rope_dim], row stride kv_stride */
    const uint16_t *idx_k;        /* [T, idx_head_dim], row stride idx_k_stride; NULL: no indexer cache write */
    const int64_t *positions;     /* [T] */
    const int64_t *slot_mapping;  /* [T]; -1: not this rank's slot, or padding */
    const uint16_t *q_norm_w;     /* [q_lora_rank] */
    const uint16_t *kv_norm_w;    /* [kv_lora_rank] */
    const uint16_t *idx_norm_w;   /* [idx_head_dim] LayerNorm weight */
    const uint16_t *idx_norm_b;   /* [idx_head_dim] LayerNorm bias */
    const float *rope_cos;        /* [max_positions, qk_rope_dim / 2], computed by the runtime */
    const float *rope_sin;
    uint8_t *kv_cache;            /* [num_slots, cache_bytes_per_token] */
    uint8_t *idx_cache;           /* [num_slots / block_size, idx_page_bytes] */
    int32_t *topk;                /* [T, idx_topk]; NULL or clear_topk == 0: left untouched */
    unsigned long long *rejected; /* [2]: tokens skipped for a slot >= num_slots, for a bad position */
    int64_t num_slots;            /* num_blocks * block_size */
    int64_t q_c_stride, kv_stride, idx_k_stride;
    int32_t num_tokens;
    int32_t clear_topk;
} dsa_prologue_params;

#endif
