-- Builtins in kernels, checked by launching and comparing with plain Lua
-- references: math in float32 and float64 (and the integer ones on ints),
-- atomics under contention, random numbers and print.
local weft = require "weft"
local ffi = require "ffi"

local A = weft.array

local function close(a, b, tol)
  tol = tol or 1e-6
  if a ~= a and b ~= b then return true end
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

local function round(x) return x >= 0 and math.floor(x + 0.5) or math.ceil(x - 0.5) end
local function sign(x) return x < 0 and -1 or 1 end -- Warp: sign(0) = 1
local function clamp(x, lo, hi) return math.min(math.max(x, lo), hi) end

-- The same Lua code serves as the kernel body's reference: each entry is
-- name, reference function of x (x in (0, 1) and scaled variants).
local UNARY = {
  { "sqrt", function(x) return math.sqrt(x) end },
  { "sin", function(x) return math.sin(x) end },
  { "cos", function(x) return math.cos(x) end },
  { "tan", function(x) return math.tan(x) end },
  { "asin", function(x) return math.asin(x) end },
  { "acos", function(x) return math.acos(x) end },
  { "atan", function(x) return math.atan(x) end },
  { "exp", function(x) return math.exp(x) end },
  { "log", function(x) return math.log(x) end },
  { "tanh", function(x) return math.tanh(x) end },
  { "sinh", function(x) return math.sinh(x) end },
  { "cosh", function(x) return math.cosh(x) end },
}

describe("kernel math builtins", function()
  local unary = weft.kernel{ function(x, o)
    local i = weft.tid()
    local v = x[i]
    local b = i * 30
    o[b + 0] = weft.sqrt(v)
    o[b + 1] = weft.sin(v)
    o[b + 2] = weft.cos(v)
    o[b + 3] = weft.tan(v)
    o[b + 4] = weft.asin(v)
    o[b + 5] = weft.acos(v)
    o[b + 6] = weft.atan(v)
    o[b + 7] = weft.exp(v)
    o[b + 8] = weft.log(v)
    o[b + 9] = weft.tanh(v)
    o[b + 10] = weft.sinh(v)
    o[b + 11] = weft.cosh(v)
    local w = (v - 0.5) * 7
    o[b + 12] = weft.floor(w)
    o[b + 13] = weft.ceil(w)
    o[b + 14] = weft.round(w)
    o[b + 15] = weft.abs(w)
    o[b + 16] = weft.sign(w)
    o[b + 17] = weft.min(w, 0.5)
    o[b + 18] = weft.max(w, 0.5)
    o[b + 19] = weft.clamp(w, -1.0, 1.5)
    o[b + 20] = weft.atan2(w, v)
    o[b + 21] = weft.pow(v, 2.5)
    o[b + 22] = weft.floordiv(w, 0.75)
    o[b + 23] = weft.select(w > 0, w, v)
    o[b + 24] = weft.where(w > 0, w, v)
    o[b + 25] = weft.min(w, v, 0.25)
    o[b + 26] = weft.max(w, v, 0.25)
    o[b + 27] = math.pow(v, 3) + math.abs(-v)
    o[b + 28] = math.min(v, 0.3) + math.max(v, 0.6)
    o[b + 29] = weft.round(-2.5 + v * 0) + weft.round(2.5 + v * 0)
  end }

  local xs = { 0.05, 0.25, 0.5, 0.7, 0.95, 0.6428571428571429, 0.5 + 2.5 / 7 }

  local function reference(v)
    local r = {}
    for _, u in ipairs(UNARY) do r[#r + 1] = u[2](v) end
    local w = (v - 0.5) * 7
    for _, x in ipairs {
      math.floor(w), math.ceil(w), round(w), math.abs(w), sign(w), math.min(w, 0.5), math.max(w, 0.5),
      clamp(w, -1, 1.5), math.atan2(w, v), v ^ 2.5, math.floor(w / 0.75), w > 0 and v or w,
      w > 0 and w or v, math.min(w, v, 0.25), math.max(w, v, 0.25), v ^ 3 + v,
      math.min(v, 0.3) + math.max(v, 0.6), -3 + 3,
    } do r[#r + 1] = x end
    return r, w
  end

  for _, spec in ipairs { { weft.float32, 2e-6 }, { weft.float64, 1e-14 } } do
    local t, tol = spec[1], spec[2]
    it("every math builtin in " .. t.name, function()
      local x = A(xs, t)
      local o = weft.zeros(#xs * 30, t)
      weft.launch(unary, #xs, { x, o })
      local got = o:totable()
      local xv = x:totable() -- the inputs as stored (float32 rounding)
      local want = {}
      for k = 1, #xs do
        local r = reference(xv[k])
        for _, w in ipairs(r) do want[#want + 1] = w end
      end
      check_list(got, want, tol, t.name)
    end)
  end

  it("integer min max abs clamp sign floordiv floor ceil round (int32, int64)", function()
    local k = weft.kernel{ function(x, o)
      local i = weft.tid()
      local v = x[i]
      local b = i * 9
      o[b + 0] = weft.min(v, 3)
      o[b + 1] = weft.max(v, -3)
      o[b + 2] = weft.abs(v)
      o[b + 3] = weft.clamp(v, -4, 4)
      o[b + 4] = weft.sign(v)
      o[b + 5] = weft.floordiv(v, 3)
      o[b + 6] = weft.floor(v) + weft.ceil(v) + weft.round(v)
      o[b + 7] = weft.floordiv(v, -2)
      o[b + 8] = weft.min(v, 2, 0 - v)
    end }
    local xs2 = { -7, -3, -1, 0, 1, 2, 6, 100 }
    for _, t in ipairs { weft.int32, weft.int64, weft.int16 } do
      local o = weft.zeros(#xs2 * 9, t)
      weft.launch(k, #xs2, { A(xs2, t), o })
      local want = {}
      for _, v in ipairs(xs2) do
        for _, w in ipairs { math.min(v, 3), math.max(v, -3), math.abs(v), clamp(v, -4, 4), sign(v),
                             math.floor(v / 3), 3 * v, math.floor(v / -2), math.min(v, 2, -v) } do
          want[#want + 1] = w
        end
      end
      check_list(o:totable(), want, nil, t.name)
    end
  end)

  it("math builtins act componentwise on vectors", function()
    local k = weft.kernel{ o = A(weft.vec3d), function(o)
      local v = weft.vec3d(-1.5, 0.25, 4)
      o[0] = weft.abs(v)
      o[1] = weft.floor(v)
      o[2] = weft.sqrt(weft.abs(v))
      o[3] = weft.min(v, weft.vec3d(0, 0, 0))
      o[4] = weft.max(v, weft.vec3d(0, 0, 0))
      o[5] = weft.clamp(v, weft.vec3d(-1, -1, -1), weft.vec3d(1, 1, 1))
      o[6] = weft.sign(v)
    end }
    local o = weft.zeros(7, weft.vec3d)
    weft.launch(k, 1, { o })
    assert.are.same({
      { 1.5, 0.25, 4 }, { -2, 0, 4 }, { math.sqrt(1.5), 0.5, 2 }, { -1.5, 0, 0 }, { 0, 0.25, 4 },
      { -1, 0.25, 1 }, { -1, 1, 1 },
    }, o:totable())
  end)

  it("math.pi, math.huge and constants fold into kernels", function()
    local k = weft.kernel{ o = A(weft.float64), function(o)
      o[0] = math.pi
      o[1] = weft.float64(math.huge > 1e300 and 1 or 0)
      o[2] = -math.huge
    end }
    local o = weft.zeros(3, weft.float64)
    weft.launch(k, 1, { o })
    assert.are.same({ math.pi, 1, -math.huge }, o:totable())
  end)

  it("bit operations on int32 and uint32 (bit.*)", function()
    local k = weft.kernel{ function(x, o)
      local i = weft.tid()
      local v = x[i]
      o[i * 6 + 0] = bit.band(v, 0xff)
      o[i * 6 + 1] = bit.bor(v, 1, 2)
      o[i * 6 + 2] = bit.bxor(v, 0x0f0f)
      o[i * 6 + 3] = bit.bnot(v)
      o[i * 6 + 4] = bit.lshift(v, 3)
      o[i * 6 + 5] = bit.arshift(v, 2)
    end }
    local xs2 = { 0, 1, 0x1234, -8, 2147483647 }
    local o = weft.zeros(#xs2 * 6, weft.int32)
    weft.launch(k, #xs2, { A(xs2, weft.int32), o })
    local want = {}
    for _, v in ipairs(xs2) do
      for _, w in ipairs { bit.band(v, 0xff), bit.bor(v, 1, 2), bit.bxor(v, 0x0f0f), bit.bnot(v),
                           bit.lshift(v, 3), bit.arshift(v, 2) } do want[#want + 1] = w end
    end
    check_list(o:totable(), want, nil, "bits")
  end)

  it("bit.rshift is a logical shift on int32 (as in LuaJIT)", function()
    local k = weft.kernel{ x = A(weft.int32), o = A(weft.int32), function(x, o)
      o[0] = bit.rshift(x[0], 28)
      o[1] = bit.arshift(x[0], 28)
    end }
    local o = weft.zeros(2, weft.int32)
    weft.launch(k, 1, { A({ -16 }, weft.int32), o })
    assert.are.same({ bit.rshift(-16, 28), bit.arshift(-16, 28) }, o:totable())
  end)
end)

describe("kernel atomics", function()
  local N = 20000

  for _, t in ipairs { weft.int32, weft.uint32, weft.int64, weft.uint64, weft.float32, weft.float64 } do
    it("atomic_add/min/max on " .. t.name .. " are exact under contention", function()
      local T = t
      local k = weft.kernel{ function(acc, mn, mx, olds)
        local i = weft.tid()
        local v = T((i * 7919) % 1000 + 1)
        olds[i] = weft.atomic_add(acc, i % 4, v)
        weft.atomic_min(mn, 0, v + 5)
        weft.atomic_max(mx, 0, v + 5)
      end }
      local acc = weft.zeros(4, t)
      local mn, mx = weft.full(1, 1e6, t), weft.zeros(1, t)
      local olds = weft.zeros(N, t)
      weft.launch(k, N, { acc, mn, mx, olds })
      local want, lo, hi = { 0, 0, 0, 0 }, math.huge, -math.huge
      for i = 0, N - 1 do
        local v = (i * 7919) % 1000 + 1
        want[i % 4 + 1] = want[i % 4 + 1] + v
        lo, hi = math.min(lo, v + 5), math.max(hi, v + 5)
      end
      check_list(acc:totable(), want, nil, t.name .. " sums")
      assert.are.equal(lo, tonumber(mn[0]))
      assert.are.equal(hi, tonumber(mx[0]))
      -- the old values: every one below the final sum of its slot, all distinct per slot
      local seen = {}
      for i = 0, N - 1 do
        local o = tonumber(olds[i])
        local key = (i % 4) .. ":" .. o
        assert.is_nil(seen[key], "two threads saw the same old value")
        seen[key] = true
        assert.is_true(o < want[i % 4 + 1])
      end
    end)
  end

  it("atomics on small integer types and float16 wrap or round like their type", function()
    for _, spec in ipairs { { weft.int8, -24 }, { weft.uint8, 232 }, { weft.int16, 1000 }, { weft.uint16, 1000 },
                            { weft.float16, 1000 } } do
      local t, sum = spec[1], spec[2]
      local T = t
      local k = weft.kernel{ function(s)
        local i = weft.tid()
        weft.atomic_add(s, 0, T(1))
        weft.atomic_max(s, 1, T(i % 100))
        weft.atomic_min(s, 2, T(i % 100 + 1))
      end }
      local s = weft.full(3, 50, t)
      s[0] = 0
      weft.launch(k, 1000, { s })
      assert.are.same({ sum, 99, 1 }, s:totable(), t.name)
    end
  end)

  it("atomic_add on arrays of matrices", function()
    local k = weft.kernel{ m = A(weft.mat22d), function(m)
      weft.atomic_add(m, 0, weft.mat22d(1, 2, 3, 4))
    end }
    local m = weft.zeros(1, weft.mat22d)
    weft.launch(k, 100, { m })
    assert.are.same({ { { 100, 200 }, { 300, 400 } } }, m:totable())
  end)

  it("atomics on 2-d arrays take two indexes", function()
    local k = weft.kernel{ h = A(weft.int32, 2), function(h)
      local i = weft.tid()
      weft.atomic_add(h, i % 3, i % 2, 1)
    end }
    local h = weft.zeros({ 3, 2 }, weft.int32)
    weft.launch(k, 600, { h })
    assert.are.same({ { 100, 100 }, { 100, 100 }, { 100, 100 } }, h:totable())
  end)

  it("atomics on arrays of vectors act componentwise (like Warp)", function()
    local k = weft.kernel{ s = A(weft.vec3), m = A(weft.vec2d), function(s, m)
      local i = weft.tid()
      weft.atomic_add(s, 0, weft.vec3(1, 2, weft.float32(i)))
      weft.atomic_max(m, 0, weft.vec2d(weft.float64(i), -weft.float64(i)))
      weft.atomic_min(m, 1, weft.vec2d(weft.float64(i), -weft.float64(i)))
    end }
    local s, m = weft.zeros(1, weft.vec3), weft.zeros(2, weft.vec2d)
    weft.launch(k, 1000, { s, m })
    assert.are.same({ { 1000, 2000, 499500 } }, s:totable())
    assert.are.same({ { 999, 0 }, { 0, -999 } }, m:totable())
  end)
end)

describe("kernel random numbers", function()
  local k = weft.kernel{ o = A(weft.float32), r = A(weft.int32), seed = weft.int32, function(o, r, seed)
    local i = weft.tid()
    local st = weft.rand_init(seed, i)
    o[i * 3] = weft.randf(st)
    o[i * 3 + 1] = weft.randf(st, -2.0, 3.0)
    o[i * 3 + 2] = weft.randf(st)
    r[i] = weft.randi(st)
  end }

  it("randf is in range, deterministic per seed, distinct per thread and per draw", function()
    local n = 256
    local o1, o2, o3 = weft.zeros(n * 3), weft.zeros(n * 3), weft.zeros(n * 3)
    local r1 = weft.zeros(n, weft.int32)
    weft.launch(k, n, { o1, r1, 42 })
    weft.launch(k, n, { o2, weft.zeros(n, weft.int32), 42 })
    weft.launch(k, n, { o3, weft.zeros(n, weft.int32), 43 })
    local a, b, c = o1:totable(), o2:totable(), o3:totable()
    assert.are.same(a, b)
    local same, distinct, sum = 0, {}, 0
    for i = 1, n * 3 do
      if a[i] == c[i] then same = same + 1 end
    end
    assert.is_true(same < 5, "another seed gives other numbers")
    for i = 0, n - 1 do
      local u, v, w = a[i * 3 + 1], a[i * 3 + 2], a[i * 3 + 3]
      assert.is_true(u >= 0 and u < 1)
      assert.is_true(w >= 0 and w < 1)
      assert.is_true(v >= -2 and v < 3)
      assert.are_not.equal(u, w)
      distinct[u] = true
      sum = sum + u
    end
    local nd = 0
    for _ in pairs(distinct) do nd = nd + 1 end
    assert.is_true(nd > n - 3, "threads draw distinct numbers")
    assert.is_true(math.abs(sum / n - 0.5) < 0.1, "mean near 1/2")
  end)

  it("randf with float64 bounds gives float64 values in range", function()
    local k2 = weft.kernel{ o = A(weft.float64), function(o)
      local i = weft.tid()
      local st = weft.rand_init(3, i)
      o[i] = weft.randf(st, weft.float64(10), 20.0)
    end }
    local o = weft.zeros(64, weft.float64)
    weft.launch(k2, 64, { o })
    for _, v in ipairs(o:totable()) do assert.is_true(v >= 10 and v < 20) end
  end)

  it("randi gives varied int32 values", function()
    local n = 128
    local r = weft.zeros(n, weft.int32)
    weft.launch(k, n, { weft.zeros(n * 3), r, 7 })
    local t, seen, neg = r:totable(), {}, 0
    for i = 1, n do
      seen[t[i]] = true
      if t[i] < 0 then neg = neg + 1 end
    end
    local nd = 0
    for _ in pairs(seen) do nd = nd + 1 end
    assert.is_true(nd > n - 3)
    assert.is_true(neg > 10 and neg < n - 10, "randi covers the whole int32 range")
  end)
end)

describe("kernel print", function()
  local run_child = dofile("spec/helpers/run_child.lua")

  it("prints scalars, vectors, strings and printf formats from a kernel", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), n = weft.int32, function(x, n)
        local i = weft.tid()
        print("value", x[i], n + i, i == 0)
        print("%d: %.3f|%5d|%x", i, x[i], n, 255)
        print(weft.vec3(1, 2.5, 3), weft.int64(-5), weft.uint8(200), weft.float64(0.1))
      end }
      weft.launch(k, 1, { weft.array({ 1.5 }, weft.float32), 7 })
      io.stdout:flush()
    ]])
    assert.are.equal(
      "value\t1.5\t7\ttrue\n" ..
      "0: 1.500|    7|ff\n" ..
      "[1, 2.5, 3]\t-5\t200\t0.1\n", out)
  end)
end)
