-- expect: tests/gen/import/models/bad_field_geo.lua:11: error: geometry.block_size: 0 is out of range [1, 1024]
return {
  model = "shared3",
  geometry = import("models/bad_field_geo.lua"),
  configs = {
    { tp = 4, dcp = 4, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
