-- expect: tests/gen/bad/pattern_match.lua:3: error: 'string.match' is not available in a spec: specs are data; string offers byte, char, find (plain text), format, len, lower, rep, reverse, sub and upper (no patterns: their matching time has no bound)
local s = ("a"):rep(300)
return { s:match(".-.-.-.-b") }
