-- tiny_k4096: tiny's geometry (specs/tiny.lua) with an indexer top-k of 4096, twice the 2048
-- entries the sparse MLA compacts at a time, so that a row's top-k takes two segments there (each
-- split CTA then meets its first segment's keys and a second one's), and stage B selects 4096 keys
-- of requests up to 16384 positions. For tests: no model has this geometry.
local tiny = import("tiny.lua").geometry
local geometry, indexer = {}, {}
for k, v in pairs(tiny) do
  geometry[k] = v
end
for k, v in pairs(tiny.indexer) do
  indexer[k] = v
end
indexer.topk = 4096
geometry.indexer = indexer
geometry.max_positions = 16384

return {
  model = "tiny_k4096",
  geometry = geometry,
  configs = {
    -- 16 heads a CTA (4 real): the transposed loop, rows split over CTAs, merged in their cluster
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- bf16 keys copied straight into the tiles; each rank's compaction keeps its own positions,
    -- and stage B merges two ranks' candidate lists of 4096
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
  },
}
