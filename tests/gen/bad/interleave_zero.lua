-- expect: tests/gen/bad/interleave_zero.lua:6: error: configs[1].interleave: 0 is out of range [1, 1024]
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 0, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
