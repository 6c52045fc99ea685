-- expect: tests/gen/bad/idx_score_room_128.lua:8: error: geometry.indexer.heads: 128 heads of 256 dims leave the score kernel no room for two 64-key slots beside the query in its 48 KiB of static shared memory; at 256 dims at most 16 heads fit
return {
  model = "bad",
  geometry = {
    heads = 16, q_lora_rank = 256, kv_lora_rank = 512, qk_nope_dim = 32, qk_rope_dim = 64,
    v_head_dim = 32, rms_norm_eps = 1e-6, max_positions = 4096, block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = { heads = 128, head_dim = 256, topk = 64, rope_style = "neox", rope_first = true,
                hadamard = true, norm_eps = 1e-6 },
  },
  configs = { { tp = 4, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } } },
}
