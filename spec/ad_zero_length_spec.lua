-- Gradients of length, normalize and atan2 where they are singular: at the
-- zero vector (and atan2 at (0, 0)) the derivative is 0, as in Warp's
-- adj_length, adj_normalize and adj_atan2, in reverse and forward mode, so a
-- particle's self-pair never turns a gradient into NaN. Away from zero
-- the derivatives match central differences. The CUDA cases run under
-- scripts/cuda-emu.
local weft = require "weft"

local flat = require "helpers.flat"

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end

local vtypes = {
  { 2, weft.float32, weft.vec2 }, { 3, weft.float32, weft.vec3 }, { 4, weft.float32, weft.vec4 },
  { 2, weft.float64, weft.vec2d }, { 3, weft.float64, weft.vec3d }, { 4, weft.float64, weft.vec4d },
}

-- l[i] = length(v[i]), u[i] = normalize(v[i])
local function len_kernel(vt, st)
  return weft.kernel{ v = weft.array(vt), l = weft.array(st), u = weft.array(vt), function(v, l, u)
    local i = weft.tid()
    l[i] = weft.length(v[i])
    u[i] = weft.normalize(v[i])
  end }
end

-- rows: the zero vector, then two others
local function points(n)
  local z, a, b = {}, {}, {}
  for c = 1, n do
    z[c], a[c], b[c] = 0, 0.3 * c - 0.7, 1.1 - 0.45 * c
  end
  return { z, a, b }
end

-- J[r][c] with r an output component of row i and c an input component of
-- row j: block (i, j) holds rows (i-1)*no+1.. and columns (j-1)*n+1..
local function block_is(J, no, n, i, j, pred)
  for r = (i - 1) * no + 1, i * no do
    for c = (j - 1) * n + 1, j * n do
      if not pred(J[r][c]) then return false, r, c, J[r][c] end
    end
  end
  return true
end

describe("length and normalize at the zero vector", function()
  for _, case in ipairs(vtypes) do
    local n, st, vt = case[1], case[2], case[3]
    local tol = st == weft.float64 and 1e-6 or 2e-2
    local name = string.format("vec%d %s", n, tostring(st.name or st))

    it("reverse mode: 0 at zero, differences elsewhere (" .. name .. ")", function()
      local k = len_kernel(vt, st)
      local v = weft.array(points(n), vt)
      local l, u = weft.zeros(3, st), weft.zeros(3, vt)
      for of, no in ipairs { 1, n } do
        local J = weft.jacobian(k, 3, { v }, { l, u }, 1, of):totable()
        local F = weft.jacobian_fd(k, 3, { v }, { l, u }, 1, of):totable()
        for i = 1, 3 do
          for j = 1, 3 do
            local ok, r, c, x = block_is(J, no, n, i, j, finite)
            if not ok then error(string.format("output %d [%d][%d] = %s", of, r, c, tostring(x))) end
          end
        end
        local ok, r0, c0, x = block_is(J, no, n, 1, 1, function(y) return y == 0 end)
        if not ok then error(string.format("output %d at zero [%d][%d] = %s, want 0", of, r0, c0, tostring(x))) end
        for r = no + 1, 3 * no do
          for c = 1, 3 * n do
            local want = F[r][c]
            assert(math.abs(J[r][c] - want) <= tol * math.max(1, math.abs(want)),
                   string.format("output %d [%d][%d]: %g, differences %g", of, r, c, J[r][c], want))
          end
        end
      end
    end)

    it("forward mode: 0 at zero, J v elsewhere (" .. name .. ")", function()
      local k = len_kernel(vt, st)
      local v = weft.array(points(n), vt)
      local l, u = weft.zeros(3, st), weft.zeros(3, vt)
      local dir = {}
      for i = 1, 3 do
        dir[i] = {}
        for c = 1, n do dir[i][c] = 0.25 * c - 0.1 * i end
      end
      local tv = weft.array(dir, vt)
      local tl, tu = weft.zeros(3, st), weft.zeros(3, vt)
      weft.jvp(k, 3, { v }, { tv }, { l, u }, { tl, tu })
      local dv = flat(dir)
      for of, ot in ipairs { tl, tu } do
        local got = flat(ot:totable())
        local J = weft.jacobian(k, 3, { v }, { l, u }, 1, of):totable()
        for r = 1, #got do
          local want = 0
          for c = 1, #dv do want = want + J[r][c] * dv[c] end
          assert(finite(got[r]), string.format("output %d tangent [%d] = %s", of, r, tostring(got[r])))
          assert(math.abs(got[r] - want) <= 1e-5 * math.max(1, math.abs(want)),
                 string.format("output %d tangent [%d]: %g, J v %g", of, r, got[r], want))
        end
        local no = of == 1 and 1 or n
        for r = 1, no do
          assert(got[r] == 0, string.format("output %d tangent at zero [%d] = %g", of, r, got[r]))
        end
      end
    end)
  end

  it("atan2 at (0, 0): 0 in both modes, differences elsewhere", function()
    local f64 = weft.float64
    local k = weft.kernel{ y = weft.array(f64), x = weft.array(f64), r = weft.array(f64), function(y, x, r)
      local i = weft.tid()
      r[i] = weft.atan2(y[i], x[i])
    end }
    local y, x, r = weft.array({ 0, 0.5, -1.5 }, f64), weft.array({ 0, -2, 0.25 }, f64), weft.zeros(3, f64)
    for w = 1, 2 do
      local J = weft.jacobian(k, 3, { y, x }, { r }, w, 1):totable()
      local F = weft.jacobian_fd(k, 3, { y, x }, { r }, w, 1):totable()
      assert.are.equal(0, J[1][1])
      for i = 2, 3 do
        assert(math.abs(J[i][i] - F[i][i]) <= 1e-6, string.format("%d [%d]: %g, differences %g", w, i, J[i][i], F[i][i]))
      end
    end
    local ty, tx, tr = weft.array({ 1, 1, 1 }, f64), weft.array({ -1, 0.5, 2 }, f64), weft.zeros(3, f64)
    weft.jvp(k, 3, { y, x }, { ty, tx }, { r }, { tr })
    local t = tr:totable()
    assert.are.equal(0, t[1])
    assert(finite(t[2]) and finite(t[3]) and t[2] ~= 0 and t[3] ~= 0)
  end)
end)

describe("other singular points, as in Warp", function()
  local f64 = weft.float64

  it("asin and acos at |x| = 1: derivative 0 in both modes, differences inside", function()
    for _, f in ipairs { weft.asin, weft.acos } do
      local k = weft.kernel{ x = weft.array(f64), r = weft.array(f64), function(x, r)
        local i = weft.tid()
        r[i] = f(x[i])
      end }
      local x, r = weft.array({ 1, -1, 0.3, -0.6 }, f64), weft.zeros(4, f64)
      local J = weft.jacobian(k, 4, { x }, { r }, 1, 1):totable()
      local F = weft.jacobian_fd(k, 4, { x }, { r }, 1, 1):totable()
      assert.are.equal(0, J[1][1])
      assert.are.equal(0, J[2][2])
      for i = 3, 4 do assert(math.abs(J[i][i] - F[i][i]) <= 1e-6, J[i][i] .. " vs " .. F[i][i]) end
      local tr = weft.zeros(4, f64)
      weft.jvp(k, 4, { x }, { weft.array({ 1, 1, 1, 1 }, f64) }, { r }, { tr })
      local t = tr:totable()
      assert.are.same({ 0, 0 }, { t[1], t[2] })
      for i = 3, 4 do assert(math.abs(t[i] - J[i][i]) <= 1e-12) end
    end
  end)

  it("normalize of the zero quaternion is the identity, with gradient 0", function()
    local k = weft.kernel{ q = weft.array(weft.quatd), u = weft.array(weft.quatd), function(q, u)
      local i = weft.tid()
      u[i] = weft.normalize(q[i])
    end }
    local q, u = weft.array({ { 0, 0, 0, 0 }, { 0.5, -1, 0.25, 2 } }, weft.quatd), weft.zeros(2, weft.quatd)
    weft.launch(k, 2, { q, u })
    assert.are.same({ 0, 0, 0, 1 }, u:totable()[1])
    local J = weft.jacobian(k, 2, { q }, { u }, 1, 1):totable()
    local F = weft.jacobian_fd(k, 2, { q }, { u }, 1, 1):totable()
    for r = 1, 8 do
      for c = 1, 8 do
        if r <= 4 and c <= 4 then
          assert.are.equal(0, J[r][c])
        elseif r > 4 and c > 4 then
          assert(math.abs(J[r][c] - F[r][c]) <= 1e-6, string.format("[%d][%d] %g vs %g", r, c, J[r][c], F[r][c]))
        end
      end
    end
  end)

  it("inverse of a singular matrix is the zero matrix, with gradient 0", function()
    for _, mt in ipairs { weft.mat22d, weft.mat33d } do
      local n = mt == weft.mat22d and 2 or 3
      local k = weft.kernel{ m = weft.array(mt), r = weft.array(mt), function(m, r)
        local i = weft.tid()
        r[i] = weft.inverse(m[i])
      end }
      local sing, reg = {}, {}
      for i = 1, n do
        sing[i], reg[i] = {}, {}
        for j = 1, n do
          sing[i][j] = i * j -- rank 1
          reg[i][j] = (i == j and 2 or 0) + 0.1 * i - 0.2 * j
        end
      end
      local m, r = weft.array({ sing, reg }, mt), weft.zeros(2, mt)
      weft.launch(k, 2, { m, r })
      for _, v in ipairs(flat(r:totable()[1])) do assert.are.equal(0, v) end
      local J = weft.jacobian(k, 2, { m }, { r }, 1, 1):totable()
      local F = weft.jacobian_fd(k, 2, { m }, { r }, 1, 1):totable()
      local nn = n * n
      for a = 1, 2 * nn do
        for b = 1, 2 * nn do
          if a <= nn then
            assert(J[a][b] == 0, string.format("singular [%d][%d] = %s", a, b, tostring(J[a][b])))
          elseif b > nn then
            assert(math.abs(J[a][b] - F[a][b]) <= 1e-6, string.format("[%d][%d] %g vs %g", a, b, J[a][b], F[a][b]))
          end
        end
      end
    end
  end)
end)

-- e = sum over pairs i ~= j of |r| + (i + 1) dot(normalize(r), c) with
-- r = p_i - p_j: the self-pair's length and direction are computed and
-- thrown away.
local pair_k = weft.kernel{ p = weft.array(weft.vec3), e = weft.array(weft.float32), function(p, e)
  local i = weft.tid()
  for j = 0, p.shape[0] - 1 do
    local r = p[i] - p[j]
    local d = weft.length(r)
    local u = weft.normalize(r)
    local w = weft.float32(i + 1)
    if j ~= i then weft.atomic_add(e, 0, d + w * weft.dot(u, weft.vec3(0.5, -0.25, 1.0))) end
  end
end }

local pts = { { 0, 0, 0 }, { 1, 0.5, 0 }, { 0, 2, -1 }, { -0.5, 0.3, 0.8 } }

-- The brute-force gradient: with r = p_i - p_j, l = |r| and
-- G = c / l - dot(r, c) r / l^3 (the derivative of dot(r / l, c)), pair
-- (i, j) adds r / l + w_i G to p_i's gradient and pair (j, i) adds
-- r / l - w_j G (G is even in r).
local function brute()
  local c = { 0.5, -0.25, 1.0 }
  local g = {}
  for i = 1, #pts do
    g[i] = { 0, 0, 0 }
    for j = 1, #pts do
      if j ~= i then
        local r, l2, rc = {}, 0, 0
        for a = 1, 3 do
          r[a] = pts[i][a] - pts[j][a]
          l2, rc = l2 + r[a] * r[a], rc + r[a] * c[a]
        end
        local l = math.sqrt(l2)
        for a = 1, 3 do
          local G = c[a] / l - rc * r[a] / (l * l * l)
          g[i][a] = g[i][a] + 2 * r[a] / l + (i - j) * G
        end
      end
    end
  end
  return g
end

local function pair_grads(dev)
  local p = weft.array(pts, weft.vec3, { device = dev, requires_grad = true })
  local e = weft.zeros(1, weft.float32, { device = dev, requires_grad = true })
  local tape = weft.Tape()
  tape:record(function() weft.launch(pair_k, #pts, { p, e }, { device = dev }) end)
  tape:backward(e)
  return p.grad:to("cpu"):totable()
end

local function check_pairs(g)
  local want = brute()
  for i = 1, #pts do
    for a = 1, 3 do
      local x, y = g[i][a], want[i][a]
      assert(finite(x), string.format("p[%d][%d] gradient %s", i - 1, a - 1, tostring(x)))
      assert(math.abs(x - y) <= 1e-4 * math.max(1, math.abs(y)),
             string.format("p[%d][%d]: %g, brute force %g", i - 1, a - 1, x, y))
    end
  end
end

describe("self-pairs with a Tape", function()
  it("have no NaN and equal the brute-force sum (cpu)", function()
    check_pairs(pair_grads("cpu"))
  end)

  it("have no NaN and equal the brute-force sum on a CUDA device (scripts/cuda-emu)", function()
    if require("helpers.cuda").missing() then return end
    check_pairs(pair_grads("cuda:0"))
  end)
end)
