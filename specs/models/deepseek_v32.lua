-- DeepSeek-V3.2: the geometry of one DSA layer, imported by specs/deepseek_v32.lua and by the
-- benchmark specs beside this file. Values from the model's config.json (see docs/design.md, "The spec").
return {
  heads = 128,
  q_lora_rank = 1536,
  kv_lora_rank = 512,
  qk_nope_dim = 128,
  qk_rope_dim = 64,
  v_head_dim = 128,
  rms_norm_eps = 1e-6,
  max_positions = 163840,
  block_size = 64,
  rope = {
    theta = 10000,
    style = "interleaved",
    yarn = {
      factor = 40,
      original_max_positions = 4096,
      beta_fast = 32,
      beta_slow = 1,
      mscale = 1,
      mscale_all_dim = 1,
    },
  },
  -- softmax_scale is derived: (qk_nope + qk_rope)^-0.5 * mscale(factor, mscale_all_dim)^2
  indexer = {
    heads = 64,
    head_dim = 128,
    topk = 2048,
    rope_style = "neox",
    rope_first = true,
    hadamard = true,
    norm_eps = 1e-6,
  },
}
