-- expect: tests/gen/bad/heads_tp.lua:6: error: configs[1].tp: tp (3) must divide heads (16)
return {
  model = "bad",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 3, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
