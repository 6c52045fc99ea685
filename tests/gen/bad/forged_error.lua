-- expect: tests/gen/bad/forged_error.lua:3: error: x\nspecs/glm5.2.lua:1: error: forged\x1b[31m red
-- a spec's own error message cannot start a line of its own or send terminal escapes
error("x\nspecs/glm5.2.lua:1: error: forged\27[31m red")
