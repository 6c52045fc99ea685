-- expect: tests/gen/bad/wgmma_64_heads.lua:11: error: configs[1].tp: with 64 heads / tp 1 x dcp 1 a sparse MLA CTA takes 64 heads, which on sm_90a needs kv_lora_rank 512 and qk_rope_dim at least 64 (each consumer warpgroup's product covers 256 latent dims, and P lives in the rope columns of a 64-key tile), but they are 512 and 32
return {
  model = "bad",
  geometry = {
    heads = 64, q_lora_rank = 256, kv_lora_rank = 512, qk_nope_dim = 32, qk_rope_dim = 32,
    v_head_dim = 32, rms_norm_eps = 1e-6, max_positions = 4096, block_size = 16,
    rope = { theta = 10000, style = "interleaved" },
    indexer = { heads = 4, head_dim = 128, topk = 64, rope_style = "neox", rope_first = true,
                hadamard = true, norm_eps = 1e-6 },
  },
  configs = { { tp = 1, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } } },
}
