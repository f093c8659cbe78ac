-- Control flow, weft.func, constants and generic kernels, checked by
-- launching and comparing with the same code run as plain Lua.
local weft = require "weft"
local ffi = require "ffi"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

-- Run kernel k over the inputs ns (int32) and compare out (m values per
-- thread, int32) with ref(n) giving a list of m numbers.
local function against(k, ns, m, ref, ot)
  ot = ot or i32
  local o = weft.zeros(#ns * m, ot)
  weft.launch(k, #ns, { A(ns, i32), o })
  local want = {}
  for _, n in ipairs(ns) do
    local r = ref(n)
    assert(#r == m)
    for _, v in ipairs(r) do want[#want + 1] = v end
  end
  assert.are.same(want, o:totable())
end

describe("kernel control flow", function()
  it("if / elseif / else chains and nested ifs", function()
    local function body(n)
      local r
      if n < 0 then
        r = 1
      elseif n == 0 then
        r = 2
      elseif n < 10 then
        if n % 2 == 0 then r = 3 else r = 4 end
      else
        r = 5
        if n > 100 then r = r + 10 elseif n > 50 then r = r + 20 end
      end
      local s = 0
      if n > 3 then s = 1 end
      return { r, s }
    end
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      local r
      if n < 0 then
        r = 1
      elseif n == 0 then
        r = 2
      elseif n < 10 then
        if n % 2 == 0 then r = 3 else r = 4 end
      else
        r = 5
        if n > 100 then r = r + 10 elseif n > 50 then r = r + 20 end
      end
      local s = 0
      if n > 3 then s = 1 end
      o[i * 2], o[i * 2 + 1] = r, s
    end }
    against(k, { -5, 0, 4, 7, 20, 60, 200 }, 2, body)
  end)

  it("numeric for: negative, runtime and float steps, empty ranges, the loop variable is a copy", function()
    local function body(n)
      local a, b, c, d, e = 0, 0, 0, 0, 0
      for j = n, 0, -1 do a = a + j end
      local st = n % 3 + 1
      for j = 0, 20, st do b = b + j end
      for j = 0, -st, -st do c = c + 1 end
      for j = 5, n do d = d + 1 end
      for j = 1, n do
        local jj = j
        jj = jj * 2
        e = e + jj
      end
      local f = 0.0
      for x = 0.0, 1.0, 0.25 do f = f + x end
      return { a, b, c, d, e, math.floor(f * 100) }
    end
    local k
    k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      local a, b, c, d, e = 0, 0, 0, 0, 0
      for j = n, 0, -1 do a = a + j end
      local st = n % 3 + 1
      for j = 0, 20, st do b = b + j end
      for j = 0, -st, -st do c = c + 1 end
      for j = 5, n do d = d + 1 end
      for j = 1, n do
        local jj = j
        jj = jj * 2
        e = e + jj
      end
      local f = 0.0
      for x2 = 0.0, 1.0, 0.25 do f = f + x2 end
      o[i * 6], o[i * 6 + 1], o[i * 6 + 2], o[i * 6 + 3], o[i * 6 + 4] = a, b, c, d, e
      o[i * 6 + 5] = weft.int32(weft.floor(f * 100))
    end }
    against(k, { 0, 1, 4, 7, 10 }, 6, body)
  end)

  it("for with a runtime step of either sign (and breaks)", function()
    local function body(n)
      local st = n % 2 == 0 and 2 or -3
      local s, c = 0, 0
      for j = 10, -10, st do
        s = s + j
        c = c + 1
        if c > n then break end
      end
      return { s, c }
    end
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      local st = n % 2 == 0 and 2 or -3
      local s, c = 0, 0
      for j = 10, -10, st do
        s = s + j
        c = c + 1
        if c > n then break end
      end
      o[i * 2], o[i * 2 + 1] = s, c
    end }
    against(k, { 0, 1, 2, 3, 8, 9, 100, 101 }, 2, body)
  end)

  it("while, repeat-until (until sees the body's locals), break in nested loops", function()
    local function body(n)
      local a, c = 0, 0
      while c < n do
        c = c + 1
        if c % 3 == 0 then a = a + c end
      end
      local b = 0
      repeat
        local t = b * 2
        b = b + 1
      until t >= n
      local pairs_ = 0
      for i = 0, n do
        for j = 0, n do
          if j > i then break end
          pairs_ = pairs_ + 1
        end
        if pairs_ > 20 then break end
      end
      local w = 0
      while true do
        w = w + 1
        local inner = 0
        repeat inner = inner + 1 until inner >= w or inner > 3
        if w * inner > n then break end
      end
      return { a, b, pairs_, w }
    end
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      local a, c = 0, 0
      while c < n do
        c = c + 1
        if c % 3 == 0 then a = a + c end
      end
      local b = 0
      repeat
        local t = b * 2
        b = b + 1
      until t >= n
      local pairs_ = 0
      for ii = 0, n do
        for j = 0, n do
          if j > ii then break end
          pairs_ = pairs_ + 1
        end
        if pairs_ > 20 then break end
      end
      local w = 0
      while true do
        w = w + 1
        local inner = 0
        repeat inner = inner + 1 until inner >= w or inner > 3
        if w * inner > n then break end
      end
      o[i * 4], o[i * 4 + 1], o[i * 4 + 2], o[i * 4 + 3] = a, b, pairs_, w
    end }
    against(k, { 0, 1, 5, 9, 30 }, 4, body)
  end)

  it("until sees locals declared after a guarded break", function()
    local function body(n)
      local c = 0
      repeat
        c = c + 1
        if c > 50 then break end
        local done = c * c >= n
      until done
      return { c }
    end
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      local c = 0
      repeat
        c = c + 1
        if c > 50 then break end
        local done = c * c >= n
      until done
      o[i] = c
    end }
    against(k, { 0, 1, 10, 100, 10000 }, 1, body)
  end)

  it("early return from kernels inside loops and branches", function()
    local k = weft.kernel{ x = A(i32), o = A(i32), function(x, o)
      local i = weft.tid()
      local n = x[i]
      o[i] = -1
      if n < 0 then return end
      for j = 0, 100 do
        if j * j >= n then
          o[i] = j
          return
        end
      end
      o[i] = 1000
    end }
    against(k, { -4, 0, 1, 17, 10000, 20000 }, 1, function(n)
      if n < 0 then return { -1 } end
      for j = 0, 100 do if j * j >= n then return { j } end end
      return { 1000 }
    end)
  end)

  it("'c and a or b' selects values of any type; and/or short-circuit", function()
    local hits = weft.zeros(1, i32)
    local k = weft.kernel{ x = A(f32), o = A(f32), v = A(weft.vec2), h = A(i32), function(x, o, v, h)
      local i = weft.tid()
      local a = x[i]
      o[i * 3] = a > 0 and a * 2 or -a
      o[i * 3 + 1] = (a > 1 and a < 3) and 1.5 or 2.5
      -- short-circuit: x[#x] is out of bounds and must not be read when i >= 0
      o[i * 3 + 2] = (i >= 0 or x[#x + 1000000] > 0) and 1.0 or 0.0
      v[i] = a > 0 and weft.vec2(a, 1) or weft.vec2(0, a)
      -- the right side of 'and' runs only when the left is true
      if a > 2 and weft.atomic_add(h, 0, 1) >= 0 then o[i * 3 + 2] = 5.0 end
      if a > 100 or weft.atomic_add(h, 0, 10) >= 0 then end
    end }
    local xs = { -2, 0.5, 2, 4 }
    local o, v = weft.zeros(12), weft.zeros(4, weft.vec2)
    weft.launch(k, 4, { A(xs, f32), o, v, hits })
    local want, wv = {}, {}
    for _, a in ipairs(xs) do
      want[#want + 1] = a > 0 and a * 2 or -a
      want[#want + 1] = (a > 1 and a < 3) and 1.5 or 2.5
      want[#want + 1] = a > 2 and 5 or 1
      wv[#wv + 1] = a > 0 and { a, 1 } or { 0, a }
    end
    assert.are.same(want, o:totable())
    assert.are.same(wv, v:totable())
    assert.are.same({ 1 + 40 }, hits:totable())
  end)

  it("literal locals adapt to the type they meet (local s = 0.0 summing float64)", function()
    local k = weft.kernel{ x = A(f64), o = A(f64), n = A(weft.uint8), function(x, o, n)
      local s = 0.0
      for j = 0, #x - 1 do s = s + x[j] end
      o[0] = s
      local c = 0
      if x[0] > 0 then c = x[0] end
      o[1] = c
      local scale = 3
      o[2] = x[1] * scale
      local m = 250
      n[0] = weft.uint8(m) + 10
    end }
    local o, n = weft.zeros(3, f64), weft.zeros(1, weft.uint8)
    weft.launch(k, 1, { A({ 0.1, 0.2, 0.3 }, f64), o, n })
    assert.are.same({ 0.1 + 0.2 + 0.3, 0.1, 0.2 * 3 }, o:totable())
    assert.are.same({ 4 }, n:totable())
  end)

  it("multiple assignment evaluates all values before assigning (swap)", function()
    local k = weft.kernel{ o = A(i32), function(o)
      local a, b, c = 1, 2, 3
      a, b, c = b, c, a
      o[0], o[1], o[2] = a, b, c
      local v = weft.vec3i(1, 2, 3)
      v.x, v.y = v.y, v.x
      o[3], o[4] = v.x, v.y
    end }
    local o = weft.zeros(5, i32)
    weft.launch(k, 1, { o })
    assert.are.same({ 2, 3, 1, 2, 1 }, o:totable())
  end)

  it("do blocks scope their locals", function()
    local k = weft.kernel{ o = A(i32), function(o)
      local a = 1
      do
        local a = 10
        o[1] = a
      end
      o[0] = a
    end }
    local o = weft.zeros(2, i32)
    weft.launch(k, 1, { o })
    assert.are.same({ 1, 10 }, o:totable())
  end)
end)

describe("weft.func", function()
  it("typed funcs convert literal arguments; generic funcs specialize per call types", function()
    local scale = weft.func{ x = f64, s = f64, function(x, s) return x * s end }
    local twice = weft.func(function(x) return x + x end)
    local k = weft.kernel{ d = A(f64), f = A(f32), v = A(weft.vec3), n = A(i32), function(d, f, v, n)
      d[0] = scale(d[0], 2)
      f[0] = twice(f[0])
      v[0] = twice(v[0])
      n[0] = twice(n[0])
      d[1] = twice(d[1])
    end }
    local d, f, v, n = A({ 1.5, 0.25 }, f64), A({ 3 }, f32), A({ { 1, 2, 3 } }, weft.vec3), A({ 21 }, i32)
    weft.launch(k, 1, { d, f, v, n })
    assert.are.same({ 3, 0.5 }, d:totable())
    assert.are.same({ 6 }, f:totable())
    assert.are.same({ { 2, 4, 6 } }, v:totable())
    assert.are.same({ 42 }, n:totable())
  end)

  it("overloads are chosen by argument types", function()
    local describe_ = weft.func{ x = i32, function(x) return 1 end }
    describe_:overload{ x = f32, function(x) return 2 end }
    describe_:overload{ x = weft.vec3, function(x) return 3 end }
    describe_:overload{ x = f32, y = f32, function(x, y) return 4 end }
    local k = weft.kernel{ o = A(i32), function(o)
      o[0] = describe_(weft.int32(1))
      o[1] = describe_(weft.float32(1))
      o[2] = describe_(weft.vec3(1, 2, 3))
      o[3] = describe_(1.0, 2.0)
      o[4] = describe_(7)
    end }
    local o = weft.zeros(5, i32)
    weft.launch(k, 1, { o })
    assert.are.same({ 1, 2, 3, 4, 1 }, o:totable())
  end)

  it("funcs call funcs, return several values, take arrays and return early", function()
    local sq = weft.func(function(x) return x * x end)
    local norm2 = weft.func(function(a, b) return sq(a) + sq(b) end)
    local minmax = weft.func(function(arr)
      local lo, hi = arr[0], arr[0]
      for j = 1, #arr - 1 do
        lo = weft.min(lo, arr[j])
        hi = weft.max(hi, arr[j])
      end
      return lo, hi
    end)
    local find = weft.func(function(arr, v)
      for j = 0, #arr - 1 do
        if arr[j] == v then return j end
      end
      return -1
    end)
    local k = weft.kernel{ a = A(f32), o = A(f32), p = A(i32), function(a, o, p)
      local lo, hi = minmax(a)
      o[0], o[1] = lo, hi
      o[2] = norm2(3.0, 4.0)
      p[0] = find(a, 5.0)
      p[1] = find(a, 99.0)
    end }
    local o, p = weft.zeros(3), weft.zeros(2, i32)
    weft.launch(k, 1, { A({ 4, -2, 5, 9, 0 }, f32), o, p })
    assert.are.same({ -2, 9, 25 }, o:totable())
    assert.are.same({ 2, -1 }, p:totable())
  end)

  it("funcs run on the host as plain Lua", function()
    local f = weft.func(function(x, y) return x * y + 1 end)
    assert.are.equal(7, f(2, 3))
  end)
end)

describe("constants and upvalues", function()
  it("upvalue numbers and booleans, weft.constant numbers and vectors", function()
    local N, FLAG = 7, true
    local HALF = weft.constant(0.5)
    local BIG = weft.constant(3000000000)
    local UP = weft.constant(weft.vec3(0, 0, 1))
    local M = weft.constant(weft.mat22d(1, 2, 3, 4))
    local Q = weft.constant(weft.quat(0, 0, 0, 1))
    local k = weft.kernel{ o = A(f32), l = A(weft.int64), v = A(weft.vec3), d = A(weft.vec2d), function(o, l, v, d)
      o[0] = N * HALF
      o[1] = FLAG and 1.0 or 0.0
      l[0] = BIG + 1
      v[0] = UP * 2.0 + weft.quat_rotate(Q, UP)
      d[0] = M * weft.vec2d(1, 1)
    end }
    local o, l, v, d = weft.zeros(2), weft.zeros(1, weft.int64), weft.zeros(1, weft.vec3), weft.zeros(1, weft.vec2d)
    weft.launch(k, 1, { o, l, v, d })
    assert.are.same({ 3.5, 1 }, o:totable())
    assert.are.equal(3000000001, tonumber(l[0]))
    assert.are.same({ { 0, 0, 3 } }, v:totable())
    assert.are.same({ { 3, 7 } }, d:totable())
  end)

  it("weft.constant holding structs, transforms and int64 cdata", function()
    local P = weft.struct{ { "pos", weft.vec3 }, { "mass", f32 }, { "on", weft.bool } }
    local P0 = weft.constant(P{ pos = weft.vec3(1, 2, 3), mass = 4, on = true })
    local T0 = weft.constant(weft.transform(weft.vec3(1, 0, 0), weft.quat(0, 0, 0, 1)))
    local L0 = weft.constant(ffi.new("int64_t", 5000000000))
    local k = weft.kernel{ o = A(f32), l = A(weft.int64), function(o, l)
      o[0] = P0.pos.y + P0.mass + (P0.on and 100.0 or 0.0)
      o[1] = weft.transform_point(T0, weft.vec3(0, 1, 0)).x
      l[0] = L0 * 2
    end }
    local o, l = weft.zeros(2), weft.zeros(1, weft.int64)
    weft.launch(k, 1, { o, l })
    assert.are.same({ 106, 1 }, o:totable())
    assert.are.equal(10000000000, tonumber(l[0]))
    assert.has_error(function() weft.constant("x") end,
                     "weft.constant: expected a number, a boolean or a value of a weft type, got string")
  end)

  it("upvalues are read when the kernel is compiled", function()
    local S = 2
    local k = weft.kernel{ o = A(i32), function(o) o[0] = S end }
    S = 5
    local o = weft.zeros(1, i32)
    weft.launch(k, 1, { o })
    assert.are.same({ 5 }, o:totable())
  end)
end)

describe("generic kernels", function()
  -- native code builds of a kernel (compiled now, or loaded from the disk cache)
  local function builds(k)
    local st = weft.stats(k)
    return st.compiles + st.disk_hits
  end

  it("specialize per argument types and compile each signature once", function()
    local k = weft.kernel{ function(x, y, s)
      local i = weft.tid()
      y[i] = x[i] * s
    end }
    local function run(t, st)
      local x, y = A({ 1, 2, 3 }, t), weft.zeros(3, t)
      weft.launch(k, 3, { x, y, st == nil and 2 or st })
      return y:totable()
    end
    assert.are.same({ 2, 4, 6 }, run(f32))
    assert.are.equal(1, builds(k))
    assert.are.same({ 2, 4, 6 }, run(f32))
    assert.are.equal(1, builds(k))
    -- float64 arrays: the number is a float64 beside them, as a literal
    -- would be (lua/weft/launch.lua), and that is a second signature
    assert.are.same({ 2, 4, 6 }, run(f64))
    assert.are.same({ 0.1, 0.2, 0.1 * 3 }, run(f64, 0.1)) -- no float32 rounding
    assert.are.equal(2, builds(k))
    -- float32 and float64 arrays together: the number stays float32, and
    -- x[i] * s mixes types and fails to compile
    local ok, err = pcall(weft.launch, k, 3, { A({ 1, 2, 3 }, f64), weft.zeros(3, f32), 2 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cannot multiply float64 and float32", 1, true))
    -- a typed scale through a kernel that declares it
    local k2 = weft.kernel{ s = f64, function(x, y, s)
      local i = weft.tid()
      y[i] = x[i] * s
    end }
    for _ = 1, 3 do
      for _, t in ipairs { f64, f64 } do
        local x, y = A({ 1, 2, 3 }, t), weft.zeros(3, t)
        weft.launch(k2, 3, { x, y, 0.5 })
        assert.are.same({ 0.5, 1, 1.5 }, y:totable())
      end
    end
    assert.are.equal(1, builds(k2))
    local x, y = A({ { 1, 2, 3 } }, weft.vec3d), weft.zeros(1, weft.vec3d)
    weft.launch(k2, 1, { x, y, 2 })
    assert.are.same({ { 2, 4, 6 } }, y:totable())
    assert.are.equal(2, builds(k2))
    -- the IR module is cached per signature too
    assert.are.equal(k2:_module({ A(weft.vec3d), A(weft.vec3d), f64 }),
                     k2:_module({ A(weft.vec3d), A(weft.vec3d), f64 }))
  end)
end)
