-- The sparse MLA benchmark's grid (tests/bench/bench_attend.py): DeepSeek-V3.2's layer at TP 1, 2,
-- 4 and 8 (128, 64, 32 and 16 heads per GPU) in each cache format, DCP 1. Not rendered by the build
-- (only specs/*.lua are), so libdsa does not link it: `build/dsagen specs/models/bench_*.lua -o
-- .bench-out` renders it into the ignored folder .bench-out/, which the benchmark loads at run
-- time (dsa_ctx_create_dir).
local configs = {}
for _, tp in ipairs({ 1, 2, 4, 8 }) do
  for _, dtype in ipairs({ "bf16", "fp8_ds_mla", "nvfp4_ds_mla" }) do
    configs[#configs + 1] = { tp = tp, dcp = 1, interleave = 1, cache_dtype = dtype, targets = { "sm_90a" } }
  end
end
return {
  model = "grid",
  geometry = import("deepseek_v32.lua"),
  configs = configs,
}
