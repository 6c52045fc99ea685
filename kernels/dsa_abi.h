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

/* Bumped whenever a parameter block changes, or what the kernel library needs from a configuration's
 * config.h (14: the CTA sizes and the rope table's length); generated glue and the runtime check it,
 * so that a folder from another dsagen is refused with "regenerate", not an NVRTC error. */
#define DSA_ABI_VERSION 14

/* The most DCP ranks whose exchange buffers the attend kernels store into directly (the fused
 * exchange); larger groups exchange through the transport's all-to-all. */
#define DSA_MAX_PEERS 8

/* The most partials one LSE merge takes (kernels/dsa_merge.cuh, which stages their LSEs in shared
 * memory, one per thread of the merge's CTA): a row's attend splits, or the DCP ranks. The
 * generator caps attend_max_splits at it and the plan reader bounds it by it. */
#define DSA_MERGE_MAX 32

/* The sparse MLA compacts a row's top-k this many entries at a time (a segment; kernels/
 * dsa_attend_layout.cuh). A larger top-k takes several segments, which the generator's choice of
 * CTA pairs looks at. */
#define DSA_ATTEND_SEGMENT 2048

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

/* Stage B.1: the indexer query, per (token, head): rope, Hadamard, e4m3 with a power-of-two scale;
 * the weight folded with that scale. One warp per (token, head): grid (T, ceil(idx_heads / 8)). */
typedef struct dsa_index_q_params {
    const uint16_t *q;            /* [T, idx_heads, idx_head_dim] bf16, token stride q_stride */
    const float *weights;         /* [T, idx_heads], token stride w_stride */
    const int64_t *positions;     /* [T] */
    const float *rope_cos, *rope_sin;
    uint8_t *q8;                  /* [T, idx_heads, idx_head_dim] e4m3 */
    float *wq;                    /* [T, idx_heads]: w * q_scale * idx_head_dim^-0.5 * idx_heads^-0.5 */
    int64_t q_stride, w_stride;
    int32_t num_tokens;
} dsa_index_q_params;

/* Stage B.2: scores of each row's keys on this rank, as orderable keys (0: no key). Grid
 * (T, splits): the CTAs of a row stride over its keys. */
typedef struct dsa_index_score_params {
    const uint8_t *q8;
    const float *wq;
    const int64_t *positions;     /* [T] */
    const int32_t *req_of_token;  /* [T] */
    const int32_t *seq_lens;      /* [num_requests] */
    const int32_t *block_table;   /* [num_requests, max_blocks] this rank's blocks */
    const uint8_t *idx_cache;     /* this rank's indexer pages */
    uint32_t *keys;               /* [T, key_stride]: by local index */
    uint32_t *topk_hist;          /* or NULL: the split top-k's row state [T, hist_stride] words, whose first
                                     radix pass's histogram the score kernel counts (on sm_90a, rows of more
                                     than idx_topk_split_keys keys; a CTA's count of a bin below 65536) */
    int64_t num_slots, max_blocks, num_requests, key_stride, hist_stride;
    int32_t num_tokens, rank;
} dsa_index_score_params;

/* Stage B.3: the top-k of each row over this rank's keys. DCP = 1: the positions, ascending, -1
 * padded; DCP > 1: the candidates (key, position) for the exchange. Grid T, or (T, splits) for the
 * split kernel, whose CTAs of a row share its split_state. Stage B.4 (DCP > 1): the merge of the W
 * candidate lists of each row into its positions. Grid T. */
typedef struct dsa_index_topk_params {
    const uint32_t *keys;         /* B.3: [T, key_stride] */
    const uint32_t *cand_in;      /* B.4: [W][T][idx_topk] (key, position) pairs, each list ascending */
    uint32_t *merged;             /* B.4: [T][W * idx_topk] (key, position) pairs, ascending */
    const int64_t *positions;
    const int32_t *req_of_token;
    const int32_t *seq_lens;
    uint32_t *cand_out;           /* B.3, DCP > 1: [T][idx_topk] (key, position) pairs; with cfused unused */
    uint32_t *cdest[DSA_MAX_PEERS]; /* B.3, cfused (the fused candidate gather): rank r's cand_in, whose
                                     list block `rank` gets this rank's lists */
    int32_t *topk;                /* [T, topk_stride] */
    uint32_t *split_state;        /* B.3 split: [T, state_stride] words, zero before and after a launch */
    int64_t num_requests, key_stride, topk_stride, state_stride;
    int32_t num_tokens, rank, cfused;
    int32_t bit_keys;             /* B.3 split: a CTA whose chunk has at least this many keys emits it from a
                                     bit a key (the plan's index_topk_bit_keys; a testing hook sets others) */
    int32_t hist_given;           /* B.3 split: 1 where the score kernel was given split_state (topk_hist): a
                                     row whose first pass counts nothing there counts itself; 2: the same, and
                                     each chunk stores its candidates by reading its keys twice (a test of the
                                     path of a chunk whose candidates overflow shared memory) */
    int32_t discard_keys;         /* B.3: 1: each row's keys dropped from L2 after their last read, without a
                                     write-back (dead then; the score kernel stores them evict-last); 0 where a
                                     test reads them after the call (dsa_testing_index_keep_keys) */
} dsa_index_topk_params;

/* Stage C.1: q = [q_lat | rope(q_pe)], one thread per 8 elements: grid (T, ceil(heads_local * kv_dim / 8 / 256)). */
typedef struct dsa_pack_params {
    const uint16_t *q_lat;        /* [T, heads_local, kv_lora_rank], token stride q_lat_stride */
    const uint16_t *q_pe;         /* [T, heads_local, qk_rope_dim], token stride q_pe_stride */
    const int64_t *positions;     /* [T] */
    const float *rope_cos, *rope_sin;
    uint16_t *q_packed;           /* [T, heads_local, kv_dim]; with qfused unused */
    uint16_t *qdest[DSA_MAX_PEERS]; /* qfused (DCP > 1, the fused gather): rank r's gathered queries
                                     [W][T][heads_local][kv_dim], which get this rank's block `rank` */
    unsigned long long *rejected; /* [2]; [1] counts positions outside the rope table */
    int64_t q_lat_stride, q_pe_stride;
    int32_t num_tokens, rank, qfused;
} dsa_pack_params;

/* Stage C.3-4: top-k to local slots and sparse MLA over this rank's keys, for every gathered
 * head. Grid (T, heads_gathered / heads per CTA, splits): with splits > 1 (a power of two) the CTA
 * of split s takes the row's top-k entries k with k % splits == s and writes its fp32 partial to
 * split_out / split_lse, which the split merge (Stage C.4b) combines. */
typedef struct dsa_attend_params {
    const uint16_t *q;            /* DCP > 1: [W][T][heads_local][kv_dim], the gathered queries, rank-major */
    dsa_pack_params pack;         /* DCP = 1: the host's q_lat and q_pe, which attend packs itself
                                     (q_lat, q_pe, positions, rope tables, rejected; the rest unused) */
    const int32_t *topk;          /* [T, topk_stride] global positions, -1 padded */
    const int32_t *req_of_token;  /* [T] */
    const int32_t *seq_lens;      /* [num_requests] */
    const int32_t *block_table;   /* [num_requests, max_blocks] this rank's blocks */
    const uint8_t *kv_cache;      /* this rank's MLA cache */
    uint16_t *out;                /* DCP = 1: [T, heads_local, kv_lora_rank] bf16 */
    float *lse;                   /* DCP = 1: [T, heads_local], may be NULL */
    uint8_t *xdest[DSA_MAX_PEERS]; /* DCP > 1: where the partials of rank r's heads go (ExchangeBlocks,
                                     kernels/dsa_merge.cuh: bf16 partials, then fp32 LSEs): xfused 0:
                                     block r of this rank's send buffer xdest[0]; 1: block `rank` of
                                     rank r's receive buffer xdest[r], stored over the interconnect */
    float *split_out;             /* splits > 1: [splits][T][heads_gathered][kv_lora_rank] fp32 */
    float *split_lse;             /* splits > 1: [splits][T][heads_gathered] */
    int64_t num_slots, max_blocks, num_requests, topk_stride;
    int32_t num_tokens, rank, splits, xfused;
} dsa_attend_params;

/* Stage C.4b (splits > 1): the LSE merge of a row's split partials, in split order, into what
 * attend writes with one split: out and lse (DCP = 1), or the partials for the exchange (DCP > 1).
 * Grid (T, heads_gathered). */
typedef struct dsa_split_merge_params {
    const float *split_out;       /* [splits][T][heads_gathered][kv_lora_rank] */
    const float *split_lse;       /* [splits][T][heads_gathered] */
    uint16_t *out;                /* DCP = 1: [T, heads_local, kv_lora_rank] bf16 */
    float *lse;                   /* DCP = 1: [T, heads_local], may be NULL */
    uint8_t *xdest[DSA_MAX_PEERS]; /* DCP > 1: as dsa_attend_params */
    int32_t num_tokens, splits, rank, xfused;
} dsa_split_merge_params;

/* DCP > 1, the fused gather and exchange over NCCL windows: a barrier of the group on the GPU
 * (kernels/dsa_barrier.cuh), one CTA of DSA_BARRIER_THREADS threads. A rank that waits longer than
 * DSA_BARRIER_TIMEOUT_S seconds for a peer gives up and records 1 + that peer's rank in *error. */
#define DSA_BARRIER_THREADS 32
#define DSA_BARRIER_TIMEOUT_S 30
typedef struct dsa_barrier_params {
    uint64_t *flags_peer[DSA_MAX_PEERS]; /* rank r's flag array [W] (a window), as this GPU addresses it */
    uint64_t *flags_own;          /* this rank's flag array: word s is rank s's last epoch */
    unsigned long long *epoch;    /* this rank's last barrier's epoch (plain device memory) */
    unsigned int *error;          /* 0, or 1 + the first rank this rank gave up waiting for */
    int32_t rank, size;
} dsa_barrier_params;

/* Stage C.5: LSE merge of the W partials of this rank's heads, in rank order. Grid (T, heads_local). */
typedef struct dsa_merge_params {
    const uint8_t *xrecv;         /* the exchange's W blocks, block r from rank r (ExchangeBlocks) */
    uint16_t *out;                /* [T, heads_local, kv_lora_rank] bf16 */
    float *lse;                   /* [T, heads_local], may be NULL */
    int32_t num_tokens;
} dsa_merge_params;

#endif
