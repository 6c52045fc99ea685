-- variant(base, changes): a new geometry holding base's fields with changes over them, tables merged
-- field by field, so that { indexer = { topk = 4096 } } changes the indexer's top-k and keeps its
-- other fields. base may be what import() returned (read-only). For specs derived from another
-- model's geometry: `import("models/variant.lua").variant(import("tiny.lua").geometry, { ... })`
-- (from specs/; `import("variant.lua")` beside this file).
local function variant(base, changes)
  local out = {}
  for k, v in pairs(base) do
    out[k] = v
  end
  for k, v in pairs(changes) do
    if type(v) == "table" and type(out[k]) == "table" then
      out[k] = variant(out[k], v)
    else
      out[k] = v
    end
  end
  return out
end

return { variant = variant }
