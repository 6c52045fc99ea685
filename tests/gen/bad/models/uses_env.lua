-- An import that calls a basic function and a library function (tests/gen/bad/env_isolated.lua).
return { n = select("#", 1, 2), s = string.format("%d", 7) }
