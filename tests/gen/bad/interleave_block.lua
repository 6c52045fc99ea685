-- expect: tests/gen/bad/interleave_block.lua:6: error: configs[1].interleave: interleave (3) must divide the KV block size (16)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 3, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
