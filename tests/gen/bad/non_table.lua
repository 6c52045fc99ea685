-- expect: tests/gen/bad/non_table.lua:2: error: spec returns an integer; it must return a table
return 42
