-- GLM-5.2: one DSA layer and the topologies dsagen ships for it.
-- Values from the model's config.json (see docs/design.md).
return {
  model = "glm5.2",
  geometry = {
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
  },
  configs = {
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 4, dcp = 4, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- the same with the CP interleave of 4 (positions owned in runs of 4)
    { tp = 4, dcp = 4, interleave = 4, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 2, dcp = 2, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
  },
}
