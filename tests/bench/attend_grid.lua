-- The sparse MLA benchmark's grid (tests/bench/bench_attend.py): DeepSeek-V3.2's layer at TP 1, 2,
-- 4 and 8 (128, 64, 32 and 16 heads per GPU) in each cache format, DCP 1. Kept outside specs/ so
-- libdsa does not link it: `build/dsagen tests/bench/*.lua -o .bench-out` renders it into
-- the ignored folder .bench-out/, which the benchmark loads at run time (dsa_ctx_create_dir).
return {
  model = "grid",
  geometry = {
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
  },
  configs = {
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    { tp = 2, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    { tp = 2, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 2, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
