-- expect: tests/gen/bad/find_plain_linear.lua:6: error: plain find: nil 2
-- string.find of plain text takes linear time in one call (Lua's own search, quadratic here, took
-- 30 s, and the time limit is checked only between calls)
local a = ("a"):rep(2 ^ 20)
local hay = a .. a -- 2 MiB of 'a'
error("plain find: " .. tostring(hay:find(a .. "b", 1, true)) .. " " .. tostring(hay:find(a, 2, true)))
