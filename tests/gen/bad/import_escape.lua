-- expect: tests/gen/bad/import_escape.lua:2: error: import: '../../../etc/passwd.lua' is not a relative path to a .lua file below the spec's folder
return import("../../../etc/passwd.lua")
