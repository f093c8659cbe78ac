-- tests/diff/run.lua: the differential test's runner. Each case is a
-- function from tests/diff/gen.lua, run by plain LuaJIT's interpreter
-- (jit.off: where LuaJIT's interpreter and JIT disagree, weft matches the
-- interpreter) and as a weft.func inside a kernel, on the same inputs.
-- A case is "same" when every result is the same double (NaN equal to
-- NaN, -0 distinct from 0), "different" otherwise, and "refused" when
-- weft rejects the function (its message is kept).
--
--   luajit tests/diff/run.lua FIRST COUNT   (from the repository root)
-- prints one line per case, "<seed> same|different|refused|jitdiff <detail>",
-- flushed as it goes, so scripts/lua-diff can tell which case hung.
local weft = require "weft"
local gen = dofile("tests/diff/gen.lua")
local M = {}

local A, f64 = weft.array, weft.float64
local env = setmetatable({ weft = weft }, { __index = _G })

local function same(x, y)
  if x ~= x then return y ~= y end
  if x == 0 and y == 0 then return 1 / x == 1 / y end
  return x == y
end

local function make_kernel(f)
  return weft.kernel{ a = A(f64), b = A(f64), y = A(f64), function(a, b, y)
    local i = weft.tid()
    local r, s, t = f(a[i], b[i])
    y[i * 3], y[i * 3 + 1], y[i * 3 + 2] = r, s, t
  end }
end

local function fmt(x) return string.format("%.17g", x) end

-- Run case seed: returns status, detail, text.
function M.case(seed)
  local text = gen.gen(seed)
  local fn = assert(weft.load(text, "=diff" .. seed, "t", env))()
  local n = #gen.inputs
  local av, bv, want, jitwant = {}, {}, {}, {}
  local interp = assert(weft.load(text, "=diff" .. seed, "t", env))()
  jit.off(interp)
  for j, ab in ipairs(gen.inputs) do
    av[j], bv[j] = ab[1], ab[2]
    local r = { interp(ab[1], ab[2]) }
    local q = { fn(ab[1], ab[2]) }
    for c = 1, 3 do
      want[(j - 1) * 3 + c] = r[c]
      jitwant[(j - 1) * 3 + c] = q[c]
    end
  end
  local ok, res = pcall(function()
    local k = make_kernel(weft.func(fn))
    local y = weft.zeros(3 * n, f64)
    weft.launch(k, n, { A(av, f64), A(bv, f64), y })
    return y:totable()
  end)
  if not ok then
    local msg = tostring(res):gsub("\n.*", ""):gsub("^[^:]*:%d+: ", "")
    return "refused", msg, text
  end
  for i = 1, 3 * n do
    if not same(want[i], res[i]) then
      local j = math.floor((i - 1) / 3) + 1
      return "different", ("input %s, %s result %d: lua %s weft %s"):format(fmt(av[j]), fmt(bv[j]),
        (i - 1) % 3 + 1, fmt(want[i]), fmt(res[i])), text
    end
  end
  for i = 1, 3 * n do
    if not same(want[i], jitwant[i]) then
      return "jitdiff", ("LuaJIT's JIT gives %s, its interpreter %s"):format(fmt(jitwant[i]),
        fmt(want[i])), text
    end
  end
  return "same", "", text
end

if arg and arg[0] and arg[0]:find("tests/diff/run.lua", 1, true) then
  local first, count = tonumber(arg[1]) or 1, tonumber(arg[2]) or 100
  for seed = first, first + count - 1 do
    io.stdout:write(seed, " START\n")
    io.stdout:flush()
    local status, detail = M.case(seed)
    io.stdout:write(seed, " ", status, " ", detail, "\n")
    io.stdout:flush()
  end
end

return M
