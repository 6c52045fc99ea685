-- expect: tests/gen/bad/nul_dtype.lua:21: error: configs[1].cache_dtype: unknown cache dtype 'fp8_ds_mla\0x' (expected one of bf16, fp8_ds_mla, nvfp4_ds_mla)
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
      heads = 4, head_dim = 128, topk = 64, rope_style = "neox",
      rope_first = true, hadamard = true, norm_eps = 1e-6,
    },
  },
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla\0x", targets = { "sm_90a" } },
  },
}
