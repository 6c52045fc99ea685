-- expect: tests/gen/bad/load.lua:2: error: 'load' is not available in a spec: specs are data, run in a sandbox that offers only math, string, table, import and the basic functions
local f = load("return os")
return {}
