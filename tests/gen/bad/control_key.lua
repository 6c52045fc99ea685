-- expect: tests/gen/bad/control_key.lua:2: error: unknown field 'x\ntests/gen/bad/control_key.lua:1: error: forged'
return {
  model = "bad", ["x\ntests/gen/bad/control_key.lua:1: error: forged"] = 1,
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
