-- expect: tests/gen/bad/forged_own_line.lua:4: error: tests/gen/bad/forged_own_line.lua:1: forged line
-- A prefix naming this very file at a line no frame was running is the spec's own text, not a
-- position: reported where the error was raised, the message whole.
error("tests/gen/bad/forged_own_line.lua:1: forged line", 0)
