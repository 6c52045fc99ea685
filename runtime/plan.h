/* A configuration as the runtime reads it from plan.txt: every number the runtime uses, derived
 * once by dsagen. The runtime recomputes none of them; it checks they are in range so that a bad
 * folder is an error, never an overflow. */
#ifndef DSA_RT_PLAN_H
#define DSA_RT_PLAN_H

#include <stdint.h>

#include "dsa_plan.h"
#include "error.h"

#define DSA_MAX_TARGETS 8
#define DSA_MAX_ROPE_PAIRS 128
#define DSA_NAME_MAX 128

/* The kernel modules of a configuration, one source file each. */
enum { DSA_MODULE_PROLOGUE, DSA_MODULE_ATTEND, DSA_MODULE_INDEX, DSA_NMODULES };

typedef struct dsa_module_desc {
    char name[16];          /* "prologue" */
    char file[64];          /* "prologue.cu" */
    dsa_source_t source;
    const char *entry;      /* the module's first entry, for the JIT's report */
} dsa_module_desc_t;

typedef struct dsa_cfg {
    dsa_config_info_t info;
    char name[DSA_NAME_MAX], symbol[DSA_NAME_MAX], cache_dtype_name[16];
    int ntargets;
    char targets[DSA_MAX_TARGETS][16];
    int attend_heads_per_cta;
    int64_t q_lat_row, q_pe_row, out_row, lse_row, idx_q_row; /* the calls' tensors, elements per token */
    /* workspaces and collectives, bytes per token */
    int64_t ws_q_packed, ws_q_gathered, ws_partial_out, ws_partial_lse, exchange_row, ws_exchange;
    /* kernels */
    dsa_source_t config_h;
    dsa_module_desc_t modules[DSA_NMODULES];
    /* plan.txt's "source FILE SHA256" lines: what config.h and the module files hash to as dsagen
     * wrote them (dsa_plan_check_sources) */
    struct {
        char file[64];
        char sha256[65];
    } sources[8]; /* config.h and the modules' files need DSA_NMODULES + 1; more is refused */
    int nsources;
    char entry_prologue[192], entry_rope_table[192], entry_pack_q[192], entry_attend[192], entry_merge[192],
        entry_split_merge[192], entry_split_merge_few[192], entry_attend_smem[192], entry_attend_threads[192], entry_attend_cluster_merge[192], entry_index_q[192], entry_index_score[192], entry_index_score_few[192],
        entry_index_score_group[192], entry_index_score_group_smem[192],
        entry_index_topk[192], entry_index_topk_split[192], entry_index_merge[192],
        entry_barrier[192]; /* entry_merge, entry_index_merge, entry_barrier: "" at dcp 1 */
    unsigned prologue_threads, rope_threads, pack_threads, merge_threads, split_merge_few;
    unsigned pack_ctas_per_token, attend_ctas_per_token, attend_max_splits, attend_cluster;
    unsigned index_q_threads, index_q_ctas_per_token, index_score_threads, index_score_keys_per_cta, index_topk_threads;
    unsigned index_merge_smem, index_score_few_rows;
    unsigned index_score_group_rows; /* rows of one request a grouped score CTA takes (1: none) */
    unsigned index_topk_split_threads, index_topk_split_max; /* the split top-k: CTA size, most CTAs a row */
    unsigned index_topk_split_min, index_topk_split_keys;     /* fewest CTAs a row worth a split; keys a CTA at least */
    unsigned index_topk_split_min_keys; /* rows of at most this many keys take one CTA a row */
    unsigned index_topk_bit_keys; /* a split top-k CTA of at least this many keys emits from a bit a key */
    unsigned index_score_bins; /* 1: index_score counts the split top-k's first pass (DSA_IDX_SCORE_BINS) */
    /* stage B: keys of a row on one rank at most; workspaces per row, bytes */
    int64_t idx_max_local, ws_idx_q8, ws_idx_wq, ws_idx_keys, ws_idx_cand, ws_idx_merged, ws_idx_topk_state;
    /* rope table */
    int64_t rope_entries;
    double rope_mscale, rope_freq[DSA_MAX_ROPE_PAIRS];
    int nrope_freq;
    /* the file texts when read from a folder (owned; NULL for linked configurations) */
    char *owned[8];
    size_t owned_len[8];
} dsa_cfg_t;

/* Parses plan.txt's text into c (zeroed by the caller); where names the file in messages
 * ("WHERE:LINE: error: ..."). runtime/plan.c. */
DSA_HIDDEN dsa_result_t dsa_plan_parse(const char *where, const char *text, size_t len, dsa_cfg_t *c, char *err,
                                       size_t errlen);

/* Checks that config.h and every module's source, attached to c, hash to plan.txt's source lines:
 * DSA_ERROR_INVALID_ARGUMENT with "WHERE: error: ..." in err otherwise (a folder edited after
 * generation, or mixing two). runtime/plan.c. */
DSA_HIDDEN dsa_result_t dsa_plan_check_sources(const char *where, const dsa_cfg_t *c, char *err, size_t errlen);

/* A digest (FNV-1a) of the plan's numbers that size what DCP ranks write into each other's buffers:
 * ranks of one group must agree on it. runtime/plan.c. */
DSA_HIDDEN uint64_t dsa_plan_layout(const dsa_cfg_t *c);

/* The whole-number value of plan.txt's key in c (an int, unsigned or int64 field): 0, or -1 when
 * the plan has no such number. runtime/plan.c. */
DSA_HIDDEN int dsa_plan_number(const dsa_cfg_t *c, const char *key, int64_t *value);

/* The parsed plan of a linked configuration, parsed once and kept for the library's lifetime;
 * NULL with the message in err when config is not linked or its plan does not parse. */
DSA_HIDDEN const dsa_cfg_t *dsa_cfg_linked(const char *config, char *err, size_t errlen);
DSA_HIDDEN const dsa_cfg_t *dsa_cfg_of_plan(const dsa_plan_t *plan, char *err, size_t errlen);

/* Reads a generated configuration folder (plan.txt and the files it names): a new dsa_cfg_t, or
 * NULL with "DIR/plan.txt:LINE: error: ..." in err. Free with dsa_cfg_free. */
DSA_HIDDEN dsa_result_t dsa_cfg_load_dir(const char *dir, dsa_cfg_t **out, char *err, size_t errlen);
DSA_HIDDEN void dsa_cfg_free(dsa_cfg_t *cfg);

#endif
