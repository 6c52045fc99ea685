-- expect: tests/gen/import/bad_geo.lua:2: error: the table imported from tests/gen/import/models/geo.lua is changed after import; imported tables are read-only (build a new table that copies the fields you keep)
local geo = import("models/geo.lua")
geo.block_size = 0
return {
  model = "shared2",
  geometry = geo,
  configs = {
    { tp = 4, dcp = 4, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
