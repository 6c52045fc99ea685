-- expect: tests/gen/bad/require.lua:2: error: 'require' is not available in a spec: specs are data, run in a sandbox that offers only math, string, table, import and the basic functions
local os = require "os"
return {}
