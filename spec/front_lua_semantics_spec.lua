-- Front end: kernels follow Lua's arithmetic and semantics (weft issue 12):
-- `/` always divides as floats, weft.idiv and weft.fmod are C's `/` and
-- `%`, numeric for loops run as LuaJIT's, `and`/`or` treat every number as
-- true, a parameter assigned becomes a local, LuaJIT's math functions,
-- `goto continue`, and LLVM output that matches LuaJIT's interpreter
-- (math.max with NaN, a power of a constant power of two).
local weft = require "weft"

local A = weft.array
local i32, i64, f32, f64 = weft.int32, weft.int64, weft.float32, weft.float64

-- Run a one-thread kernel k(y, a) with y a float64 array of n and a a
-- float64 scalar; returns y as a table.
local function run(fn, a, n)
  local two = debug.getinfo(fn, "u").nparams == 2 -- (y, a) or (y)
  local k = two and weft.kernel{ y = A(f64), a = f64, fn } or weft.kernel{ y = A(f64), fn }
  local y = weft.zeros(n or 1, f64)
  weft.launch(k, 1, two and { y, a or 0 } or { y })
  return y:totable(), k
end

local function compile_error(fn)
  local ok, err = pcall(function()
    return weft.kernel{ y = A(f64), a = f64, fn }:ir()
  end)
  assert.is_false(ok)
  return tostring(err)
end

local function same(want, got)
  -- bit-exact, NaN equal to NaN, -0 distinct from 0
  if want ~= want then return got ~= got end
  if want == 0 and got == 0 then return 1 / want == 1 / got end
  return want == got
end

describe("'/' divides as floats", function()
  it("int32 operands give float32; int64 operands give float64", function()
    local k = weft.kernel{ a = A(i32), b = A(i64), f = A(f32), d = A(f64), function(a, b, f, d)
      local i = weft.tid()
      f[i] = a[i] / 3
      d[i] = b[i] / 3
    end }
    local f, d = weft.zeros(2, f32), weft.zeros(2, f64)
    weft.launch(k, 2, { A({ -4, 7 }, i32), A({ -4, 7 }, i64), f, d })
    local F = require("ffi").new("float[1]")
    for j, x in ipairs { -4, 7 } do
      F[0] = x / 3
      assert.are.equal(F[0], f[j - 1])
      assert.are.equal(x / 3, d[j - 1])
    end
  end)

  it("literals fold as Lua's: 6 / 3 is the float 2", function()
    assert.are.same({ 2, -4 / 3 }, run(function(y)
      y[0] = 6 / 3
      y[1] = -4 / 3
    end, 0, 2))
  end)

  it("q*b + r == a for idiv and fmod, and for floordiv and %", function()
    local k = weft.kernel{ a = A(i32), b = A(i32), o = A(i32), function(a, b, o)
      local i = weft.tid()
      local x, y = a[i], b[i]
      o[i * 4] = weft.idiv(x, y)
      o[i * 4 + 1] = weft.fmod(x, y)
      o[i * 4 + 2] = weft.floordiv(x, y)
      o[i * 4 + 3] = x % y
    end }
    local av, bv = { -4, 4, -7, 7 }, { 3, -3, -2, 2 }
    local o = weft.zeros(16, i32)
    weft.launch(k, 4, { A(av, i32), A(bv, i32), o })
    local want = {}
    for j = 1, 4 do
      local x, y = av[j], bv[j]
      local q = x / y
      q = q < 0 and math.ceil(q) or math.floor(q)
      want[#want + 1] = q
      want[#want + 1] = math.fmod(x, y)
      want[#want + 1] = math.floor(x / y)
      want[#want + 1] = x % y
    end
    assert.are.same(want, o:totable())
    assert.are.same({ -1, -1, -2, 2 }, { want[1], want[2], want[3], want[4] })
  end)

  it("weft.fmod on floats is C's fmod; weft.idiv truncates", function()
    assert.are.same({ math.fmod(-7.5, 2), math.fmod(7.5, -2), -3, 1 }, run(function(y, a)
      y[0] = weft.fmod(-a, 2)
      y[1] = math.fmod(a, -2)
      y[2] = weft.idiv(-a, 2)
      y[3] = weft.idiv(7, 4)
    end, 7.5, 4))
  end)

  it("an int quotient where an int is needed names floordiv and idiv", function()
    local k = weft.kernel{ a = A(i32), function(a)
      local i = weft.tid()
      a[i] = i / 2
    end }
    local ok, err = pcall(k.ir, k)
    assert.is_false(ok)
    assert.matches("expected int32, got float32 ('/' always divides as floats, as in Lua; "
      .. "for an integer quotient use weft.floordiv(a, b), Lua's //, or weft.idiv(a, b), "
      .. "which truncates like C)", err, 1, true)
    local k2 = weft.kernel{ a = A(i32), function(a)
      local i = weft.tid()
      a[i / 2] = 1
    end }
    ok, err = pcall(k2.ir, k2)
    assert.is_false(ok)
    assert.matches("index must be an integer, got float32 ('/' always", err, 1, true)
  end)
end)

describe("numeric for as LuaJIT", function()
  it("decimal literal bounds run a float64 loop with LuaJIT's values", function()
    local want, n = nil, 0
    for k = 0.3, 1.2, 0.1 do want, n = k, n + 1 end
    local sum = 0
    for k = 0, 1, 0.1 do sum = sum + k end
    local y = run(function(y)
      local r, c, s = weft.float64(0), weft.float64(0), weft.float64(0)
      for k = 0.3, 1.2, 0.1 do
        r = k
        c = c + 1
      end
      for k = 0, 1, 0.1 do s = s + k end
      y[0], y[1], y[2] = r, c, s
    end, 0, 3)
    assert.are.same({ want, n, sum }, y)
    assert.are.equal(1.2, y[1]) -- LuaJIT ends at 1.2, not 1.1000001430511475
  end)

  it("the float64 counter takes the type of its use (float32 stores)", function()
    local k = weft.kernel{ x = A(f32), function(x)
      local j = 0
      for t = 0, 1, 0.25 do
        x[j] = t * 2
        j = j + 1
      end
    end }
    local x = weft.zeros(5, f32)
    weft.launch(k, 1, { x })
    assert.are.same({ 0, 0.5, 1, 1.5, 2 }, x:totable())
  end)

  it("an untyped counter mixes with floats and still indexes arrays", function()
    local k = weft.kernel{ x = A(f64), n = A(i32), function(x, n)
      local s = weft.float64(0)
      for k = 1, 3 do
        s = s + k * 0.5
        n[k] = k * 2
      end
      for k = 1.0, 2 do n[k + 3] = k end
      x[0] = s
    end }
    local x, n = weft.zeros(1, f64), weft.zeros(6, i32)
    weft.launch(k, 1, { x, n })
    assert.are.equal(3, x[0])
    assert.are.same({ 0, 2, 4, 6, 1, 2 }, n:totable())
  end)

  it("a fractional limit with integer start and step is an integer loop", function()
    local k = weft.kernel{ x = A(i32), function(x)
      for i = 0, 2.5 do x[i] = i end
      for i = 4, 3.5, -1 do x[i] = i * 10 end
    end }
    local x = weft.zeros(5, i32)
    weft.launch(k, 1, { x })
    assert.are.same({ 0, 1, 2, 0, 40 }, x:totable())
  end)

  it("a typed int bound with a fractional step makes a float64 loop", function()
    local k = weft.kernel{ n = i32, y = A(f64), function(n, y)
      local s = weft.float64(0)
      for t = 0, n, 0.5 do s = s + t end
      y[0] = s
    end }
    local y = weft.zeros(1, f64)
    weft.launch(k, 1, { 2, y })
    assert.are.equal(0 + 0.5 + 1 + 1.5 + 2, y[0])
  end)

  it("loops at 2^31 and 3e9 stop as Lua's", function()
    local counts = {}
    for _, b in ipairs { { 0, 2147483647, 1073741824 }, { 2147483645, 2147483647, 1 }, { 3e9, 3e9 + 2, 1 } } do
      local c = 0
      for _ = b[1], b[2], b[3] do c = c + 1 end
      counts[#counts + 1] = c
    end
    assert.are.same(counts, run(function(y)
      local c1, c2, c3 = weft.float64(0), weft.float64(0), weft.float64(0)
      for _ = 0, 2147483647, 1073741824 do c1 = c1 + 1 end
      for _ = 2147483645, 2147483647 do c2 = c2 + 1 end
      for _ = 3e9, 3e9 + 2 do c3 = c3 + 1 end
      y[0], y[1], y[2] = c1, c2, c3
    end, 0, 3))
    assert.are.same({ 2, 3, 3 }, counts)
  end)
end)

describe("Lua's semantics beyond arithmetic", function()
  it("and/or with numbers: every number is true", function()
    local a = 3
    assert.are.same({ a and 2, a or 5, a and a * 2 or 5, (a > 5) and 1 or a },
      run(function(y, a)
        y[0] = a and 2
        y[1] = a or 5
        y[2] = a and a * 2 or 5
        y[3] = (a > 5) and 1 or a
      end, a, 4))
  end)

  it("a bool and a number still cannot mix", function()
    assert.matches("operand of 'and' must be a bool, got float64",
      compile_error(function(y, a) y[0] = (a > 1) and a end), 1, true)
  end)

  it("assigning to a scalar parameter makes it a local", function()
    assert.are.same({ 12, 3 }, run(function(y, a)
      local b = a
      a = a * 2
      if a > 5 then a = a + 6 end
      y[0], y[1] = a, b
    end, 3, 2))
  end)

  it("LuaJIT's math functions give LuaJIT's results", function()
    local x = -7.25
    local m, e = math.frexp(x)
    local ip, fp = math.modf(x)
    local want = { math.rad(x), math.deg(x), math.log10(-x), math.log(-x, 10), math.log(8, 2),
                   math.ldexp(x, 5), math.ldexp(3, -1076), m, e, ip, fp, math.fmod(x, 2),
                   math.rad(90), math.huge, math.pi }
    local got = run(function(y, a)
      y[0] = math.rad(a)
      y[1] = math.deg(a)
      y[2] = math.log10(-a)
      y[3] = math.log(-a, 10)
      y[4] = math.log(8, 2)
      y[5] = math.ldexp(a, 5)
      y[6] = math.ldexp(a * 0 + 3, -1076)
      local mm, ee = math.frexp(a)
      y[7], y[8] = mm, weft.float64(ee)
      local ii, ff = math.modf(a)
      y[9], y[10] = ii, ff
      y[11] = math.fmod(a, 2)
      y[12] = math.rad(90)
      y[13] = math.huge
      y[14] = math.pi
    end, x, #want)
    for j = 1, #want do assert.is_true(same(want[j], got[j]), "result " .. j) end
  end)

  it("math functions of untyped numbers are untyped: Lua's doubles, or the use's type", function()
    local sum = 0
    for k = 1, 4 do sum = sum + math.sqrt(k) + math.max(k, 2.5) + math.rad(k) + math.fmod(k, 3) + math.log(k, 2) end
    for k = 1, 3 do
      local m, e = math.frexp(k * 0.75)
      local ip, fp = math.modf(k / 4)
      sum = sum + m * e + math.ldexp(k, -2) + ip + fp
    end
    assert.are.same({ math.sqrt(2), math.sin(0.5) + math.atan2(1, 3), sum, 3 }, run(function(y)
      y[0] = math.sqrt(2)
      y[1] = math.sin(0.5) + math.atan2(1, 3)
      local s = weft.float64(0)
      for k = 1, 4 do s = s + math.sqrt(k) + math.max(k, 2.5) + math.rad(k) + math.fmod(k, 3) + math.log(k, 2) end
      for k = 1, 3 do
        local m, e = math.frexp(k * 0.75)
        local ip, fp = math.modf(k / 4)
        s = s + m * e + math.ldexp(k, -2) + ip + fp
      end
      y[2] = s
      y[3] = math.max(1, 3, 2)
    end, 0, 4))
    local k = weft.kernel{ x = A(f32), n = A(i32), function(x, n)
      for j = 0, 3 do
        x[j] = math.sin(j * 0.5) -- float32 sin of the float32 value
        n[j] = math.abs(j - 2) + math.floor(j)
      end
    end }
    local x, n = weft.zeros(4, f32), weft.zeros(4, i32)
    weft.launch(k, 1, { x, n })
    assert.are.same({ 2, 2, 2, 4 }, n:totable())
    local F = require("ffi").new("float[1]")
    F[0] = math.sin(0.5)
    assert.is_true(math.abs(x[1] - F[0]) <= 1e-7)
    assert.is_truthy(k:ir():find("sin", 1, true))
    assert.is_falsy(k:ir():find("f64", 1, true))
  end)

  it("frexp and modf at zero, infinities and NaN", function()
    for _, x in ipairs { 0, -0.0, 1 / 0, -1 / 0, 0 / 0, -3, 2 ^ -1074, 2 ^ 1023 * 1.5, 0.5, 1 } do
      local m, e = math.frexp(x)
      local ip, fp = math.modf(x)
      local got = run(function(y, a)
        local mm, ee = math.frexp(a)
        local ii, ff = math.modf(a)
        y[0], y[1], y[2], y[3] = mm, weft.float64(ee), ii, ff
      end, x, 4)
      assert.is_true(same(m, got[1]), "frexp m of " .. x)
      if x == x and x ~= 1 / 0 and x ~= -1 / 0 then assert.are.equal(e, got[2]) end
      assert.is_true(same(ip, got[3]), "modf ip of " .. x)
      assert.is_true(same(fp, got[4]), "modf fp of " .. x)
    end
  end)

  it("weft.quat() is the zero quaternion, quat_identity() the identity", function()
    assert.are.same({ 0, 0, 0, 0, 1 }, run(function(y)
      local q = weft.quat()
      y[0], y[1], y[2], y[3] = weft.float64(q.x), weft.float64(q.y), weft.float64(q.z),
        weft.float64(q.w)
      y[4] = weft.float64(weft.quat_identity().w)
    end, 0, 5))
  end)
end)

-- The function in text runs by plain LuaJIT (y a table) and as a kernel
-- (y a float64 array); both must write the same y[0..n).
local function same_as_lua(text, n)
  local env = setmetatable({ weft = weft }, { __index = _G })
  local lua_fn = assert(weft.load(text, "=plain", "t", env))()
  local want = {}
  lua_fn(want)
  local got = run(assert(weft.load(text, "=kernel_text", "t", env))(), 0, n)
  for i = 1, n do assert.are.equal(want[i - 1], got[i], "y[" .. (i - 1) .. "]") end
end

describe("goto continue", function()
  it("skips to the end of a for or while body", function()
    same_as_lua([[
      return function(y)
        local s = weft.float64(0)
        for i = 1, 10 do
          if i % 2 == 0 then goto continue end
          if i == 7 then goto continue end
          s = s + weft.float64(i)
          ::continue::
        end
        local t, j = weft.float64(0), 0
        while j < 10 do
          j = j + 1
          if j % 3 == 0 then goto skip end
          t = t + weft.float64(j)
          ::skip::
        end
        y[0], y[1] = s, t
      end]], 2)
  end)

  it("skips to the until condition of a repeat loop", function()
    same_as_lua([[
      return function(y)
        for t = 0, 1 do
          local limit = t == 0 and 100 or 4
          local i, s = 0, 0
          repeat
            i = i + 1
            if i % 2 == 0 then goto continue end
            if i > limit then break end
            s = s + i
            ::continue::
          until i >= 9
          y[t] = weft.float64(s * 100 + i)
        end
      end]], 2)
  end)

  it("works with break and nested loops", function()
    same_as_lua([[
      return function(y)
        local c = weft.float64(0)
        for i = 0, 5 do
          for j = 0, 5 do
            if j == i then goto continue end
            if j > 3 then break end
            c = c + 1
            ::continue::
          end
          if i == 4 then goto continue end
          c = c + 100
          ::continue::
        end
        y[0] = c
      end]], 1)
  end)
end)

describe("LLVM output matches LuaJIT's interpreter", function()
  it("math.max(0.75, c, 0.75) with c = NaN is 0.75; min likewise", function()
    local nan = 0 / 0
    local got = run(function(y, a)
      y[0] = math.max(0.75, a, 0.75)
      y[1] = math.min(0.75, a, 0.75)
      y[2] = math.max(0.75, a)
      y[3] = math.max(a, 0.75)
    end, nan, 4)
    assert.are.equal(math.max(0.75, nan, 0.75), got[1])
    assert.are.equal(math.min(0.75, nan, 0.75), got[2])
    assert.is_true(got[3] ~= got[3])
    assert.are.equal(0.75, got[4])
  end)

  it("9007199254740992 ^ a is libm's pow, not exp2(53 * a)", function()
    for _, x in ipairs { 1.7, 0.3, -1.1, 2.5 } do
      assert.are.equal(9007199254740992 ^ x, run(function(y, a) y[0] = 9007199254740992 ^ a end, x)[1])
    end
  end)
end)
