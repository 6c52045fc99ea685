-- Two models share one geometry through import().
return {
  model = "shared",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 4, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
