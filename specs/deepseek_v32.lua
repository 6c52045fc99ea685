-- DeepSeek-V3.2: one DSA layer and the topologies dsagen ships for it.
-- The geometry is specs/models/deepseek_v32.lua (values from the model's config.json).
return {
  model = "deepseek_v32",
  geometry = import("models/deepseek_v32.lua"),
  configs = {
    -- all 128 heads on one GPU: the sparse MLA benchmark's shape (128 heads, topk 2048)
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- the same on nvfp4 keys: the 128-head CTA pairs sharing nvfp4 tiles
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    -- and on bf16 keys (the prefill's cache on Hopper): each CTA of a pair gathers half of every
    -- key tile into both
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    -- 32 heads per CTA (the transposed wgmma loop's N = 32) at a model's own dimensions
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 8, dcp = 4, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 8, dcp = 8, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
