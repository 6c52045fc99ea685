-- dsagen's trusted Lua helpers, run in the generator's own state (never the spec sandbox):
-- field line maps of spec files (through Penlight's lexer) and strict template rendering (through
-- Penlight's pl.template).
local lexer = require "pl.lexer"
local template = require "pl.template"

local M = {}

local files = {}

-- Records, for one spec file, the line of every field of its literal table constructors, keyed by
-- path ("geometry.rope.theta", "configs.2.tp"). Tables bound to a top-level local and used by name
-- elsewhere ("configs = configs") are followed through an alias.
function M.linemap(file, text)
  if files[file] and files[file].text == text then return end -- imported again
  -- the tokens i - 2 .. i + 3 around the one at hand, read as they are needed (a file's tokens all
  -- at once took 387 MB for 1 MiB of ';')
  local tok = lexer.lua(text, { space = true, comments = true })
  local toks, first, last, ended = {}, 1, 0, false
  local function at(j)
    while last < j and not ended do
      local t, v = tok()
      if t == nil then
        ended = true -- never resumed again: the lexer's iterator may be a finished coroutine
        break
      end
      last = last + 1
      toks[last] = { t = t, v = v, line = (lexer.lineno(tok)) }
    end
    return j >= first and j <= last and toks[j] or nil
  end
  local map, alias = {}, {}
  local stack = {}
  local function join(path, key)
    if path == nil then return nil end
    return path == "" and key or path .. "." .. key
  end
  local i = 1
  while at(i) do
    while first < i - 2 do
      toks[first] = nil
      first = first + 1
    end
    local k = toks[i]
    local f = stack[#stack]
    if f and f.paren == 0 and f.expect then
      -- the first token of an element decides its key
      f.expect = false
      if k.t == "iden" and at(i + 1) and at(i + 1).t == "=" then
        f.key = k.v
        i = i + 1
      elseif k.t == "[" and at(i + 1) and (at(i + 1).t == "string" or at(i + 1).t == "number")
          and at(i + 2) and at(i + 2).t == "]" and at(i + 3) and at(i + 3).t == "=" then
        f.key = tostring(at(i + 1).v)
        i = i + 3
      elseif k.t == "}" then
        f.key = nil
        i = i - 1 -- a trailing separator: let the closing brace be handled below
      else
        f.idx = f.idx + 1
        f.key = tostring(f.idx)
        i = i - 1 -- this token is the value itself
      end
      if f.key and f.path then
        local p = join(f.path, f.key)
        map[p] = k.line -- a key given twice: the value Lua keeps, the last
        local a, b = at(i + 1), at(i + 2)
        if a and a.t == "iden" and b and (b.t == "," or b.t == ";" or b.t == "}") then
          alias[p] = "@" .. a.v
        end
      end
    elseif k.t == "{" then
      local path
      if f == nil then
        local p1, p2 = at(i - 1), at(i - 2)
        if p1 and p1.t == "keyword" and p1.v == "return" then
          path = ""
          map[""] = k.line
        elseif p1 and p1.t == "=" and p2 and p2.t == "iden" then
          path = "@" .. p2.v
          map[path] = k.line
        end
      elseif f.paren == 0 and f.key then
        path = join(f.path, f.key)
      end
      stack[#stack + 1] = { path = path, idx = 0, paren = 0, expect = true }
    elseif k.t == "}" then
      stack[#stack] = nil
    elseif f and (k.t == "(" or k.t == "[") then
      f.paren = f.paren + 1
    elseif f and (k.t == ")" or k.t == "]") then
      f.paren = f.paren - 1
    elseif f and f.paren == 0 and (k.t == "," or k.t == ";") then
      f.expect = true
    elseif not f and k.t == "keyword" and k.v == "return" then
      local a = at(i + 1)
      map[""] = map[""] or k.line
      if a and a.t == "iden" then alias[""] = "@" .. a.v end
    end
    i = i + 1
  end
  files[file] = { map = map, alias = alias, text = text }
end

-- Drops file's map (a line map that failed half way)
function M.forget(file)
  files[file] = nil
end

-- memo: what each (depth, path) gave in this lookup, so that a spec whose tables alias each other
-- at every prefix costs each state once, not once per route to it (a 3 KB spec took minutes)
local function find(m, path, depth, memo)
  if depth > 8 then return nil end
  if m.map[path] then return m.map[path] end
  local key = depth .. " " .. path
  local known = memo[key]
  if known ~= nil then return known or nil end
  memo[key] = false
  -- follow the longest aliased prefix
  local prefix = path
  while true do
    local a = m.alias[prefix]
    if a then
      -- what follows the prefix, from its dot ("" aliases the whole table: then "." and the path)
      local rest = prefix ~= "" and path:sub(#prefix + 1) or path ~= "" and "." .. path or ""
      local r = find(m, a .. rest, depth + 1, memo)
      if r then memo[key] = r return r end
    end
    if prefix == "" then return nil end
    prefix = prefix:match("^(.*)%.[^.]*$") or ""
  end
end

-- The line of the field at path, or of its nearest enclosing table found; 0 when none is known.
function M.line(file, path)
  local m = files[file]
  if not m then return 0 end
  local memo = {}
  while true do
    local r = find(m, path, 0, memo)
    if r then return r end
    if path == "" then return 0 end
    path = path:match("^(.*)%.[^.]*$") or ""
  end
end

-- Makes t and every table below it strict: reading an absent key raises an error naming it.
local function strict(t, where)
  for k, v in pairs(t) do
    if type(v) == "table" and getmetatable(v) == nil then
      strict(v, where == "" and tostring(k) or where .. "." .. tostring(k))
    end
  end
  return setmetatable(t, {
    __index = function(_, key)
      if math.type(key) == "integer" then return nil end -- the end of a list, as ipairs reads it
      error({ undefined = where == "" and tostring(key) or where .. "." .. tostring(key),
              name = tostring(key) }, 2)
    end,
  })
end

-- The first line of a template that uses name in an expression or a Lua line, for error messages.
local function line_of(src, name)
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if (line:find("$(", 1, true) or line:find("^//@")) and line:find("%f[%w_]" .. name:gsub("%p", "%%%0") .. "%f[^%w_]") then
      return n
    end
  end
  return 0
end

local function c_number(x, suffix)
  assert(type(x) == "number", "c_float/c_double: not a number")
  local s = string.format("%.9g", x)
  if suffix == "" then s = string.format("%.17g", x) end
  if not s:find("[.eEn]") then s = s .. ".0" end
  return s .. suffix
end

-- Renders template src (named name) with the values of env; returns the text, or nil and a
-- compiler-style message. Lines starting with //@ are Lua; $(expr) is an expression.
function M.render(name, src, env)
  env.ipairs, env.pairs, env.tostring, env.string, env.math, env.table, env.error =
    ipairs, pairs, tostring, string, math, table, error
  env.c_float = function(x) return c_number(x, "f") end
  env.c_double = function(x) return c_number(x, "") end
  strict(env, "")
  local ct, err = template.compile(src, {
    chunk_name = "@" .. name, escape = "//@", inline_escape = "$", inline_brackets = "()",
  })
  if not ct then
    return nil, name .. ": error: template does not compile: " .. tostring(err)
  end
  local out, rerr = ct:render(env)
  if out then return out end
  if type(rerr) == "table" and rerr.undefined then
    return nil, string.format("%s:%d: error: template refers to undefined value '%s'", name,
                              line_of(src, rerr.name), rerr.undefined)
  end
  return nil, name .. ": error: " .. tostring(rerr)
end

return M
