-- GLM-5.2 at TP 2 x DCP 1 with the nvfp4_ds_mla cache: the DCP = 1 side of `dsa-demo --bench`'s
-- comparison with glm5.2_tp2_dcp2_i1_nvfp4_ds_mla (the same heads per GPU, the whole cache on each
-- GPU). Kept outside specs/ so libdsa does not link it: `build/dsagen tests/bench/*.lua -o
-- .bench-out` renders it into the ignored folder .bench-out/, read at run time with --dir.
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
  configs = { { tp = 2, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } } },
}
