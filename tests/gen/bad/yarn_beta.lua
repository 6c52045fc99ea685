-- expect: tests/gen/bad/yarn_beta.lua:14: error: geometry.rope.yarn.beta_fast: 1 is below beta_slow (32); YaRN ramps from beta_fast rotations down to beta_slow, so beta_fast must be at least beta_slow
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
    rope = { theta = 10000, style = "interleaved", yarn = { factor = 4, original_max_positions = 1024, beta_fast = 1, beta_slow = 32, mscale = 1, mscale_all_dim = 1 } },
    indexer = {
      heads = 4, head_dim = 128, topk = 64, rope_style = "neox",
      rope_first = true, hadamard = true, norm_eps = 1e-6,
    },
  },
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
