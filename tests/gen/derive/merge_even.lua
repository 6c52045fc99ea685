-- The DCP index merge's shared memory is derived by the generator (gen/spec.c): 12 W topk bytes where
-- that fits in 200 KiB, else 0 (the merge then reads global memory). tests/run.sh
-- checks each configuration's plan.txt against that rule (here: topk 2048).
return {
  model = "merge_even",
  geometry = {
    heads = 32, q_lora_rank = 256, kv_lora_rank = 512, qk_nope_dim = 32, qk_rope_dim = 64,
    v_head_dim = 32, rms_norm_eps = 1e-6, max_positions = 65536, block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = { heads = 4, head_dim = 128, topk = 2048, rope_style = "neox", rope_first = true,
                hadamard = true, norm_eps = 1e-6 },
  },
  configs = { { tp = 8, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } }, { tp = 8, dcp = 2, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } }, { tp = 8, dcp = 8, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } }, },
}
