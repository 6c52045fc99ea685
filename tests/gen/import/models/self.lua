-- A table that contains itself.
local t = { heads = 16 }
t.self = t
return t
