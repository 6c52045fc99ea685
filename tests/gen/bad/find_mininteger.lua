-- expect: tests/gen/bad/find_mininteger.lua:4: error: found at 2
-- string.find's init at math.mininteger means 1 (below -#s), as in Lua; negating it overflowed
local i = string.find("abc", "b", math.mininteger, true)
error("found at " .. tostring(i))
