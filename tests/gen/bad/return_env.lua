-- expect: tests/gen/bad/return_env.lua:2: error: spec returns the sandbox's environment (_ENV); it must return a table
return _ENV
