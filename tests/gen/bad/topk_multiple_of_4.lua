-- expect: tests/gen/bad/topk_multiple_of_4.lua:12: error: geometry.indexer.topk: must be a multiple of 4 (top-k rows are written and cleared 16 bytes at a time), got 2047
return {
  model = "odd_topk",
  geometry = {
    heads = 32, q_lora_rank = 256, kv_lora_rank = 512, qk_nope_dim = 32, qk_rope_dim = 64,
    v_head_dim = 32, rms_norm_eps = 1e-6, max_positions = 65536, block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = {
      heads = 4,
      head_dim = 128,
      rope_style = "neox",
      topk = 2047,
      rope_first = true,
      hadamard = true,
      norm_eps = 1e-6,
    },
  },
  configs = { { tp = 8, dcp = 2, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } } },
}
