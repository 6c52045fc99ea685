-- expect: tests/gen/bad/nul_model.lua:3: error: model: 'bad\0evil' is not a model name: 1 to 31 of a-z, 0-9, '.', '_', '-', not starting with '.' or '-'
return {
  model = "bad\0evil",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
  },
}
