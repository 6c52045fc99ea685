-- expect: tests/gen/bad/rep_empty.lua:4: error: spec returns a string; it must return a table
-- string.rep of an empty string is empty at once (Lua's own rep would loop maxinteger times)
local s = (""):rep(math.maxinteger) .. string.rep("", math.maxinteger, "")
return s
