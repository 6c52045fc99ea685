-- GLM-5.2: one DSA layer and the topologies dsagen ships for it.
-- The geometry is specs/models/glm5.2.lua (values from the model's config.json).
return {
  model = "glm5.2",
  geometry = import("models/glm5.2.lua"),
  configs = {
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 4, dcp = 4, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- the same with the CP interleave of 4 (positions owned in runs of 4)
    { tp = 4, dcp = 4, interleave = 4, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 2, dcp = 2, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    { tp = 1, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
  },
}
