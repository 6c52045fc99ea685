-- expect: tests/gen/bad/forged_position.lua:4: error: specs/glm5.2.lua:31: forged
-- a message that names another file and line (level 0: Lua adds no position) is reported where it
-- was raised, the message whole
error("specs/glm5.2.lua:31: forged", 0)
