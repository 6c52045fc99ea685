-- One table.sort without a comparator over 400,000 copies of a 1 MiB string compares for minutes
-- inside one C call; the sandbox's sort makes each comparison a call, where the time limit (10 s)
-- is checked, so it stops at this file's line 6 like any loop (tests/run.sh).
local s = string.rep("a", 1 << 20)
local t = {}
for i = 1, 400000 do t[i] = s end table.sort(t)
return {}
