-- tiny_k4096: tiny's geometry (specs/tiny.lua) with an indexer top-k of 4096, twice the 2048
-- entries the sparse MLA compacts at a time, so that a row's top-k takes two segments there, and
-- stage B selects 4096 keys of requests up to 16384 positions. For tests: no model has this
-- geometry. 16 heads a CTA only: at 32 and 64 heads the sparse MLA kernels of a top-k above 2048
-- use local memory (tests/bench/RESULTS.md, twenty-ninth session), which the build's dsa-jit check
-- refuses.
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
    -- 16 heads a CTA (4 real): the transposed loop with two producers, rows split over CTAs and
    -- merged in their cluster
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- 8 gathered heads from two ranks: bf16 keys copied straight into the tiles, each rank's
    -- compaction keeping its own positions; stage B merges two lists of 4096 in shared memory
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    -- eight ranks of 2 heads (16 gathered): stage B's merge of 8 x 4096 candidates from global
    -- memory (over the 200 KiB of shared memory it stages at most)
    { tp = 8, dcp = 8, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
