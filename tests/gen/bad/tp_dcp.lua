-- expect: tests/gen/bad/tp_dcp.lua:6: error: configs[1].dcp: dcp (3) must divide tp (4)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 3, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
