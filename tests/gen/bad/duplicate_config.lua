-- expect: tests/gen/bad/duplicate_config.lua:7: error: configs[2]: duplicate configuration 'bad_tp4_dcp2_i1_fp8_ds_mla' (configs[1], line 6, is the same)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
