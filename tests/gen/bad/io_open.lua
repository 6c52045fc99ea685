-- expect: tests/gen/bad/io_open.lua:3: error: 'io' is not available in a spec: specs are data, run in a sandbox that offers only math, string, table, import and the basic functions
local t = {}
local f = io.open("/etc/passwd")
return t
