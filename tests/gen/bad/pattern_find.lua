-- expect: tests/gen/bad/pattern_find.lua:4: error: string.find: patterns are not available in a spec (their matching time has no bound); search for plain text: s:find(text, 1, true)
-- a backtracking pattern takes minutes inside one instruction: patterns are not offered
local s = ("a"):rep(300)
return { s:find(".-.-.-.-b") }
