-- GLM-5.2 at TP 8 x DCP 2: a configuration no shipped spec has, kept outside specs/ so libdsa does
-- not link it. Rendered into tests/gpu/outside/ (tests/run.sh checks it is fresh), which the GPU
-- suite loads at run time (dsa-demo --dir): a model added without rebuilding libdsa.
-- Values from the model's config.json (see docs/design.md, "The spec").
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
  configs = { { tp = 8, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } } },
}
