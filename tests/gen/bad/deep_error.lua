-- expect: tests/gen/bad/deep_error.lua:4: error: bottom reached
-- An error 100,000 calls deep is placed at once: the position check walks a few frames, not all
-- (walking every frame took 14.5 s here, and the watchdog then hid the error)
local function f(n) if n == 0 then error("bottom reached") end return 1 + f(n - 1) end
return f(100000)
