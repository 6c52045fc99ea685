-- expect: tests/gen/bad/infinite_loop.lua:3: error: spec exceeds the limit of 50 million instructions (an endless loop?)
local n = 0
while true do n = n + 1 end
return {}
