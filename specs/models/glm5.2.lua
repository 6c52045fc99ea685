-- GLM-5.2: the geometry of one DSA layer, imported by specs/glm5.2.lua and by the
-- benchmark specs beside this file. Values from the model's config.json (see docs/design.md, "The spec").
return {
  heads = 64,
  q_lora_rank = 2048,
  kv_lora_rank = 512,
  qk_nope_dim = 192,
  qk_rope_dim = 64,
  v_head_dim = 256,
  rms_norm_eps = 1e-5,
  max_positions = 202752,
  block_size = 64,
  rope = {
    theta = 8000000,
    style = "interleaved",
  },
  indexer = {
    heads = 32,
    head_dim = 128,
    topk = 2048,
    rope_style = "interleaved",
    rope_first = true,
    hadamard = true,
    norm_eps = 1e-6,
  },
}
