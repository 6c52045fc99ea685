-- expect: tests/gen/import/bad_memory.lua:5: error: spec exceeds the memory limit of 16 MiB
-- the memory limit reached in this file after an import: reported here, not in the imported file
local g = import("models/geo.lua")
local t = {}
for i = 1, 1e9 do t[i] = i end
return t
