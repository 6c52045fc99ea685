-- tiny_k5000: tiny's geometry (specs/tiny.lua) with 128 heads and an indexer top-k of 5000, which
-- the sparse MLA compacts in three segments (2048, 2048 and the last 904 entries: the producers'
-- segment counts take both of their slots and come back to the first), and stage B selects 5000
-- keys of requests up to 16384 positions. For tests: no model has this geometry. One configuration
-- for each of the sparse MLA's loops: 16 heads a CTA (fp8, and nvfp4's deeper producers), 32 and
-- 64 heads a CTA, and two 64-head CTAs of a row that are not paired (the generator pairs none where
-- the top-k takes several segments).
local variant = import("models/variant.lua").variant
local geometry = variant(import("tiny.lua").geometry, {
  heads = 128,
  max_positions = 16384,
  indexer = { topk = 5000 },
})

return {
  model = "tiny_k5000",
  geometry = geometry,
  configs = {
    -- 16 heads a CTA: the transposed loop with two producer warpgroups, rows split over CTAs and
    -- merged in their cluster
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- the same with nvfp4 keys: the producers' two tiles in flight (AttendLayout::deep)
    { tp = 8, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
    -- 32 heads a CTA: the transposed loop with one producer warpgroup loading a tile ahead
    { tp = 4, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } },
    -- 64 gathered heads from two ranks, one CTA: bf16 keys copied straight into the tiles, each
    -- rank's compaction keeping its own positions; stage B merges two lists of 5000 in shared memory
    { tp = 4, dcp = 2, interleave = 1, cache_dtype = "bf16", targets = { "sm_90a" } },
    -- eight ranks of 16 heads (128 gathered): two 64-head CTAs a row, each dequantising every tile;
    -- stage B's merge of 8 x 5000 candidates from global memory (over the 200 KiB of shared memory
    -- it stages at most)
    { tp = 8, dcp = 8, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
