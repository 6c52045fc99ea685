-- expect: tests/gen/bad/huge_table.lua:3: error: spec exceeds the memory limit of 16 MiB
local t = {}
for i = 1, 1e9 do t[i] = i end
return t
