-- An unchanged imported table nested as deep as allowed is accepted. Garbage makes the collector
-- shrink the Lua stack first: comparing the table with its snapshot must grow the stack as it goes
-- (tests/run.sh runs this under valgrind, which sees a write past the stack).
local deep = import("models/deep32.lua")
local garbage = {}
for i = 1, 100000 do garbage[i] = { i } end
garbage = nil
local n = 0
for i = 1, 1000000 do n = n + i end
return {
  model = "deep",
  geometry = import("models/geo.lua"),
  configs = {
    { tp = 4, dcp = 4, interleave = 2, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } },
  },
}
