/* The layout of the structs that tests/bench/dsa_ctypes.py binds, as the C compiler makes them:
 * "size STRUCT BYTES", then "field STRUCT NAME OFFSET:SIZE" per field in declaration order.
 * `python3 tests/bench/dsa_ctypes.py --check build/tests/dsa_ctypes_layout` compares (tests/run.sh).
 * A field added to dsa.h and not here changes the struct's size, which the check also compares. */
#include <stddef.h>
#include <stdio.h>

#include "dsa.h"
#include "dsa_plan.h"

#define SIZE(T) printf("size %s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("field %s %s %zu:%zu\n", #T, #f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void)
{
    SIZE(dsa_options_t);
    FIELD(dsa_options_t, size);
    FIELD(dsa_options_t, cache_dir);
    FIELD(dsa_options_t, max_tokens);
    FIELD(dsa_options_t, device);
    FIELD(dsa_options_t, log_level);
    FIELD(dsa_options_t, target);
    FIELD(dsa_options_t, nccl_comm);
    FIELD(dsa_options_t, nccl_id);
    FIELD(dsa_options_t, inproc_group);
    FIELD(dsa_options_t, dcp_rank);
    FIELD(dsa_options_t, attend_tokens);
    FIELD(dsa_options_t, index_tokens);

    SIZE(dsa_prologue_args_t);
    FIELD(dsa_prologue_args_t, size);
    FIELD(dsa_prologue_args_t, num_tokens);
    FIELD(dsa_prologue_args_t, q_c);
    FIELD(dsa_prologue_args_t, q_c_out);
    FIELD(dsa_prologue_args_t, kv);
    FIELD(dsa_prologue_args_t, idx_k);
    FIELD(dsa_prologue_args_t, positions);
    FIELD(dsa_prologue_args_t, slot_mapping);
    FIELD(dsa_prologue_args_t, q_norm_w);
    FIELD(dsa_prologue_args_t, kv_norm_w);
    FIELD(dsa_prologue_args_t, idx_norm_w);
    FIELD(dsa_prologue_args_t, idx_norm_b);
    FIELD(dsa_prologue_args_t, kv_cache);
    FIELD(dsa_prologue_args_t, idx_cache);
    FIELD(dsa_prologue_args_t, num_cache_blocks);
    FIELD(dsa_prologue_args_t, topk);
    FIELD(dsa_prologue_args_t, clear_topk);
    FIELD(dsa_prologue_args_t, q_c_stride);
    FIELD(dsa_prologue_args_t, kv_stride);
    FIELD(dsa_prologue_args_t, idx_k_stride);

    SIZE(dsa_attend_args_t);
    FIELD(dsa_attend_args_t, size);
    FIELD(dsa_attend_args_t, num_tokens);
    FIELD(dsa_attend_args_t, q_lat);
    FIELD(dsa_attend_args_t, q_pe);
    FIELD(dsa_attend_args_t, positions);
    FIELD(dsa_attend_args_t, topk);
    FIELD(dsa_attend_args_t, req_of_token);
    FIELD(dsa_attend_args_t, seq_lens);
    FIELD(dsa_attend_args_t, block_table);
    FIELD(dsa_attend_args_t, num_requests);
    FIELD(dsa_attend_args_t, max_blocks);
    FIELD(dsa_attend_args_t, kv_cache);
    FIELD(dsa_attend_args_t, num_cache_blocks);
    FIELD(dsa_attend_args_t, out);
    FIELD(dsa_attend_args_t, lse);
    FIELD(dsa_attend_args_t, q_lat_stride);
    FIELD(dsa_attend_args_t, q_pe_stride);
    FIELD(dsa_attend_args_t, topk_stride);

    SIZE(dsa_index_args_t);
    FIELD(dsa_index_args_t, size);
    FIELD(dsa_index_args_t, num_tokens);
    FIELD(dsa_index_args_t, q);
    FIELD(dsa_index_args_t, weights);
    FIELD(dsa_index_args_t, positions);
    FIELD(dsa_index_args_t, req_of_token);
    FIELD(dsa_index_args_t, seq_lens);
    FIELD(dsa_index_args_t, block_table);
    FIELD(dsa_index_args_t, num_requests);
    FIELD(dsa_index_args_t, max_blocks);
    FIELD(dsa_index_args_t, idx_cache);
    FIELD(dsa_index_args_t, num_cache_blocks);
    FIELD(dsa_index_args_t, topk);
    FIELD(dsa_index_args_t, q_stride);
    FIELD(dsa_index_args_t, weights_stride);
    FIELD(dsa_index_args_t, topk_stride);

    SIZE(dsa_config_info_t);
    FIELD(dsa_config_info_t, size);
    FIELD(dsa_config_info_t, name);
    FIELD(dsa_config_info_t, target);
    FIELD(dsa_config_info_t, heads);
    FIELD(dsa_config_info_t, q_lora_rank);
    FIELD(dsa_config_info_t, kv_lora_rank);
    FIELD(dsa_config_info_t, qk_nope_dim);
    FIELD(dsa_config_info_t, qk_rope_dim);
    FIELD(dsa_config_info_t, v_head_dim);
    FIELD(dsa_config_info_t, kv_dim);
    FIELD(dsa_config_info_t, block_size);
    FIELD(dsa_config_info_t, max_positions);
    FIELD(dsa_config_info_t, idx_heads);
    FIELD(dsa_config_info_t, idx_head_dim);
    FIELD(dsa_config_info_t, idx_topk);
    FIELD(dsa_config_info_t, rope_interleaved);
    FIELD(dsa_config_info_t, rms_norm_eps);
    FIELD(dsa_config_info_t, softmax_scale);
    FIELD(dsa_config_info_t, tp);
    FIELD(dsa_config_info_t, dcp);
    FIELD(dsa_config_info_t, interleave);
    FIELD(dsa_config_info_t, heads_local);
    FIELD(dsa_config_info_t, heads_gathered);
    FIELD(dsa_config_info_t, cache_dtype);
    FIELD(dsa_config_info_t, cache_dtype_name);
    FIELD(dsa_config_info_t, fp8_scale_pow2);
    FIELD(dsa_config_info_t, cache_bytes_per_token);
    FIELD(dsa_config_info_t, cache_scale_offset);
    FIELD(dsa_config_info_t, cache_rope_offset);
    FIELD(dsa_config_info_t, idx_bytes_per_token);
    FIELD(dsa_config_info_t, idx_page_bytes);

    printf("plan_abi %d\n", DSA_PLAN_ABI);
    SIZE(dsa_source_t);
    FIELD(dsa_source_t, name);
    FIELD(dsa_source_t, text);
    FIELD(dsa_source_t, len);
    SIZE(dsa_plan_t);
    FIELD(dsa_plan_t, abi);
    FIELD(dsa_plan_t, name);
    FIELD(dsa_plan_t, nfiles);
    FIELD(dsa_plan_t, files);
    return 0;
}
