// One configuration as a C++ type: the DSA_* macros of its config.h, read here and nowhere else.
// A generated kernel file includes config.h, then this, and instantiates the library's kernel bodies
// with dsa::Config; the rest of the library takes the configuration as a template parameter.
#pragma once
#ifndef DSA_CONFIG_NAME
#error "include the configuration's config.h before dsa_config.cuh"
#endif

namespace dsa {

// Integers and flags are enumerators and the fp32 values functions, not static data members: NVRTC
// emits every constant variable as a global of the module, which would move the module's other
// globals (and with them addresses in the machine code).
struct Config {
    enum : int {
        // model geometry; rope of the MLA query and key
        q_lora_rank = DSA_Q_LORA_RANK,
        kv_lora_rank = DSA_KV_LORA_RANK,
        qk_rope_dim = DSA_QK_ROPE_DIM,
        kv_dim = DSA_KV_DIM, // latent then rope
        max_positions = DSA_MAX_POSITIONS,
        block_size = DSA_BLOCK_SIZE,
        rope_interleaved = DSA_ROPE_INTERLEAVED,
        // the CTA sizes of the prologue, the query pack and the merges (the launches are the plan's)
        prologue_threads = DSA_PROLOGUE_THREADS,
        pack_threads = DSA_PACK_THREADS,
        merge_threads = DSA_MERGE_THREADS,
        // indexer: its query heads, key, top-k; stage B's CTA sizes
        idx_heads = DSA_IDX_HEADS,
        idx_head_dim = DSA_IDX_HEAD_DIM,
        idx_topk = DSA_IDX_TOPK,
        idx_rope_interleaved = DSA_IDX_ROPE_INTERLEAVED,
        idx_rope_first = DSA_IDX_ROPE_FIRST,
        idx_hadamard = DSA_IDX_HADAMARD,
        idx_q_threads = DSA_IDX_Q_THREADS,
        idx_score_threads = DSA_IDX_SCORE_THREADS,
        idx_topk_threads = DSA_IDX_TOPK_THREADS,
        idx_merge_smem = DSA_IDX_MERGE_SMEM,
        idx_score_min_ctas = DSA_IDX_SCORE_MIN_CTAS,
        idx_score_keys_per_cta = DSA_IDX_SCORE_KEYS_PER_CTA,
        idx_score_group_rows = DSA_IDX_SCORE_GROUP_ROWS,
        idx_score_stages = DSA_IDX_SCORE_STAGES,
        idx_topk_split_threads = DSA_IDX_TOPK_SPLIT_THREADS,
        idx_topk_radix_bits = DSA_IDX_TOPK_RADIX_BITS,
        idx_topk_split_keys = DSA_IDX_TOPK_SPLIT_KEYS,
        idx_topk_split_min_keys = DSA_IDX_TOPK_SPLIT_MIN_KEYS,
        idx_topk_split_max = DSA_IDX_TOPK_SPLIT_MAX,
        idx_topk_split_cands = DSA_IDX_TOPK_SPLIT_CANDS,
        idx_topk_state_bytes = DSA_IDX_TOPK_STATE_BYTES,
        idx_score_bins = DSA_IDX_SCORE_BINS,
        // topology: DCP ranks, their interleave, this rank's heads and the heads it attends for
        dcp = DSA_DCP,
        interleave = DSA_INTERLEAVE,
        heads_local = DSA_HEADS_LOCAL,
        heads_gathered = DSA_HEADS_GATHERED,
        attend_heads_per_cta = DSA_ATTEND_HEADS_PER_CTA,
        attend_producers = DSA_ATTEND_PRODUCERS,
        attend_ws_threads = DSA_ATTEND_WS_THREADS, // the generator's count of the warp-specialised CTA
        attend_cluster = DSA_ATTEND_CLUSTER,
        attend_max_splits = DSA_ATTEND_MAX_SPLITS,
        split_merge_few = DSA_SPLIT_MERGE_FEW, // the few-splits merge entry: splits up to this, as many loads in flight
        exchange_row = DSA_EXCHANGE_ROW_BYTES, // bytes per row of one rank's block of the DCP exchange
        // MLA cache entry: format (CacheFormat, dsa_cache_format.cuh), bytes per token, offsets in it
        cache_format = DSA_CACHE_DTYPE,
        cache_bytes = DSA_CACHE_BYTES_PER_TOKEN,
        cache_scale_offset = DSA_CACHE_SCALE_OFFSET,
        cache_rope_offset = DSA_CACHE_ROPE_OFFSET,
        cache_fp8_scale_pow2 = DSA_CACHE_FP8_SCALE_POW2,
    };
    __device__ static constexpr float rms_norm_eps() { return DSA_RMS_NORM_EPS; }
    __device__ static constexpr float idx_norm_eps() { return DSA_IDX_NORM_EPS; }
    __device__ static constexpr float softmax_scale() { return DSA_SOFTMAX_SCALE; }
    __device__ static constexpr long long rope_entries() { return DSA_ROPE_ENTRIES; } // the plan's, the runtime's allocation
};

} // namespace dsa
