-- expect: tests/gen/bad/env_isolated.lua:8: error: n=2 s=7
-- Each file runs in its own environment: what the spec assigns (a basic function, a library
-- function) does not change what an imported file computes.
select = function() return 99 end
string.format = function() return "forged" end
local t = import("models/uses_env.lua")
assert(select() == 99 and string.format() == "forged")
error("n=" .. t.n .. " s=" .. t.s)
