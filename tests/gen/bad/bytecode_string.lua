-- expect: tests/gen/bad/bytecode_string.lua:2: error: attempt to call a nil value (field 'dump')
return string.dump(function() end)
