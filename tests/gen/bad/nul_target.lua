-- expect: tests/gen/bad/nul_target.lua:6: error: configs[1].targets[1]: unknown target architecture 'sm_90a\0' (expected one of sm_90, sm_90a, sm_100a)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a\0" } },
  },
}
