/* The validated model of a spec: geometry, configurations, and every derived value, computed in
 * one place (dsg_derive) so templates only format them. */
#ifndef DSG_SPEC_H
#define DSG_SPEC_H

#include <stddef.h>

#include "diag.h"
#include "sandbox.h"
#include "trusted.h"

typedef enum { DSG_ROPE_INTERLEAVED, DSG_ROPE_NEOX } dsg_rope_style;
typedef enum { DSG_CACHE_BF16, DSG_CACHE_FP8_DS_MLA, DSG_CACHE_NVFP4_DS_MLA } dsg_cache_dtype;

#define DSG_MAX_TARGETS 8
#define DSG_MAX_CONFIGS 64
#define DSG_MAX_ROPE_PAIRS 128 /* qk_rope_dim <= 256 */

typedef struct dsg_geometry {
    int heads, q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    double rms_norm_eps;
    int max_positions, block_size;
    double rope_theta;
    int rope_style;
    int has_yarn;
    double yarn_factor;
    int yarn_original_max_positions;
    double yarn_beta_fast, yarn_beta_slow, yarn_mscale, yarn_mscale_all_dim;
    int has_softmax_scale;
    double softmax_scale;
    int idx_heads, idx_head_dim, idx_topk, idx_rope_style, idx_rope_first, idx_hadamard;
    double idx_norm_eps;
} dsg_geometry;

typedef struct dsg_config {
    int tp, dcp, interleave, cache_dtype, fp8_scale_pow2;
    int ntargets;
    int targets[DSG_MAX_TARGETS]; /* indexes into dsg_target_names */
    int line;                     /* of the configuration's table, for messages */
    char name[128];               /* e.g. glm5.2_tp4_dcp4_i1_fp8_ds_mla */
    char symbol[128];             /* the name as a C identifier */
} dsg_config;

typedef struct dsg_spec {
    const char *path;
    char model[64];
    dsg_geometry g;
    int nconfigs;
    dsg_config configs[DSG_MAX_CONFIGS];
} dsg_spec;

/* Derived values of one configuration (see docs/layouts.md and docs/design.md, "The step"). */
typedef struct dsg_derived {
    int heads_local;       /* heads / tp */
    int heads_gathered;    /* heads_local * dcp: the heads each rank attends for */
    int attend_heads_per_cta; /* gathered heads per sparse MLA CTA: 64, 32 or 16 (padded, masked) */
    int attend_producers;     /* sm_90a: producer warpgroups of a sparse MLA CTA (2 at 16 heads, else 1) */
    int attend_cluster;       /* sparse MLA CTAs of a row that share each key tile (1 or 2) */
    int attend_max_splits;    /* CTAs a row's top-k may be split over: a power of two, >= 256 entries each */
    int qk_head_dim;       /* qk_nope_dim + qk_rope_dim */
    int kv_dim;            /* kv_lora_rank + qk_rope_dim: the packed query and key width */
    double softmax_scale;  /* given, or qk_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2 */
    double rope_mscale;    /* YaRN cos/sin scale mscale(factor, mscale) / mscale(factor, mscale_all_dim) */
    /* MLA cache entry */
    int cache_bytes_per_token;
    int cache_latent_offset, cache_latent_bytes;
    int cache_scale_offset, cache_scale_bytes, cache_scale_group; /* values per scale */
    int cache_rope_offset, cache_rope_bytes;
    /* indexer K cache */
    int idx_bytes_per_token, idx_page_bytes, idx_scale_offset_in_page;
    /* workspaces and collectives, bytes per token */
    int ws_q_packed, ws_q_gathered, ws_partial_out, ws_partial_lse;
    int gather_send, gather_recv, exchange_send, exchange_recv;
    int exchange_row; /* a row of one rank's block of the exchange's all-to-all: bf16 partials, fp32 LSEs */
    int ws_exchange;  /* the exchange's send (and receive) buffer per row: dcp blocks */
    int ws_attend_row; /* device workspace of the attend step per row of a chunk */
    /* a row's sparse MLA on this rank, for PLAN.md (a rank owns idx_topk / dcp of a row's keys
     * on average): keys, key bytes read, FLOPs (2 x heads_gathered x keys x (kv_dim + kv_lora_rank)) */
    int attend_row_keys;
    long long attend_row_bytes, attend_row_flops;
    int attend_split_keys;  /* the fewest of this rank's keys a split CTA takes (attend_max_splits splits) */
    int attend_ws_threads;  /* the warp-specialised sm_90a CTA: two consumer warpgroups and the producers */
    int topk_row_bytes;     /* a top-k row: idx_topk int32 */
    /* the host's tensors of the attend and index calls, elements per token (dense) */
    int q_lat_row, q_pe_row, out_row, lse_row, idx_q_row;
    /* launch shapes: threads per CTA of each kernel, CTAs per token where a token spans several */
    int prologue_threads, rope_threads, pack_threads, merge_threads;
    int split_merge_few; /* the most splits the few-splits merge entry takes (its loads in flight a thread) */
    int pack_ctas_per_token, attend_ctas_per_token;
    long long rope_entries; /* cos/sin table entries: max_positions * qk_rope_dim / 2 */
    /* stage B: keys per row on one rank at most; workspaces per row (bytes); launch shapes */
    int idx_max_local;
    int ws_idx_q8, ws_idx_wq, ws_idx_keys, ws_idx_cand, ws_idx_merged, ws_index_row;
    int index_q_threads, index_q_ctas_per_token, index_score_threads, index_score_keys_per_cta, index_topk_threads;
    int index_merge_smem;     /* dynamic shared memory of the DCP index merge, bytes (0: it reads global memory) */
    int index_score_few_rows; /* a chunk of fewer rows scores on mma.sync (index_score_few) */
    int index_score_min_ctas; /* CTAs per SM the score kernel is compiled for (its register cap) */
    int index_score_group_rows; /* rows of one request index_score_group scores in one CTA (1: none) */
    int index_score_stages;     /* key slots of index_score's ring (sm_90a; dsg_score_stages) */
    /* the top-k split over several CTAs of a row: threads per CTA, radix digit bits, the fewest keys
     * a CTA takes, the most CTAs a row can use, and the row's shared state (bytes) */
    int index_topk_split_threads, index_topk_radix_bits, index_topk_split_keys, index_topk_split_max;
    int index_topk_split_min; /* fewer CTAs a row than this: one CTA a row (measured on an H200) */
    int index_topk_split_min_keys; /* rows of at most this many keys: one CTA a row (measured on an H100) */
    int index_topk_split_cands; /* keys of the first pass's bin the split top-k finishes in shared memory */
    int index_topk_bit_keys;    /* the fewest keys of a split top-k CTA's chunk it emits from a bit a key */
    int index_score_bins;       /* 1: index_score counts the split top-k's first radix pass */
    int ws_idx_topk_state;
    /* rope: per-pair frequencies (theta^(-2i/d), YaRN-corrected) and the cos/sin scale */
    double rope_freq[DSG_MAX_ROPE_PAIRS];
} dsg_derived;

extern const char *const dsg_target_names[];
extern const char *const dsg_cache_dtype_names[];
extern const char *const dsg_rope_style_names[];

/* Validates the table on the sandbox's stack top into spec; reports every error (up to the
 * diagnostic limit) with the line of the offending field. Returns 0 when the spec is valid. */
int dsg_spec_validate(dsg_spec *spec, dsg_sandbox *sb, dsg_trusted *t, dsg_diag *d);

void dsg_derive(const dsg_geometry *g, const dsg_config *c, dsg_derived *out);
/* the key slots of index_score's ring at this geometry (gen/spec.c says how they are chosen) */
int dsg_score_stages(const dsg_geometry *g);
/* Query heads a sparse MLA CTA takes: 64, 32 or 16, of the heads gathered on a rank (heads / tp x
 * dcp; tp must divide heads) */
int dsg_attend_heads_per_cta(const dsg_geometry *g, const dsg_config *c);

/* YaRN's attention scale factor: 0.1 * m * ln(s) + 1 for s > 1, else 1. */
double dsg_yarn_mscale(double scale, double m);

#endif
