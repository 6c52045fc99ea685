-- expect: tests/gen/bad/huge_string.lua:2: error: string.rep: result larger than the spec limit of 1 MiB
local s = ("x"):rep(1e9)
return {}
