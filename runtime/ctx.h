/* The context: what dsa_ctx_create builds (ctx.c) and the per-layer calls use (calls.c). */
#ifndef DSA_CTX_H
#define DSA_CTX_H

#include <stdint.h>

#include "kernels/dsa_abi.h"
#include "plan.h"
#include "transport.h"

struct dsa_ctx {
    dsa_err_slot_t err;      /* first: error.c records messages here */
    const dsa_cfg_t *cfg;    /* the plan */
    dsa_cfg_t *owned_cfg;    /* set when read from a folder (dsa_ctx_create_dir) */
    dsa_options_t opts;
    char target[16];
    CUdevice dev;
    CUcontext cu;
    CUmodule modules[DSA_NMODULES];
    dsa_kernel_info_t info[DSA_NMODULES]; /* what dsa_ctx_kernels reports */
    CUfunction prologue_fn, pack_fn, attend_fn, split_merge_fn, split_merge_few_fn, merge_fn, barrier_fn;
    CUfunction index_q_fn, index_score_fn, index_score_few_fn, index_score_group_fn, index_topk_fn, index_topk_split_fn,
        index_merge_fn;
    int sms;                        /* the device's multiprocessors, read once at creation */
    int score_slots, score_few_slots, score_group_slots; /* CTAs of index_score / _few / _group resident at once:
                                                          their split */
    unsigned score_group_smem;      /* index_score_group's dynamic shared memory, exported by its module */
    int score_group_rows;           /* rows it scores in one CTA; 0: it groups none (no wgmma on the target) */
    int x_fused;                    /* 1: the fused gathers and exchange: pack, the index top-k and
                                       attend store into every rank's ws_qg, ws_icand_recv and
                                       ws_x_recv (q_peer, c_peer, x_peer); 2: to be decided at the
                                       first index or attend call (peers_at_first_call) */
    int x_fused_off;                /* 1: the collectives even so (dsa_testing_fused_exchange) */
    CUdeviceptr q_peer[DSA_MAX_PEERS], c_peer[DSA_MAX_PEERS], x_peer[DSA_MAX_PEERS]; /* every rank's ws_qg,
                                                                           ws_icand_recv, ws_x_recv here */
    int bar_device;                 /* 1: the fused path's barriers are barrier_fn over flags in the
                                       transport's windows (dsa_resolve_peers); 0: its barrier() */
    int bar_device_off;             /* 1: the transport's barrier() even so (dsa_testing_device_barrier) */
    dsa_barrier_params bar;         /* barrier_fn's parameters, the same for every launch */
    CUdeviceptr bar_state;          /* its epoch (u64) and error word (u32): plain device memory */
    int no_pdl;                     /* 1: plain launches, not programmatic dependent ones (dsa_testing.h) */
    int force_score;                /* 0 automatic, 1 index_score_few, 2 index_score, 3 index_score_group
                                       (dsa_testing.h) */
    int topk_slots;                 /* split top-k CTAs resident at once: its split; 0: one CTA a row */
    int force_topk;                 /* 0 automatic, 1 one CTA a row, 2 split from 2 CTAs a row (dsa_testing.h) */
    int topk_cap;                   /* 0, or the most CTAs a row's split top-k gets (dsa_testing.h) */
    int topk_bit_keys;              /* 0 (the plan's), or the split top-k's bit emit threshold (dsa_testing.h) */
    int keep_index_keys;            /* 1: the top-k leaves the score keys in memory (dsa_testing_index_keep_keys) */
    int no_score_bins;              /* 1: the split top-k counts its first pass itself (dsa_testing_index_score_bins) */
    int no_bins_stage;              /* 1: given those counts, each chunk reads its keys twice (the same hook) */
    int fail_topk;                  /* 1: each index chunk fails before its top-k (dsa_testing_index_fail_topk) */
    unsigned attend_smem;           /* dynamic shared memory of attend_fn, exported by its module */
    unsigned attend_threads;        /* threads of attend_fn, exported by its module (by its target) */
    int attend_slots;               /* attend CTAs resident at once on the device: what splits fill */
    int force_splits;               /* 0, or the splits every attend call uses (dsa_testing.h) */
    unsigned attend_cluster_merge;  /* the most splits of a row its CTAs merge in their cluster, exported by
                                       attend_fn's module (0: the split merge kernel always) */
    int attend_clusters[5];         /* [k]: clusters of 2^k such CTAs resident at once (k = 1 .. 4; 0: none) */
    int cluster_merge_off;          /* 1: the split merge kernel even so (dsa_testing_attend_cluster_merge) */
    CUevent const *marks;           /* stage timing (dsa_testing.h): events recorded after each step */
    const char **mark_names;
    int mark_cap, *mark_count;
    CUdeviceptr rope_cos, rope_sin; /* [max_positions, qk_rope_dim / 2] fp32 */
    CUdeviceptr rejected;           /* 2 x u64 */
    dsa_transport_t *dcp;           /* NULL at dcp 1 */
    int64_t ws_tokens;              /* rows per attend chunk: the workspaces below hold this many */
    CUdeviceptr ws_q, ws_qg;        /* packed query; gathered query (dcp > 1) */
    CUdeviceptr ws_x_send, ws_x_recv; /* the exchange's blocks (dcp > 1) */
    int64_t split_rows;             /* (row, split) partials the split workspaces hold: attend_slots / ctas per row */
    CUdeviceptr ws_so, ws_sl;       /* split partials: outputs, LSEs */
    int64_t idx_tokens;             /* rows per index chunk */
    CUdeviceptr ws_iq8, ws_iwq, ws_ikeys;           /* index query, weights, score keys */
    CUdeviceptr ws_itopk_state;                     /* the split top-k's row states, zero between calls */
    CUdeviceptr ws_icand, ws_icand_recv, ws_imerged; /* candidates (dcp > 1) */
};

/* Every rank's ws_x_recv, ws_qg and ws_icand_recv as this GPU addresses them (the transport's
 * peers(), a call of the whole group), and so whether the gathers and the exchange are fused
 * (x_fused 1) or collectives (0); where fused, which barrier replaces each collective
 * (bar_device). The context's log says which. */
DSA_HIDDEN dsa_result_t dsa_resolve_peers(dsa_ctx_t ctx);

#endif
