-- expect: tests/gen/bad/fp8_scale_pow2_dtype.lua:5: error: configs[1].fp8_scale_pow2: applies to cache_dtype fp8_ds_mla only, not bf16
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = { { tp = 4, dcp = 1, interleave = 1, cache_dtype = "bf16", fp8_scale_pow2 = true, targets = { "sm_90a" } } },
}
