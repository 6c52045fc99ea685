-- A valid geometry that the bad specs of a configuration field import, so that each of them is
-- only the field it gets wrong (imported tables are read-only: a spec that needs another geometry
-- writes its own).
return {
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
    heads = 4, head_dim = 128, topk = 64, rope_style = "neox",
    rope_first = true, hadamard = true, norm_eps = 1e-6,
  },
}
