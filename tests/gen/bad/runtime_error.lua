-- expect: tests/gen/bad/runtime_error.lua:3: error: attempt to index a nil value (local 'geo')
local geo
return { model = "x", geometry = geo.base }
