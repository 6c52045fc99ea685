-- expect: tests/gen/bad/forged_import_line.lua:4: error: tests/gen/bad/models/geo.lua:9999: heads: forged
-- Nor can it name an imported file (which the sandbox read) at a line of its choosing.
local g = import("models/geo.lua")
error("tests/gen/bad/models/geo.lua:9999: heads: forged", 0)
