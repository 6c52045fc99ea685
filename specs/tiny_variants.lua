-- tiny_variants: tiny's geometry (specs/tiny.lua) with the options no other shipped spec selects,
-- so that a new model's spec that picks them meets kernels the tests have run: the main MLA's rope
-- in the neox style, an indexer of 16 heads of 256 dims with its rope in the interleaved style on
-- its last dims and no Hadamard rotation, 128 heads (32 a CTA at TP 4), and power-of-two fp8
-- scales. For tests: no model has this geometry.
local variant = import("models/variant.lua").variant
local geometry = variant(import("tiny.lua").geometry, {
  heads = 128,
  rope = { style = "neox" },
  indexer = { heads = 16, head_dim = 256, rope_style = "interleaved", rope_first = false, hadamard = false },
})

return {
  model = "tiny_variants",
  geometry = geometry,
  configs = {
    -- 32 heads a CTA with bf16 keys, and with nvfp4 keys (the other 32-head configuration is fp8)
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    -- fp8 with power-of-two scales, 16 heads a rank gathered to 32 over two ranks
    { tp = 8, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", fp8_scale_pow2 = true, targets = { "sm_90a" } },
  },
}
