-- Far under the instruction limit, but every call does much work: the time limit (10 seconds)
-- stops it (tests/run.sh).
local s = ("x"):rep(1 << 20)
for i = 1, 1e9 do local _ = s:upper() end
return {}
