-- expect: tests/gen/bad/targets_key.lua:6: error: configs[1].targets: expected a list of target architectures (keys 1..n), found 2 entries for length 1
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a", arch = "sm_100a" } },
  },
}
