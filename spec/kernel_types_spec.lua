-- Scalar types in kernels, checked by launching and comparing with plain
-- Lua references: integer arithmetic with C wrap-around, `/` truncating and
-- `%` with the sign of the divisor on integers, `^`, floats of every width,
-- bools, and casts through the type constructors with C semantics.
local weft = require "weft"
local ffi = require "ffi"

local A = weft.array

local INTS = {
  { weft.int8, 8, true }, { weft.uint8, 8, false }, { weft.int16, 16, true },
  { weft.uint16, 16, false }, { weft.int32, 32, true }, { weft.uint32, 32, false },
  { weft.int64, 64, true }, { weft.uint64, 64, false },
}

-- x reduced to a bits-wide integer (two's complement when signed).
local function wrap(x, bits, signed)
  local m = 2 ^ bits
  x = x % m
  if signed and x >= m / 2 then x = x - m end
  return x
end

local function idiv(x, y)
  local q = x / y
  return q >= 0 and math.floor(q) or math.ceil(q)
end

local function close(a, b, tol)
  tol = tol or 1e-6
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

local function check_list(got, want, tol, what)
  assert.are.equal(#want, #got, what)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if type(g) == "cdata" then g = tonumber(g) end
    local ok
    if type(w) == "boolean" or not tol then ok = g == w else ok = close(g, w, tol) end
    if not ok then
      error(string.format("%s item %d: got %s, want %s", what or "", i, tostring(g), tostring(w)), 2)
    end
  end
end

describe("kernel scalar types", function()
  -- one generic kernel, specialized for every integer type
  local intops = weft.kernel{ function(a, b, o)
    local i = weft.tid()
    local x, y = a[i], b[i]
    o[i * 6 + 0] = x + y
    o[i * 6 + 1] = x - y
    o[i * 6 + 2] = x * y
    o[i * 6 + 3] = weft.idiv(x, y)
    o[i * 6 + 4] = x % y
    o[i * 6 + 5] = -x + 3
  end }

  for _, spec in ipairs(INTS) do
    local t, bits, signed = spec[1], spec[2], spec[3]
    it(t.name .. ": + - * idiv % and unary minus wrap like C (idiv truncates, % is Lua's)", function()
      local av, bv
      if signed then
        av, bv = { 7, -7, 9, -9, 100, 120, -100, 0 }, { 2, 2, -4, -4, 3, 7, 100, 5 }
      else
        av, bv = { 7, 250, 9, 200, 100, 120, 1, 0 }, { 2, 3, 4, 100, 3, 7, 100, 5 }
      end
      if bits >= 32 then
        av[#av + 1], bv[#bv + 1] = 60000, 50000
        av[#av + 1], bv[#bv + 1] = 2000000, 3
      end
      local n = #av
      local o = weft.zeros(n * 6, t)
      weft.launch(intops, n, { A(av, t), A(bv, t), o })
      local want, want_raw = {}, {}
      for k = 1, n do
        local x, y = av[k], bv[k]
        for _, w in ipairs { x + y, x - y, x * y, idiv(x, y), x % y, -x + 3 } do
          want_raw[#want_raw + 1] = w
        end
        want[#want + 1] = wrap(x + y, bits, signed)
        want[#want + 1] = wrap(x - y, bits, signed)
        want[#want + 1] = wrap(x * y, bits, signed)
        want[#want + 1] = wrap(idiv(x, y), bits, signed)
        want[#want + 1] = wrap(x % y, bits, signed)
        want[#want + 1] = wrap(-x + 3, bits, signed)
      end
      if bits == 64 then
        -- compare exactly through the raw memory: 64-bit values do not fit doubles
        local ct = signed and "int64_t" or "uint64_t"
        local p = ffi.cast(ct .. " *", o:ptr())
        for k = 1, #want do
          local w = tostring(ffi.cast(ct, ffi.new("int64_t", want_raw[k])))
          assert.are.equal(w, tostring(p[k - 1]), t.name .. " item " .. k)
        end
        return
      end
      check_list(o:totable(), want, nil, t.name)
    end)
  end

  it("unsigned comparisons, division and modulo use the unsigned value", function()
    local k = weft.kernel{ function(a, b, o, c)
      local i = weft.tid()
      local x, y = a[i], b[i]
      o[i * 2] = weft.idiv(x, y)
      o[i * 2 + 1] = x % y
      c[i * 3] = x > y
      c[i * 3 + 1] = x <= y
      c[i * 3 + 2] = weft.max(x, y) == x
    end }
    for _, t in ipairs { weft.uint8, weft.uint16, weft.uint32 } do
      local top = 2 ^ t.bits - 1
      local av, bv = { top, top - 1, 1, top }, { 2, 3, top, top }
      local o, c = weft.zeros(8, t), weft.zeros(12, weft.bool)
      weft.launch(k, 4, { A(av, t), A(bv, t), o, c })
      local wo, wc = {}, {}
      for n = 1, 4 do
        local x, y = av[n], bv[n]
        wo[#wo + 1] = math.floor(x / y)
        wo[#wo + 1] = x % y
        wc[#wc + 1] = x > y
        wc[#wc + 1] = x <= y
        wc[#wc + 1] = math.max(x, y) == x
      end
      assert.are.same(wo, o:totable(), t.name)
      assert.are.same(wc, c:totable(), t.name)
    end
  end)

  it("integer division by zero and INT_MIN / -1 do not crash", function()
    local k = weft.kernel{ a = A(weft.int32), b = A(weft.int32), o = A(weft.int32), function(a, b, o)
      local i = weft.tid()
      o[i * 2] = weft.idiv(a[i], b[i])
      o[i * 2 + 1] = a[i] % b[i]
    end }
    local o = weft.zeros(4, weft.int32)
    weft.config.mode = "fast" -- release mode stops at x / 0 (spec/int_div_spec.lua)
    local ok = pcall(weft.launch, k, 2, { A({ 7, -2147483648 }, weft.int32), A({ 0, -1 }, weft.int32), o })
    weft.config.mode = "release"
    assert.is_true(ok)
    assert.are.same({ 0, 0, -2147483648, 0 }, o:totable())
  end)

  it("float16 math: builtins compute in float16 precision", function()
    local k = weft.kernel{ x = A(weft.float16), o = A(weft.float16), function(x, o)
      local i = weft.tid()
      o[i * 4] = weft.sqrt(x[i])
      o[i * 4 + 1] = weft.sin(x[i]) + weft.exp(x[i])
      o[i * 4 + 2] = weft.max(x[i], 0.75) * 2
      o[i * 4 + 3] = weft.float16(weft.float32(x[i]) * 3)
    end }
    local o = weft.zeros(8, weft.float16)
    weft.launch(k, 2, { A({ 0.5, 2 }, weft.float16), o })
    local want = {}
    for _, v in ipairs { 0.5, 2 } do
      for _, w in ipairs { math.sqrt(v), math.sin(v) + math.exp(v), math.max(v, 0.75) * 2, v * 3 } do
        want[#want + 1] = w
      end
    end
    check_list(o:totable(), want, 2e-3, "float16")
  end)

  it("wraps 64-bit integers at 2^63 and 2^64", function()
    local k = weft.kernel{ a = A(weft.int64), u = A(weft.uint64), function(a, u)
      a[1] = a[0] + 1
      a[2] = a[0] * 2
      u[1] = u[0] - 1
      u[2] = u[1] + 1
    end }
    local a, u = weft.zeros(3, weft.int64), weft.zeros(3, weft.uint64)
    a[0] = 9223372036854775807LL
    u[0] = 0ULL
    weft.launch(k, 1, { a, u })
    a = ffi.cast("int64_t *", a:ptr())
    u = ffi.cast("uint64_t *", u:ptr())
    assert.are.equal("-9223372036854775808LL", tostring(ffi.cast("int64_t", a[1])))
    assert.are.equal("-2LL", tostring(ffi.cast("int64_t", a[2])))
    assert.are.equal("18446744073709551615ULL", tostring(ffi.cast("uint64_t", u[1])))
    assert.are.equal("0ULL", tostring(ffi.cast("uint64_t", u[2])))
  end)

  local floatops = weft.kernel{ function(a, b, o)
    local i = weft.tid()
    local x, y = a[i], b[i]
    o[i * 7 + 0] = x + y
    o[i * 7 + 1] = x - y
    o[i * 7 + 2] = x * y
    o[i * 7 + 3] = x / y
    o[i * 7 + 4] = x % y
    o[i * 7 + 5] = x ^ 2 + y ^ 0.5
    o[i * 7 + 6] = -x * 0.5
  end }

  for _, spec in ipairs { { weft.float16, 2e-3 }, { weft.float32, 1e-6 }, { weft.float64, 1e-13 } } do
    local t, tol = spec[1], spec[2]
    it(t.name .. ": + - * / % ^ and unary minus", function()
      local av, bv = { 1.5, -2.25, 7, -7, 0.5, 3 }, { 0.5, 4, 2, 2, 0.25, 3 }
      local n = #av
      local o = weft.zeros(n * 7, t)
      weft.launch(floatops, n, { A(av, t), A(bv, t), o })
      local want = {}
      for k = 1, n do
        local x, y = av[k], bv[k]
        for _, w in ipairs { x + y, x - y, x * y, x / y, x % y, x ^ 2 + y ^ 0.5, -x * 0.5 } do
          want[#want + 1] = w
        end
      end
      check_list(o:totable(), want, tol, t.name)
    end)
  end

  it("float32 arithmetic rounds to float32", function()
    local k = weft.kernel{ o = A(weft.float32), d = A(weft.float64), function(o, d)
      o[0] = weft.float32(0.1) * 3
      d[0] = weft.float64(weft.float32(0.1))
      d[1] = weft.float64(0.1) * 3
    end }
    local o, d = weft.zeros(1, weft.float32), weft.zeros(2, weft.float64)
    weft.launch(k, 1, { o, d })
    local f = ffi.new("float[1]")
    f[0] = 0.1
    local f01 = f[0]
    f[0] = f01 * 3
    assert.are.equal(f[0], o[0])
    assert.are.equal(f01, d[0])
    assert.are.equal(0.1 * 3, d[1])
  end)

  it("integer ^ is a float power", function()
    local k = weft.kernel{ a = A(weft.int32), o = A(weft.float32), d = A(weft.float64), function(a, o, d)
      local i = weft.tid()
      o[i] = a[i] ^ 2
      d[i] = weft.int64(a[i]) ^ 0.5
    end }
    local o, d = weft.zeros(3, weft.float32), weft.zeros(3, weft.float64)
    weft.launch(k, 3, { A({ 2, 3, 9 }, weft.int32), o, d })
    check_list(o:totable(), { 4, 9, 81 }, 1e-6)
    check_list(d:totable(), { math.sqrt(2), math.sqrt(3), 3 }, 1e-12)
  end)

  it("bool values: arrays, not, and/or, comparisons, casts", function()
    local k = weft.kernel{ b = A(weft.bool), x = A(weft.int32), o = A(weft.bool), n = A(weft.int32),
      function(b, x, o, n)
        local i = weft.tid()
        local v = b[i]
        o[i * 4 + 0] = not v
        o[i * 4 + 1] = v and x[i] > 2
        o[i * 4 + 2] = v or x[i] == 0
        o[i * 4 + 3] = weft.bool(x[i])
        n[i * 2] = weft.int32(v)
        n[i * 2 + 1] = weft.int32(v == (x[i] > 2)) + weft.int32(v ~= true) * 10
      end }
    local bv, xv = { true, false, true, false }, { 3, 0, 1, 5 }
    local o, n = weft.zeros(16, weft.bool), weft.zeros(8, weft.int32)
    weft.launch(k, 4, { A(bv, weft.bool), A(xv, weft.int32), o, n })
    local wo, wn = {}, {}
    for i = 1, 4 do
      local v, x = bv[i], xv[i]
      for _, w in ipairs { not v, v and x > 2, v or x == 0, x ~= 0 } do wo[#wo + 1] = w end
      wn[#wn + 1] = v and 1 or 0
      wn[#wn + 1] = (v == (x > 2) and 1 or 0) + (v ~= true and 10 or 0)
    end
    assert.are.same(wo, o:totable())
    assert.are.same(wn, n:totable())
  end)

  -- casts: from type, to type, inputs, expected outputs (C semantics)
  local CASTS = {
    { weft.float32, weft.int32, { 2.7, -2.7, 0.5, -0.5, 1e6 }, { 2, -2, 0, 0, 1000000 } },
    { weft.float64, weft.int64, { 1e15 + 0.5, -3.99 }, { 1e15, -3 } },
    { weft.int32, weft.uint8, { 300, -1, 255, 256 }, { 44, 255, 255, 0 } },
    { weft.int32, weft.int8, { 200, -129, 127, -128 }, { -56, 127, 127, -128 } },
    { weft.int32, weft.int16, { 40000, -32769 }, { -25536, 32767 } },
    { weft.int64, weft.int32, { 2 ^ 32 + 5, 2 ^ 31 }, { 5, -2 ^ 31 } },
    { weft.uint32, weft.int32, { 4294967295, 2147483648 }, { -1, -2147483648 } },
    { weft.int32, weft.uint32, { -1, -2 }, { 4294967295, 4294967294 } },
    { weft.uint8, weft.int32, { 255, 128 }, { 255, 128 } },
    { weft.int8, weft.int32, { -1, -128 }, { -1, -128 } },
    { weft.int8, weft.uint16, { -1 }, { 65535 } },
    { weft.uint16, weft.int8, { 65535, 383 }, { -1, 127 } },
    { weft.int32, weft.float32, { 16777217, -5 }, { 16777216, -5 } },
    { weft.int64, weft.float64, { 2 ^ 53 + 1 }, { 2 ^ 53 } },
    { weft.float64, weft.float32, { 0.1 }, { tonumber(ffi.new("float", 0.1)) } },
    { weft.float32, weft.uint8, { 200.7, 3.2 }, { 200, 3 } },
    { weft.float32, weft.float16, { 1.5, 65504, 0.1 }, { 1.5, 65504, 0.0999755859375 } },
    { weft.float16, weft.float64, { 0.5, -2 }, { 0.5, -2 } },
    { weft.int32, weft.bool, { 0, 5, -1 }, { false, true, true } },
    { weft.float32, weft.bool, { 0, 0.25 }, { false, true } },
    { weft.bool, weft.int32, { true, false }, { 1, 0 } },
    { weft.bool, weft.float64, { true, false }, { 1, 0 } },
    { weft.uint32, weft.float32, { 4294967295 }, { 4294967296 } },
  }
  for _, c in ipairs(CASTS) do
    local from, to, xs, want = c[1], c[2], c[3], c[4]
    it("casts " .. from.name .. " to " .. to.name .. " with C semantics", function()
      local T = to
      local k = weft.kernel{ function(x, o)
        local i = weft.tid()
        o[i] = T(x[i])
      end }
      local o = weft.zeros(#xs, to)
      weft.launch(k, #xs, { A(xs, from), o })
      check_list(o:totable(), want, nil, from.name .. "->" .. to.name)
    end)
  end

  it("uint64 <-> int64 and negative ints to uint64 (sign extension)", function()
    local k = weft.kernel{ a = A(weft.int8), u = A(weft.uint64), s = A(weft.int64), function(a, u, s)
      u[0] = weft.uint64(a[0])
      s[0] = weft.int64(u[0])
      u[1] = weft.uint64(weft.int32(a[0]))
    end }
    local u, s = weft.zeros(2, weft.uint64), weft.zeros(1, weft.int64)
    weft.launch(k, 1, { A({ -1 }, weft.int8), u, s })
    u = ffi.cast("uint64_t *", u:ptr())
    s = ffi.cast("int64_t *", s:ptr())
    assert.are.equal("18446744073709551615ULL", tostring(ffi.cast("uint64_t", u[0])))
    assert.are.equal("18446744073709551615ULL", tostring(ffi.cast("uint64_t", u[1])))
    assert.are.equal("-1LL", tostring(ffi.cast("int64_t", s[0])))
  end)

  it("number literals take the type of the other operand, casts of literals fold", function()
    local k = weft.kernel{ o = A(weft.uint8), f = A(weft.float64), function(o, f)
      local x = weft.uint8(250)
      o[0] = x + 10
      o[1] = weft.uint8(3.9)
      f[0] = weft.float64(1) / 3
      f[1] = 2 ^ 0.5
    end }
    local o, f = weft.zeros(2, weft.uint8), weft.zeros(2, weft.float64)
    weft.launch(k, 1, { o, f })
    assert.are.same({ 4, 3 }, o:totable())
    assert.are.equal(1 / 3, f[0])
    assert.is_true(close(f[1], math.sqrt(2), 1e-6))
  end)

  it("scalar parameters of every type", function()
    for _, spec in ipairs(INTS) do
      local t = spec[1]
      local k = weft.kernel{ s = t, function(s, o) o[0] = s + 1 end }
      local o = weft.zeros(1, t)
      weft.launch(k, 1, { 100, o })
      assert.are.equal(101, tonumber(o[0]))
    end
    local typed = weft.kernel{ s = weft.uint16, d = weft.float64, b = weft.bool, function(s, d, b, o)
      o[0] = weft.float64(s) + d + weft.float64(b and 1 or 0)
    end }
    local o = weft.zeros(1, weft.float64)
    weft.launch(typed, 1, { 65535, 0.25, true, o })
    assert.are.equal(65535 + 0.25 + 1, o[0])
  end)
end)
