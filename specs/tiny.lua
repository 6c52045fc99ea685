-- tiny: a small DSA geometry for fast tests. Same latent/rope widths as the real models (the cache
-- formats depend on them), few heads, small q_lora and topk, YaRN on so its code path is exercised.
local configs = {}
for _, dtype in ipairs({ "bf16", "fp8_ds_mla", "nvfp4_ds_mla" }) do
  for _, dcp in ipairs({ 1, 2, 4 }) do
    configs[#configs + 1] = { tp = 4, dcp = dcp, interleave = 1, cache_dtype = dtype, targets = { "sm_90a" } }
  end
end
-- interleave 2 under DCP, once per cache format
configs[#configs + 1] = { tp = 4, dcp = 2, interleave = 2, cache_dtype = "bf16", targets = { "sm_90a" } }
configs[#configs + 1] = { tp = 4, dcp = 4, interleave = 2, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } }
configs[#configs + 1] = { tp = 4, dcp = 2, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } }

return {
  model = "tiny",
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
    rope = {
      theta = 10000,
      style = "interleaved",
      yarn = {
        factor = 4,
        original_max_positions = 1024,
        beta_fast = 32,
        beta_slow = 1,
        mscale = 1,
        mscale_all_dim = 1,
      },
    },
    indexer = {
      heads = 4,
      head_dim = 128,
      topk = 64,
      rope_style = "neox",
      rope_first = true,
      hadamard = true,
      norm_eps = 1e-6,
    },
  },
  configs = configs,
}
