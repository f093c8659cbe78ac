-- Reverse mode through control flow, functions, aggregates and arrays of
-- vectors and structs, checked against central differences (float64).
local weft = require "weft"

local f64, i32 = weft.float64, weft.int32
local A = weft.array

local function arr(t) return weft.array(t, f64) end

local function assert_grad(k, dim, ins, outs, tol)
  local ok, err, where = weft.check_grad(k, dim, ins, outs, { tol = tol })
  assert(ok, tostring(where) .. " (error " .. tostring(err) .. ")")
end

describe("autodiff: loops", function()
  it("x^n by repeated multiplication, n a run-time scalar", function()
    local k = weft.kernel{ x = A(f64), n = i32, y = A(f64), function(x, n, y)
      local i = weft.tid()
      local p = weft.float64(1.0)
      for _ = 1, n do p = p * x[i] end
      y[i] = p
    end }
    for _, n in ipairs { 0, 1, 2, 7 } do
      local x, y = arr { 0.5, 1.1, -1.3, 2.0 }, weft.zeros(4, f64)
      assert_grad(k, 4, { x, n }, { y })
      local J = weft.jacobian(k, 4, { x, n }, { y }):totable()
      local xs = x:totable()
      for i = 1, 4 do
        local want = n == 0 and 0 or n * xs[i] ^ (n - 1)
        assert(math.abs(J[i][i] - want) < 1e-9 * math.max(1, math.abs(want)),
               string.format("n=%d x=%g: got %g, want %g", n, xs[i], J[i][i], want))
      end
    end
  end)

  it("for loops with run-time bounds and steps read from arrays", function()
    local k = weft.kernel{ x = A(f64), b = A(i32), y = A(f64), function(x, b, y)
      local i = weft.tid()
      local s, t = x[i], weft.float64(0)
      for j = b[i], 1, -2 do
        s = weft.sin(s) * 1.5 + x[j % 4] * 0.1
        t = t + s * s
      end
      y[i] = t
    end }
    assert_grad(k, 4, { arr { 0.3, 0.7, -0.2, 1.1 }, weft.array({ 0, 3, 6, 9 }, i32) },
                { weft.zeros(4, f64) })
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
    assert_grad(k, 5, { arr { 0.2, 0.5, 1.0, 3.0, 10.0 }, arr { 1, 2, 3, 4, 5 } }, { weft.zeros(5, f64) })
  end)

  it("repeat ... until and break", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = x[i]
      local acc = weft.float64(0)
      repeat
        acc = acc + v * v
        v = v * 0.5
      until v < 0.1
      for j = 1, 100 do
        if acc > 5.0 then break end
        acc = acc * (1.0 + v)
      end
      y[i] = acc
    end }
    assert_grad(k, 4, { arr { 0.15, 0.45, 1.7, 3.3 } }, { weft.zeros(4, f64) })
  end)

  it("nested loops and an accumulation over an array", function()
    local k = weft.kernel{ x = A(f64), w = A(f64), n = i32, y = A(f64), function(x, w, n, y)
      local i = weft.tid()
      local s = x[i]
      local e = weft.float64(0)
      for a = 1, n do
        for b = 0, 3 do
          s = s * 0.9 + weft.sin(s) * w[b]
        end
        e = e + s * x[(i + a) % 4]
      end
      y[i] = e
    end }
    assert_grad(k, 4, { arr { 0.1, 0.5, -0.4, 0.8 }, arr { 0.3, -0.2, 0.5, 0.1 }, 3 }, { weft.zeros(4, f64) })
  end)
end)

describe("autodiff: loops sharing values", function()
  it("a loop init that is also used inside the loop and as an inner loop's init", function()
    local k = weft.kernel{ a = A(f64, 2), x = A(f64), p = A(f64), function(a, x, p)
      local i = weft.tid()
      local s0 = x[i] * 0.5
      local s = s0
      for r = 0, 2 do
        local t = s0
        for j = 0, 1 do t = t + a[r][j] * s0 * t end
        s = s + t * s
      end
      p[i] = s
    end }
    local a = weft.array({ { 0.1, 0.2 }, { -0.3, 0.4 }, { 0.5, 0.6 } }, f64)
    assert_grad(k, 2, { a, arr { 0.7, -0.4 } }, { weft.zeros(2, f64) })
  end)

  it("nested accumulations through weft.func taking array views", function()
    local sum1 = weft.func(function(row)
      local s = 0.0
      for j = 0, #row - 1 do s = s + row[j] * row[j] end
      return s
    end)
    local sum2 = weft.func(function(m)
      local s = 0.0
      for r = 0, m.shape[0] - 1 do s = s + sum1(m[r]) end
      return s
    end)
    local k = weft.kernel{ a = A(f64, 3), p = A(f64), function(a, p)
      local i = weft.tid()
      p[i] = sum2(a[i])
    end }
    local a = weft.array({ { { 1, 2 }, { 3, 4 } }, { { 0.5, -1 }, { 2, 0.25 } } }, f64)
    assert_grad(k, 2, { a }, { weft.zeros(2, f64) })
  end)
end)

describe("autodiff: branches and functions", function()
  it("if/elseif/else with values and stores in branches", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local a = x[i]
      local r
      if a > 1.0 then
        r = a * a
        z[i] = weft.sin(a)
      elseif a > 0.0 then
        r = weft.exp(a)
      else
        r = -a * 3.0
        z[i] = a * a * a
      end
      y[i] = r * a
    end }
    assert_grad(k, 6, { arr { -1.5, -0.2, 0.3, 0.8, 1.2, 2.5 } }, { weft.zeros(6, f64), weft.zeros(6, f64) })
  end)

  it("weft.func calls (inlined), early return", function()
    local sq = weft.func(function(v) return v * v end)
    local f = weft.func(function(v, c)
      if v < 0.0 then return -v * c end
      return sq(v) + weft.sin(v * c)
    end)
    local k = weft.kernel{ x = A(f64), c = A(f64), y = A(f64), function(x, c, y)
      local i = weft.tid()
      y[i] = f(x[i], c[i]) + sq(c[i])
    end }
    assert_grad(k, 4, { arr { -1, -0.5, 0.5, 1.5 }, arr { 0.3, 1, 2, 0.7 } }, { weft.zeros(4, f64) })
  end)

  it("atomic_add into one loss element", function()
    local k = weft.kernel{ x = A(f64), loss = A(f64), function(x, loss)
      local i = weft.tid()
      weft.atomic_add(loss, 0, x[i] * x[i] * 0.5 + weft.cos(x[i]))
    end }
    assert_grad(k, 5, { arr { 1, 2, 3, 4, 5 } }, { weft.zeros(1, f64) })
  end)
end)

describe("autodiff: vectors, matrices and structs in arrays", function()
  it("arrays of vec3d: gradients per component", function()
    local k = weft.kernel{ p = A(weft.vec3d), v = A(weft.vec3d), y = A(f64), function(p, v, y)
      local i = weft.tid()
      local d = p[i] + v[i] * 0.1
      y[i] = weft.length(d) + weft.dot(d, v[i])
    end }
    local p = weft.array({ { 1, 2, 3 }, { -1, 0.5, 2 }, { 0.3, 0.3, -0.7 } }, weft.vec3d)
    local v = weft.array({ { 0.1, 0.2, 0.3 }, { 1, -1, 0 }, { 2, 0, 1 } }, weft.vec3d)
    assert_grad(k, 3, { p, v }, { weft.zeros(3, f64) })
  end)

  it("the n-body energy of bench/ad_nbody.lua (pairs loop, x / sqrt, atomic loss)", function()
    local k = weft.kernel{ pos = A(weft.vec3d), mass = A(f64), e = A(f64), function(pos, mass, e)
      local i = weft.tid()
      local pi = pos[i]
      local acc = 0.0
      for j = 0, #pos - 1 do
        if j ~= i then
          local d = pos[j] - pi
          acc = acc + mass[j] / weft.sqrt(weft.dot(d, d) + 0.01)
        end
      end
      weft.atomic_add(e, 0, -0.5 * mass[i] * acc)
    end }
    local pos = weft.array({ { 0, 0, 0 }, { 1, 0.5, -0.2 }, { -0.3, 0.8, 0.4 }, { 0.6, -0.7, 0.9 } },
                           weft.vec3d)
    assert_grad(k, 4, { pos, arr { 1.0, 0.7, 1.3, 0.9 } }, { weft.zeros(1, f64) })
  end)

  it("matrices in and out", function()
    local k = weft.kernel{ m = A(weft.mat22d), o = A(weft.vec2d), function(m, o)
      local i = weft.tid()
      local a = m[i]
      o[i] = weft.inverse(a) * weft.vec2d(1.0, 2.0) + a * weft.vec2d(a[0][0], 1.0)
    end }
    local m = weft.array({ { { 2, 1 }, { 0.5, 3 } }, { { 1, -1 }, { 1, 1 } } }, weft.mat22d)
    assert_grad(k, 2, { m }, { weft.zeros(2, weft.vec2d) })
  end)

  it("structs: gradients flow through float fields", function()
    local P = weft.struct{ { "pos", weft.vec3d }, { "mass", f64 }, { "id", i32 } }
    local k = weft.kernel{ ps = A(P), s = A(f64), y = A(f64), function(ps, s, y)
      local i = weft.tid()
      local p = ps[i]
      p.mass = p.mass * s[i]
      y[i] = p.mass * weft.length_sq(p.pos) + weft.float64(p.id)
    end }
    local ps = weft.zeros(2, P)
    ps[0] = P{ pos = weft.vec3d(1, 2, 3), mass = 2.0, id = 4 }
    ps[1] = P{ pos = weft.vec3d(-1, 0.5, 1), mass = 0.5, id = 1 }
    local s = arr { 1.5, 2 }
    local y = weft.zeros(2, f64)
    assert_grad(k, 2, { ps, s }, { y })   -- w.r.t. s (struct inputs are not flattened)
    local tape = weft.Tape()
    ps.requires_grad, y.requires_grad = true, true
    tape:record(function() weft.launch(k, 2, { ps, s }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = arr { 1, 1 } } }
    local g = ps.grad[0]
    -- d y0 / d mass = s * |pos|^2 = 1.5 * 14; d y0 / d pos = 2 * mass * s * pos
    assert(math.abs(g.mass - 21) < 1e-9, tostring(g.mass))
    assert(math.abs(g.pos.y - 2 * 2 * 1.5 * 2) < 1e-9, tostring(g.pos.y))
  end)
end)
