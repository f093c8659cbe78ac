-- Forward mode (weft.jvp): tangents of the outputs for given input
-- tangents, checked against J v with J from reverse mode (weft.jacobian)
-- and against central differences (weft.jacobian_fd), in float64.
local weft = require "weft"

local f64, i32 = weft.float64, weft.int32
local A = weft.array

local function arr(t) return weft.array(t, f64) end

local flat = require "helpers.flat"

local function float_array(a)
  if not weft.is_array(a) then return false end
  local kd = a.dtype.kind
  return kd ~= "int" and kd ~= "bool" and kd ~= "struct"
end

-- A deterministic direction for array a (same shape and type).
local function direction(a, seed)
  local s = seed
  local function r()
    s = (s * 1103515245 + 12345) % 2147483648
    return 2 * s / 2147483648 - 1
  end
  local function fill(t)
    if type(t) == "number" then return r() end
    local o = {}
    for i, v in ipairs(t) do o[i] = fill(v) end
    return o
  end
  return weft.array(fill(a:totable()), a.dtype)
end

-- Runs jvp with a random direction on every float array input and checks
-- every float array output's tangent against sum_w J_w v_w (reverse mode)
-- and against central differences. Returns the output tangents.
local function check_jvp(k, dim, ins, outs, tol)
  tol = tol or 1e-6
  local saved = {}
  for _, o in ipairs(outs) do saved[o] = weft.clone(o) end
  local tans, otans = {}, {}
  for i, a in ipairs(ins) do tans[i] = float_array(a) and direction(a, 17 + i) or false end
  for j, o in ipairs(outs) do otans[j] = float_array(o) and weft.zeros_like(o) or false end
  weft.jvp(k, dim, ins, tans, outs, otans)
  for j, o in ipairs(outs) do
    if otans[j] then
      local got = flat(otans[j]:totable())
      local want, fd = {}, {}
      for r = 1, #got do want[r], fd[r] = 0, 0 end
      for i, a in ipairs(ins) do
        if tans[i] then
          for o2, c in pairs(saved) do weft.copy(o2, c) end
          local J = weft.jacobian(k, dim, ins, outs, i, j):totable()
          local F = weft.jacobian_fd(k, dim, ins, outs, i, j):totable()
          local v = flat(tans[i]:totable())
          for r = 1, #got do
            for c = 1, #v do
              want[r] = want[r] + J[r][c] * v[c]
              fd[r] = fd[r] + F[r][c] * v[c]
            end
          end
        end
      end
      for r = 1, #got do
        local scale = math.max(1, math.abs(want[r]))
        assert(math.abs(got[r] - want[r]) <= tol * scale,
               string.format("output %d [%d]: jvp %.12g, J v %.12g", j, r - 1, got[r], want[r]))
        assert(math.abs(got[r] - fd[r]) <= 1e-4 * scale,
               string.format("output %d [%d]: jvp %.12g, differences %.12g", j, r - 1, got[r], fd[r]))
      end
    end
  end
  return otans
end

local function kernel_of(expr)
  local src = "local weft = ...\n" ..
    "return weft.kernel{ x = weft.array(weft.float64), z = weft.array(weft.float64),\n" ..
    "  y = weft.array(weft.float64), function(x, z, y)\n" ..
    "  local i = weft.tid()\n" ..
    "  local a, b = x[i], z[i]\n" ..
    "  y[i] = " .. expr .. "\n" ..
    "end }\n"
  return assert(load(src))(weft)
end

local function inputs(n, lo, hi)
  local xs, zs = {}, {}
  local s = 11
  local function r()
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + (hi - lo) * s / 2147483648
  end
  for i = 1, n do xs[i], zs[i] = r(), r() end
  return arr(xs), arr(zs)
end

describe("forward mode: operators and builtins", function()
  local cases = {
    { "a + b", -2, 2 }, { "a - b", -2, 2 }, { "a * b", -2, 2 }, { "a / b", 0.5, 2 },
    { "-a * b", -2, 2 }, { "a % b", 0.3, 3 }, { "a ^ b", 0.5, 2 }, { "a ^ 3.0", -2, 2 },
    { "weft.sqrt(a) * b", 0.2, 2 }, { "weft.exp(a) + b", -1, 1 }, { "weft.log(a) * b", 0.2, 2 },
    { "weft.sin(a * b)", -2, 2 }, { "weft.cos(a) * b", -2, 2 }, { "weft.tan(a) + b", -1, 1 },
    { "weft.asin(a) * b", -0.9, 0.9 }, { "weft.acos(a) * b", -0.9, 0.9 },
    { "weft.atan(a) * b", -2, 2 }, { "weft.atan2(a, b)", 0.2, 2 },
    { "weft.sinh(a) * b", -1, 1 }, { "weft.cosh(a) * b", -1, 1 }, { "weft.tanh(a) * b", -1, 1 },
    { "weft.min(a, b) * 2", -2, 2 }, { "weft.max(a, b) * 2", -2, 2 },
    { "weft.abs(a) * b", 0.1, 1 }, { "weft.abs(a - 3) * b", 0, 1 },
    { "weft.floor(a * 3) * b", 0, 2 }, { "weft.select(a > b, a * a, b * 3)", -1, 1 },
    { "weft.float64(weft.int32(a * 10)) * b", 0, 3 },
    { "weft.length(weft.vec3d(a, b, a * b))", 0.2, 1.5 },
    { "weft.cross(weft.vec3d(a, b, 1.0), weft.vec3d(b, 2.0, a)).y", 0.2, 1.5 },
    { "weft.inverse(weft.mat33d(a + 3, b, 1.0, 0.5, a * b + 3, 0.5, b, 1.0, a + 3))[1][2]", 0.2, 1.5 },
    { "weft.quat_rotate(weft.quat_from_axis_angle(weft.normalize(weft.vec3d(a, b, 1.0)), b), " ..
      "weft.vec3d(1.0, a, 0.0)).y", 0.2, 1.5 },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local x, z = inputs(5, c[2], c[3])
      check_jvp(kernel_of(c[1]), 5, { x, z }, { weft.zeros(5, f64) })
    end)
  end
end)

describe("forward mode: control flow", function()
  it("x^n by repeated multiplication: tangent n x^(n-1) v", function()
    local k = weft.kernel{ x = A(f64), n = i32, y = A(f64), function(x, n, y)
      local i = weft.tid()
      local p = weft.float64(1.0)
      for _ = 1, n do p = p * x[i] end
      y[i] = p
    end }
    local x = arr { 0.5, 1.1, -1.3, 2.0 }
    for _, n in ipairs { 0, 1, 5 } do
      local y, ty = weft.zeros(4, f64), weft.zeros(4, f64)
      weft.jvp(k, 4, { x, n }, { arr { 1, 1, 1, 1 } }, { y }, { ty })
      local xs, ts, ys = x:totable(), ty:totable(), y:totable()
      for i = 1, 4 do
        assert.is_true(math.abs(ys[i] - xs[i] ^ n) < 1e-12)
        local want = n == 0 and 0 or n * xs[i] ^ (n - 1)
        assert(math.abs(ts[i] - want) < 1e-12 * math.max(1, math.abs(want)),
               string.format("n=%d: got %g, want %g", n, ts[i], want))
      end
    end
  end)

  it("a while loop with a data-dependent trip count", function()
    local k = weft.kernel{ x = A(f64), c = A(f64), y = A(f64), function(x, c, y)
      local i = weft.tid()
      local v, n = x[i], 0
      while v > 0.3 do
        v = v * 0.7 + 0.01 * c[i]
        n = n + 1
      end
      y[i] = v * v + weft.float64(n)
    end }
    check_jvp(k, 5, { arr { 0.2, 0.5, 1.0, 3.0, 10.0 }, arr { 1, 2, 3, 4, 5 } }, { weft.zeros(5, f64) })
  end)

  it("repeat ... until, break, float loop variables and nested loops", function()
    local k = weft.kernel{ x = A(f64), w = A(f64), y = A(f64), function(x, w, y)
      local i = weft.tid()
      local v = x[i]
      local acc = weft.float64(0)
      repeat
        acc = acc + v * v
        v = v * 0.5
      until v < 0.1
      for t = 0.0, 1.0, 0.25 do
        for b = 0, 3 do acc = acc * 0.9 + weft.sin(acc * weft.float64(t)) * w[b] end
        if acc > 50.0 then break end
      end
      y[i] = acc
    end }
    check_jvp(k, 4, { arr { 0.15, 0.45, 1.7, 3.3 }, arr { 0.3, -0.2, 0.5, 0.1 } }, { weft.zeros(4, f64) })
  end)

  it("branches with stores in them, and two outputs", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local a = x[i]
      local r
      if a > 1.0 then
        r = a * a
        z[i] = weft.sin(a)
      elseif a > 0.0 then
        r = weft.exp(a)
        z[i] = 0.0
      else
        r = -a * 3.0
        z[i] = a * a * a
      end
      y[i] = r * a
    end }
    check_jvp(k, 6, { arr { -1.5, -0.2, 0.3, 0.8, 1.2, 2.5 } }, { weft.zeros(6, f64), weft.zeros(6, f64) })
  end)

  it("weft.func calls, 2-D arrays and atomic_add", function()
    local f = weft.func(function(v, c) return v * v * c + weft.sin(v) end)
    local k = weft.kernel{ m = A(f64, 2), c = A(f64), s = A(f64), function(m, c, s)
      local i, j = weft.tid()
      weft.atomic_add(s, i, f(m[i][j], c[j]))
    end }
    local m = weft.array({ { 0.1, 0.2, 0.3 }, { -1, 0.5, 2 } }, f64)
    check_jvp(k, { 2, 3 }, { m, arr { 1, 2, 3 } }, { weft.zeros(2, f64) })
  end)
end)

describe("forward mode: aggregates and the API", function()
  it("arrays of vectors and matrices", function()
    local k = weft.kernel{ p = A(weft.vec3d), m = A(weft.mat22d), o = A(weft.vec2d),
                           function(p, m, o)
      local i = weft.tid()
      local a = m[i]
      local q = p[i]
      o[i] = weft.inverse(a) * weft.vec2d(q.x, q.y * q.z) + a * weft.vec2d(a[0][0], 1.0)
    end }
    local p = weft.array({ { 1, 2, 3 }, { -1, 0.5, 2 } }, weft.vec3d)
    local m = weft.array({ { { 2, 1 }, { 0.5, 3 } }, { { 1, -1 }, { 1, 1 } } }, weft.mat22d)
    check_jvp(k, 2, { p, m }, { weft.zeros(2, weft.vec2d) })
  end)

  it("structs: tangents of float fields", function()
    local P = weft.struct{ { "pos", weft.vec3d }, { "mass", f64 }, { "id", i32 } }
    local k = weft.kernel{ ps = A(P), s = A(f64), y = A(f64), function(ps, s, y)
      local i = weft.tid()
      local p = ps[i]
      p.mass = p.mass * s[i]
      y[i] = p.mass * weft.length_sq(p.pos) + weft.float64(p.id)
    end }
    local ps = weft.zeros(1, P)
    ps[0] = P{ pos = weft.vec3d(1, 2, 3), mass = 2.0, id = 4 }
    local tp = weft.zeros(1, P)
    tp[0] = P{ pos = weft.vec3d(0, 1, 0), mass = 1.0, id = 0 }
    local y, ty = weft.zeros(1, f64), weft.zeros(1, f64)
    weft.jvp(k, 1, { ps, arr { 1.5 } }, { tp, arr { 2 } }, { y }, { ty })
    -- y = m s |p|^2: dy = dm s |p|^2 + m ds |p|^2 + m s 2 p.dp
    local want = 1 * 1.5 * 14 + 2 * 2 * 14 + 2 * 1.5 * 2 * 2
    assert.is_true(math.abs(ty:totable()[1] - want) < 1e-9)
    assert.is_true(math.abs(y:totable()[1] - (2 * 1.5 * 14 + 4)) < 1e-9)
  end)

  it("missing tangents count as zero; outputs are written as by weft.launch", function()
    local k = kernel_of("a * b + weft.sin(a)")
    local x, z = arr { 0.5, 1.5 }, arr { 2, 3 }
    local y, ty = weft.zeros(2, f64), weft.zeros(2, f64)
    weft.jvp(k, 2, { x, z }, { false, arr { 1, 1 } }, { y }, { ty })
    assert.are.same({ 0.5, 1.5 }, ty:totable())
    local ys = y:totable()
    assert.is_true(math.abs(ys[1] - (1 + math.sin(0.5))) < 1e-12)
    -- no output tangent wanted: only the outputs
    local y2 = weft.zeros(2, f64)
    weft.jvp(k, 2, { x, z }, { arr { 1, 1 } }, { y2 })
    assert.are.same(ys, y2:totable())
  end)

  it("scalar float parameters have zero tangent; errors name the kernel", function()
    local k = weft.kernel{ x = A(f64), s = f64, y = A(f64), function(x, s, y)
      local i = weft.tid()
      y[i] = x[i] * s
    end }
    local ty = weft.zeros(2, f64)
    weft.jvp(k, 2, { arr { 1, 2 }, 3.0 }, { arr { 1, 0 } }, { weft.zeros(2, f64) }, { ty })
    assert.are.same({ 3, 0 }, ty:totable())
    assert.has_error(function()
      weft.jvp(k, 2, { arr { 1, 2 }, 3.0 }, { arr { 1, 0, 0 } }, { weft.zeros(2, f64) }, {})
    end, "weft: tangent launch of 'k': the tangent of 'x' must be an array of the same type and shape")
    assert.has_error(function() weft.jvp(42, 2, {}, {}, {}, {}) end,
                     "weft.jvp: expected a kernel (made by weft.kernel), got number")
    -- weft.jacobian names bad argument lists
    assert.has_error(function() weft.jacobian(k, 2, nil, {}) end,
                     "weft.jacobian: inputs must be a table of launch arguments, got nil")
    assert.has_error(function() weft.jacobian(k, 2, { arr { 1, 2 }, 3.0 }, weft.zeros(2, f64)) end,
                     "weft.jacobian: outputs must be a table of launch arguments, got an array")
    assert.has_error(function() weft.jacobian(k, 2, { arr { 1, 2 }, 3.0 }, { weft.zeros(2, f64) }, 2) end,
                     "weft.jacobian: inputs[2] is not an array")
  end)

  it("the tangent kernel is appended once to the kernel's module", function()
    local k = kernel_of("a * b")
    local x, z = arr { 1, 2 }, arr { 3, 4 }
    for _ = 1, 3 do weft.jvp(k, 2, { x, z }, { x }, { weft.zeros(2, f64) }, { weft.zeros(2, f64) }) end
    local ir = k:ir()
    local _, count = ir:gsub("kernel @jvp_", "")
    assert.are.equal(1, count)
  end)
end)
