-- expect: tests/gen/bad/duplicate_key_line.lua:15: error: configs[1].tp: tp (3) must divide heads (16)
return {
  model = "bad",
  geometry = {
    heads = 16, q_lora_rank = 256, kv_lora_rank = 512, qk_nope_dim = 32, qk_rope_dim = 64,
    v_head_dim = 32, rms_norm_eps = 1e-6, max_positions = 4096, block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = { heads = 4, head_dim = 128, topk = 64, rope_style = "neox", rope_first = true,
                hadamard = true, norm_eps = 1e-6 },
  },
  configs = {
    {
      tp = 4,
      dcp = 1,
      tp = 3,
      interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" },
    },
  },
}
