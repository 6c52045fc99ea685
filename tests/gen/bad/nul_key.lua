-- expect: tests/gen/bad/nul_key.lua:6: error: configs[1]: unknown field 'tp\0x'
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, ["tp\0x"] = 8, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
