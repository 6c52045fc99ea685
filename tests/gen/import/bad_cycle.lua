-- expect: tests/gen/import/bad_cycle.lua:2: error: import: the table of 'models/self.lua' is nested more than 32 levels deep (or contains itself)
local t = import("models/self.lua")
return {}
