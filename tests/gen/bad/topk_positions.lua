-- expect: tests/gen/bad/topk_positions.lua:16: error: geometry.indexer.topk: (8192) exceeds max_positions (4096): no request has that many keys, and every top-k row would carry the difference as -1 entries that stage C scans
return {
  model = "bad",
  geometry = {
    heads = 16,
    q_lora_rank = 256,
    kv_lora_rank = 512,
    qk_nope_dim = 32,
    qk_rope_dim = 64,
    v_head_dim = 32,
    rms_norm_eps = 1e-6,
    max_positions = 4096,
    block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = {
      heads = 32, head_dim = 128, topk = 8192, rope_style = "neox",
      rope_first = true, hadamard = true, norm_eps = 1e-6,
    },
  },
  configs = {
    { tp = 4, dcp = 2, interleave = 1,  cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
