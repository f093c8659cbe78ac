-- The reference in docs/ names every public name, so it cannot fall behind
-- the code: each field of the weft module (weft.NAME), each key of
-- weft.config, each function, type and constant of include/weft.h, and
-- each name the Python package exports (its __all__). A failure lists
-- what is missing, by name.
local weft = require "weft"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- Every docs/*.md page, concatenated (with a space around each).
local function docs_text()
  local p = assert(io.popen("ls docs/*.md 2>/dev/null"))
  local parts = {}
  for path in p:lines() do parts[#parts + 1] = read(path) end
  p:close()
  return " " .. table.concat(parts, "\n") .. " "
end

-- Is name written in text with nothing of an identifier right after it,
-- and nothing of one right before it?
local function mentions(text, name)
  local pat = "[^%w_]" .. name:gsub("%p", "%%%0") .. "[^%w_]"
  return text:find(pat) ~= nil
end

local function missing_of(text, names)
  local out = {}
  for _, n in ipairs(names) do
    if not mentions(text, n) then out[#out + 1] = n end
  end
  table.sort(out)
  return out
end

local function sorted_keys(t, prefix, skip)
  local out = {}
  for k in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and not (skip and skip[k]) then
      out[#out + 1] = prefix .. k
    end
  end
  table.sort(out)
  return out
end

describe("docs/", function()
  local text = docs_text()

  it("has the pages the README points at", function()
    for _, page in ipairs { "index", "kernels", "builtins", "arrays", "autodiff", "devices",
                            "geometry", "c", "python", "from-lua", "from-warp" } do
      assert.truthy(io.open("docs/" .. page .. ".md"), "docs/" .. page .. ".md is missing")
    end
  end)

  it("documents every name of the weft module", function()
    local names = sorted_keys(weft, "weft.")
    assert.is_true(#names > 100)
    local miss = missing_of(text, names)
    assert.are.same({}, miss, "undocumented in docs/: " .. table.concat(miss, " "))
  end)

  it("documents every weft.config setting", function()
    local miss = missing_of(text, sorted_keys(weft.config, "weft.config."))
    assert.are.same({}, miss, "undocumented in docs/: " .. table.concat(miss, " "))
  end)

  it("documents every function, type and constant of include/weft.h", function()
    local h = read("include/weft.h")
    local seen, names = {}, {}
    local skip = { WEFT_H = true, WEFT_API = true }
    for n in h:gmatch("[%a_][%w_]*") do
      if (n:match("^weft_") or n:match("^WEFT_")) and not skip[n] and not seen[n] then
        seen[n] = true
        names[#names + 1] = n
      end
    end
    assert.is_true(#names > 40)
    local miss = missing_of(text, names)
    assert.are.same({}, miss, "undocumented in docs/: " .. table.concat(miss, " "))
  end)

  it("documents every name the Python package exports", function()
    local init = read("python/weft/__init__.py")
    local all = assert(init:match("__all__%s*=%s*(%b[])"), "no __all__ in python/weft/__init__.py")
    local names = {}
    for n in all:gmatch("\"([%w_]+)\"") do names[#names + 1] = "weft." .. n end
    assert.is_true(#names > 5)
    local miss = missing_of(text, names)
    assert.are.same({}, miss, "undocumented in docs/: " .. table.concat(miss, " "))
  end)

  it("finds a missing name (the check itself)", function()
    assert.are.same({ "weft.not_a_name" }, missing_of(" `weft.zeros` ", { "weft.zeros", "weft.not_a_name" }))
    assert.are.same({ "weft.vec3" }, missing_of(" weft.vec3d ", { "weft.vec3" }))
  end)
end)
