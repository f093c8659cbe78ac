-- Every file in spec/fails/ declares a kernel that the compiler must reject.
-- Its first line says where and why: "-- expect: <line>: <message>". The
-- error must read "spec/fails/<file>.lua:<line>: <message>", followed by the
-- source line and a caret line. An error inside a weft.func the kernel
-- calls then lists the calls on the way, innermost first: each is declared
-- by a line "-- called from: <line>" (at the end of the file, so that the
-- other lines keep their numbers) and must appear as "called from
-- spec/fails/<file>.lua:<line>".
local weft = require "weft"

local dir = "spec/fails"

local function list_files()
  local p = assert(io.popen('ls "' .. dir .. '"'))
  local files = {}
  for name in p:lines() do
    if name:match("%.lua$") then files[#files + 1] = name end
  end
  p:close()
  table.sort(files)
  return files
end

local function expectation(path)
  local f = assert(io.open(path))
  local first = f:read("*l")
  local calls = {}
  for l in f:lines() do
    local at = l:match("^%-%- called from: (%d+)$")
    if at then calls[#calls + 1] = "called from " .. path .. ":" .. at end
  end
  f:close()
  local line, msg = first:match("^%-%- expect: (%d+): (.*)$")
  return tonumber(line), msg, calls
end

local function source_line(path, n)
  local k = 0
  for l in io.lines(path) do
    k = k + 1
    if k == n then return l end
  end
end

describe("kernels that must fail", function()
  local files = list_files()

  it("finds the failure cases", function()
    assert.is_true(#files >= 20)
  end)

  for _, name in ipairs(files) do
    it(name, function()
      local path = dir .. "/" .. name
      local line, msg, calls = expectation(path)
      assert.is_not_nil(line, "missing '-- expect: <line>: <message>' in " .. path)
      local ok, err = pcall(function()
        local k = dofile(path)
        return k:ir()
      end)
      assert.is_false(ok, "compiled but should fail: " .. path)
      err = tostring(err)
      local head = path .. ":" .. line .. ": " .. msg
      assert.are.equal(head, err:sub(1, #head))
      -- the source line and a caret follow
      local rest = err:sub(#head + 1)
      local src, caret, tail = rest:match("^\n([^\n]*)\n([^\n]*)(.*)$")
      assert.are.equal(source_line(path, line), src)
      assert.truthy(caret and caret:match("^[ \t]*%^$"), "no caret line in: " .. err)
      local got = {}
      for l in (tail or ""):gmatch("\n([^\n]*)") do got[#got + 1] = l end
      assert.are.same(calls, got)
    end)
  end
end)
