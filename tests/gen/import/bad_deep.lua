-- expect: tests/gen/import/bad_deep.lua:2: error: import: the table of 'models/deep33.lua' is nested more than 32 levels deep (or contains itself)
local deep = import("models/deep33.lua")
return {
  model = "deep",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 4, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
