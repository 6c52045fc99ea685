-- The sparse MLA benchmark at a top-k of two segments (tests/bench/bench_attend.py --model
-- gridk4096): DeepSeek-V3.2's layer with an indexer top-k of 4096 at TP 8, 4, 2 and 1 (16, 32, 64
-- and 2 x 64 heads per GPU), fp8_ds_mla, DCP 1; against bench_attend_grid.lua's top-k 2048 it shows
-- what the second segment costs (the producers compact every segment alone there). Rendered with
-- the other benchmark specs: `build/dsagen specs/models/bench_*.lua -o .bench-out`.
local geometry = import("variant.lua").variant(import("deepseek_v32.lua"), { indexer = { topk = 4096 } })

local configs = {}
for _, tp in ipairs({ 1, 2, 4, 8 }) do
  configs[#configs + 1] = { tp = tp, dcp = 1, interleave = 1, cache_dtype = "fp8_ds_mla", targets = { "sm_90a" } }
end
return {
  model = "gridk4096",
  geometry = geometry,
  configs = configs,
}
