-- expect: tests/gen/import/bad_many.lua:3: error: import: more than 256 imports in one spec
local geos = {}
for i = 1, 300 do geos[i] = import("models/geo.lua") end
return {}
