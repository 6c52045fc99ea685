-- expect: tests/gen/bad/error_level2.lua:5: error: heads must be even
-- error() at level 2 names the caller's line, a running frame: that position is believed.
local function need_even(n) if n % 2 ~= 0 then error("heads must be even", 2) end end
local heads = 15
need_even(heads)
