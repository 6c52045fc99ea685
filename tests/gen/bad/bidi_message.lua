-- expect: tests/gen/bad/bidi_message.lua:4: error: \u202erorre :1:aul.2.5mlg/sceps\u2066 \u0085ok
-- Bidirectional overrides, isolates and C1 controls in a message are escaped by code point: printed
-- raw, U+202E made the rest of the line read backwards ("specs/glm5.2.lua:1: error")
error("\u{202E}rorre :1:aul.2.5mlg/sceps\u{2066} \u{85}ok")
