-- expect: tests/gen/bad/nul_dtype.lua:6: error: configs[1].cache_dtype: unknown cache dtype 'fp8_ds_mla\0x' (expected one of bf16, fp8_ds_mla, nvfp4_ds_mla)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla\0x", targets = { "sm_90a" } },
  },
}
