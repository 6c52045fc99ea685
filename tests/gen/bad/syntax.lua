-- expect: tests/gen/bad/syntax.lua:4: error: unexpected symbol near <eof>
return {
  model = "x",
