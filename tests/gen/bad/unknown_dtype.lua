-- expect: tests/gen/bad/unknown_dtype.lua:6: error: configs[1].cache_dtype: unknown cache dtype 'fp16' (expected one of bf16, fp8_ds_mla, nvfp4_ds_mla)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp16", targets = { "sm_90a" } },
  },
}
