-- expect: tests/gen/bad/bytecode_string.lua:2: error: 'string.dump' is not available in a spec: specs are data; string offers byte, char, find (plain text), format, len, lower, rep, reverse, sub and upper (no patterns: their matching time has no bound)
return string.dump(function() end)
