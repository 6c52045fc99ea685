-- expect: tests/gen/bad/dcp_range.lua:5: error: configs[1].dcp: 16 is out of range [1, 8]
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = { { tp = 16, dcp = 16, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } } },
}
