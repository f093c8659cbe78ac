-- Composite types in kernels, checked by launching and comparing with plain
-- Lua references: vectors of every width and scalar type, matrices,
-- quaternions, transforms, spatial types, custom weft.vector/weft.matrix,
-- structs, and arrays of 1 to 4 dimensions with peeling views.
local weft = require "weft"

local A = weft.array

local function close(a, b, tol)
  tol = tol or 1e-5
  return math.abs(a - b) <= tol * math.max(1, math.abs(b))
end

-- Compare nested tables of numbers with a tolerance (nil: exactly).
local function check(got, want, tol, path)
  path = path or ""
  if type(want) == "table" then
    assert(type(got) == "table", path .. ": got " .. tostring(got) .. ", want a table")
    assert(#got == #want, string.format("%s: got %d items, want %d", path, #got, #want))
    for i = 1, #want do check(got[i], want[i], tol, path .. "[" .. i .. "]") end
    return
  end
  if type(got) == "cdata" then got = tonumber(got) end
  local ok = tol and type(want) == "number" and close(got, want, tol) or got == want
  if not ok then error(string.format("%s: got %s, want %s", path, tostring(got), tostring(want)), 0) end
end

---------------------------------------------------------------------------
-- plain Lua references (vectors are 1-based tables)
---------------------------------------------------------------------------
local function vmap2(a, b, f)
  local r = {}
  for i = 1, #a do r[i] = f(a[i], type(b) == "table" and b[i] or b) end
  return r
end
local function vadd(a, b) return vmap2(a, b, function(x, y) return x + y end) end
local function vsub(a, b) return vmap2(a, b, function(x, y) return x - y end) end
local function vscale(a, s) return vmap2(a, s, function(x, y) return x * y end) end
local function vdot(a, b)
  local s = 0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end
local function vcross(a, b)
  return { a[2] * b[3] - a[3] * b[2], a[3] * b[1] - a[1] * b[3], a[1] * b[2] - a[2] * b[1] }
end
local function mmul(a, b)
  local r = {}
  for i = 1, #a do
    r[i] = {}
    for j = 1, #b[1] do
      local s = 0
      for k = 1, #b do s = s + a[i][k] * b[k][j] end
      r[i][j] = s
    end
  end
  return r
end
local function mvec(a, v)
  local r = {}
  for i = 1, #a do r[i] = vdot(a[i], v) end
  return r
end
local function mtrans(a)
  local r = {}
  for j = 1, #a[1] do
    r[j] = {}
    for i = 1, #a do r[j][i] = a[i][j] end
  end
  return r
end
local function mmap(a, f)
  local r = {}
  for i = 1, #a do r[i] = f(a[i], i) end
  return r
end
local function mdet(a)
  local n = #a
  if n == 1 then return a[1][1] end
  local s = 0
  for c = 1, n do
    local minor = {}
    for i = 2, n do
      local row = {}
      for j = 1, n do if j ~= c then row[#row + 1] = a[i][j] end end
      minor[#minor + 1] = row
    end
    s = s + (c % 2 == 1 and 1 or -1) * a[1][c] * mdet(minor)
  end
  return s
end
-- inverse by Gauss-Jordan elimination
local function minv(a)
  local n = #a
  local m = {}
  for i = 1, n do
    m[i] = {}
    for j = 1, n do m[i][j] = a[i][j] end
    for j = 1, n do m[i][n + j] = i == j and 1 or 0 end
  end
  for c = 1, n do
    local p = c
    for r = c + 1, n do if math.abs(m[r][c]) > math.abs(m[p][c]) then p = r end end
    m[c], m[p] = m[p], m[c]
    local d = m[c][c]
    for j = 1, 2 * n do m[c][j] = m[c][j] / d end
    for r = 1, n do
      if r ~= c then
        local f = m[r][c]
        for j = 1, 2 * n do m[r][j] = m[r][j] - f * m[c][j] end
      end
    end
  end
  local r = {}
  for i = 1, n do
    r[i] = {}
    for j = 1, n do r[i][j] = m[i][n + j] end
  end
  return r
end
local function qmul(a, b)
  local ax, ay, az, aw = a[1], a[2], a[3], a[4]
  local bx, by, bz, bw = b[1], b[2], b[3], b[4]
  return { aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
           aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz }
end
local function qconj(q) return { -q[1], -q[2], -q[3], q[4] } end
local function qrot(q, v)
  local r = qmul(qmul(q, { v[1], v[2], v[3], 0 }), qconj(q))
  return { r[1], r[2], r[3] }
end
local function qaxis(axis, ang)
  local s, c = math.sin(ang / 2), math.cos(ang / 2)
  return { axis[1] * s, axis[2] * s, axis[3] * s, c }
end

-- deterministic test numbers
local function nums(n, seed)
  local r, x = {}, seed
  for i = 1, n do
    x = (x * 1103515245 + 12345) % 2147483648
    r[i] = (x % 2001) / 250 - 4 -- in [-4, 4], multiples of 1/250
  end
  return r
end

describe("kernel vectors", function()
  local FLOATVECS = {
    { weft.vec2h, 2, 2e-3 }, { weft.vec3h, 3, 2e-3 }, { weft.vec4h, 4, 2e-3 },
    { weft.vec2f, 2, 1e-5 }, { weft.vec3f, 3, 1e-5 }, { weft.vec4f, 4, 1e-5 },
    { weft.vec2d, 2, 1e-12 }, { weft.vec3d, 3, 1e-12 }, { weft.vec4d, 4, 1e-12 },
    { weft.vector(5, weft.float64), 5, 1e-12 }, { weft.vector(7, weft.float32), 7, 1e-5 },
    { weft.spatial_vector, 6, 1e-5 }, { weft.spatial_vectord, 6, 1e-12 },
  }

  local ops = weft.kernel{ function(a, b, o, s)
    local i = weft.tid()
    local x, y = a[i], b[i]
    o[i * 6 + 0] = x + y
    o[i * 6 + 1] = x - y
    o[i * 6 + 2] = x * 2
    o[i * 6 + 3] = 0.5 * y
    o[i * 6 + 4] = -x / 4
    local z = x
    z[1] = y.x
    z.x = z.x + 1
    o[i * 6 + 5] = z
    s[i * 6 + 0] = weft.dot(x, y)
    s[i * 6 + 1] = weft.length(x)
    s[i * 6 + 2] = weft.length_sq(y)
    s[i * 6 + 3] = weft.normalize(x)[0]
    s[i * 6 + 4] = x[i % 2] + y.y
    if x == x and not (x == y) and x ~= y then s[i * 6 + 5] = 1 else s[i * 6 + 5] = 0 end
  end }

  for _, spec in ipairs(FLOATVECS) do
    local t, n, tol = spec[1], spec[2], spec[3]
    it(t.name .. ": + - scalar * / unary -, components, dot, length, normalize, ==", function()
      local m = 4
      local av, bv = {}, {}
      for i = 1, m do
        av[i] = nums(n, i * 7)
        bv[i] = nums(n, i * 13 + 1)
      end
      local a, b = A(av, t), A(bv, t)
      av, bv = a:totable(), b:totable() -- as stored (half rounding)
      local o, s = weft.zeros(m * 6, t), weft.zeros(m * 6, t.scalar)
      weft.launch(ops, m, { a, b, o, s })
      local wo, ws = {}, {}
      for i = 1, m do
        local x, y = av[i], bv[i]
        local z = {}
        for k = 1, n do z[k] = x[k] end
        z[2] = y[1]
        z[1] = z[1] + 1
        for _, v in ipairs { vadd(x, y), vsub(x, y), vscale(x, 2), vscale(y, 0.5), vscale(x, -0.25), z } do
          wo[#wo + 1] = v
        end
        local len = math.sqrt(vdot(x, x))
        for _, v in ipairs { vdot(x, y), len, vdot(y, y), x[1] / len, x[(i - 1) % 2 + 1] + y[2], 1 } do
          ws[#ws + 1] = v
        end
      end
      check(o:totable(), wo, tol, t.name)
      check(s:totable(), ws, tol * 10, t.name .. " scalars")
    end)
  end

  it("cross products in float32 and float64", function()
    local k = weft.kernel{ function(a, b, o)
      local i = weft.tid()
      o[i] = weft.cross(a[i], b[i])
    end }
    for _, t in ipairs { weft.vec3, weft.vec3d } do
      local av, bv = { nums(3, 1), nums(3, 2) }, { nums(3, 3), nums(3, 4) }
      local o = weft.zeros(2, t)
      weft.launch(k, 2, { A(av, t), A(bv, t), o })
      check(o:totable(), { vcross(av[1], bv[1]), vcross(av[2], bv[2]) }, 1e-5)
    end
  end)

  it("integer vectors: vec2i, vec3ub, vector(4, int64)", function()
    local k = weft.kernel{ function(a, b, o)
      local i = weft.tid()
      local x, y = a[i], b[i]
      o[i * 4 + 0] = x + y
      o[i * 4 + 1] = x * 3
      o[i * 4 + 2] = x / 2
      local z = y
      z[0] = x.y
      o[i * 4 + 3] = z
    end }
    local cases = {
      { weft.vec2i, { { 7, -9 }, { 100, 3 } }, { { 1, 2 }, { -50, 4 } }, 32, true },
      { weft.vec3ub, { { 200, 3, 255 }, { 1, 2, 3 } }, { { 100, 1, 1 }, { 4, 5, 6 } }, 8, false },
      { weft.vector(4, weft.int64), { { 1, -2, 3, -4 }, { 5, 6, 7, 8 } }, { { 9, 9, 9, 9 }, { 0, 0, 0, 1 } }, 64, true },
    }
    for _, c in ipairs(cases) do
      local t, av, bv, bits, signed = c[1], c[2], c[3], c[4], c[5]
      local function wrap(x)
        if bits == 64 then return x end -- the test values stay small
        local m = 2 ^ bits
        x = x % m
        if signed and x >= m / 2 then x = x - m end
        return x
      end
      local o = weft.zeros(8, t)
      weft.launch(k, 2, { A(av, t), A(bv, t), o })
      local want = {}
      for i = 1, 2 do
        local x, y = av[i], bv[i]
        want[#want + 1] = vmap2(x, y, function(p, q) return wrap(p + q) end)
        want[#want + 1] = vmap2(x, 3, function(p, q) return wrap(p * q) end)
        want[#want + 1] = vmap2(x, 2, function(p, q)
          local r = p / q
          return r >= 0 and math.floor(r) or math.ceil(r)
        end)
        local z = {}
        for j = 1, #y do z[j] = y[j] end
        z[1] = x[2]
        want[#want + 1] = z
      end
      check(o:totable(), want, nil, t.name)
    end
  end)

  it("constructors: components, broadcast, none, conversion between scalar types", function()
    local k = weft.kernel{ o = A(weft.vec3d), i = A(weft.vec3i), function(o, i)
      o[0] = weft.vec3d(1, 2, 3)
      o[1] = weft.vec3d(2.5)
      o[2] = weft.vec3d()
      o[3] = weft.vec3d(weft.vec3(0.5, 1.5, -2))
      i[0] = weft.vec3i(weft.vec3d(2.7, -2.7, 0.2))
    end }
    local o, iv = weft.zeros(4, weft.vec3d), weft.zeros(1, weft.vec3i)
    weft.launch(k, 1, { o, iv })
    check(o:totable(), { { 1, 2, 3 }, { 2.5, 2.5, 2.5 }, { 0, 0, 0 }, { 0.5, 1.5, -2 } })
    check(iv:totable(), { { 2, -2, 0 } })
  end)

  it("components written with runtime indexes (v[k] = x, m[r][c] = x)", function()
    local k = weft.kernel{ v = A(weft.vec4), m = A(weft.mat33d), function(v, m)
      local i = weft.tid()
      local a = weft.vec4()
      a[i] = 5
      a[(i + 1) % 4] = a[i] + 1
      v[i] = a
      local b = weft.identity(3, weft.float64)
      b[i % 3][(i + 2) % 3] = 9
      m[i] = b
    end }
    local v, m = weft.zeros(4, weft.vec4), weft.zeros(4, weft.mat33d)
    weft.launch(k, 4, { v, m })
    local wv, wm = {}, {}
    for i = 0, 3 do
      local a = { 0, 0, 0, 0 }
      a[i + 1] = 5
      a[(i + 1) % 4 + 1] = 6
      wv[#wv + 1] = a
      local b = { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }
      b[i % 3 + 1][(i + 2) % 3 + 1] = 9
      wm[#wm + 1] = b
    end
    check(v:totable(), wv)
    check(m:totable(), wm)
  end)

  it("vector parameters passed by value", function()
    local k = weft.kernel{ v = weft.vec3, o = A(weft.vec3), function(v, o)
      local i = weft.tid()
      o[i] = v * weft.float32(i)
    end }
    local o = weft.zeros(3, weft.vec3)
    weft.launch(k, 3, { weft.vec3(1, 2, 3), o })
    check(o:totable(), { { 0, 0, 0 }, { 1, 2, 3 }, { 2, 4, 6 } })
  end)
end)

describe("kernel matrices", function()
  local ops = weft.kernel{ function(a, b, v, mo, vo, so)
    local i = weft.tid()
    local m, n = a[i], b[i]
    mo[i * 6 + 0] = m * n
    mo[i * 6 + 1] = weft.transpose(m)
    mo[i * 6 + 2] = weft.inverse(m)
    mo[i * 6 + 3] = m + n
    mo[i * 6 + 4] = m * 2 - n / 2
    mo[i * 6 + 5] = -m
    vo[i * 2] = m * v[i]
    vo[i * 2 + 1] = m[1]
    so[i * 3] = weft.determinant(m)
    so[i * 3 + 1] = m[1][0] + m[0][i % 2]
    local c = m
    c[0][1] = 42
    c[1] = c[1] * 2
    so[i * 3 + 2] = c[0][1] + c[1][1]
  end }

  local MATS = {
    { weft.mat22, weft.vec2, 2, 1e-4 }, { weft.mat33, weft.vec3, 3, 1e-4 }, { weft.mat44, weft.vec4, 4, 1e-4 },
    { weft.mat33h, weft.vec3h, 3, 3e-2 },
    { weft.mat22d, weft.vec2d, 2, 1e-11 }, { weft.mat33d, weft.vec3d, 3, 1e-11 }, { weft.mat44d, weft.vec4d, 4, 1e-11 },
  }
  for _, spec in ipairs(MATS) do
    local mt, vt, n, tol = spec[1], spec[2], spec[3], spec[4]
    it(mt.name .. ": mat*mat, mat*vec, transpose, inverse, determinant, + - * /, rows, elements", function()
      local cnt = 3
      local av, bv, vv = {}, {}, {}
      for i = 1, cnt do
        av[i], bv[i] = {}, {}
        local ra, rb = nums(n * n, i * 5), nums(n * n, i * 11)
        for r = 1, n do
          av[i][r], bv[i][r] = {}, {}
          for c = 1, n do
            av[i][r][c] = ra[(r - 1) * n + c] + (r == c and 10 or 0) -- well conditioned
            bv[i][r][c] = rb[(r - 1) * n + c]
          end
        end
        vv[i] = nums(n, i * 3)
      end
      local a, b, v = A(av, mt), A(bv, mt), A(vv, vt)
      av, bv, vv = a:totable(), b:totable(), v:totable()
      local mo, vo, so = weft.zeros(cnt * 6, mt), weft.zeros(cnt * 2, vt), weft.zeros(cnt * 3, vt.scalar)
      weft.launch(ops, cnt, { a, b, v, mo, vo, so })
      local wm, wv, ws = {}, {}, {}
      for i = 1, cnt do
        local m, nn = av[i], bv[i]
        for _, x in ipairs {
          mmul(m, nn), mtrans(m), minv(m), mmap(m, function(r, k) return vadd(r, nn[k]) end),
          mmap(m, function(r, k) return vsub(vscale(r, 2), vscale(nn[k], 0.5)) end),
          mmap(m, function(r) return vscale(r, -1) end),
        } do wm[#wm + 1] = x end
        wv[#wv + 1] = mvec(m, vv[i])
        wv[#wv + 1] = m[2]
        ws[#ws + 1] = mdet(m)
        ws[#ws + 1] = m[2][1] + m[1][(i - 1) % 2 + 1]
        ws[#ws + 1] = 42 + 2 * m[2][2]
      end
      check(mo:totable(), wm, tol, mt.name)
      check(vo:totable(), wv, tol, mt.name .. " vectors")
      check(so:totable(), ws, tol * 100, mt.name .. " scalars")
    end)
  end

  it("identity, diag, outer in float32 and float64", function()
    local k = weft.kernel{ o2 = A(weft.mat22), o3 = A(weft.mat33d), o4 = A(weft.mat44), function(o2, o3, o4)
      o2[0] = weft.identity(2, weft.float32)
      o3[0] = weft.identity(3, weft.float64)
      o4[0] = weft.identity(4)
      o3[1] = weft.diag(weft.vec3d(1, 2, 3))
      o2[1] = weft.outer(weft.vec2(1, 2), weft.vec2(3, 4))
      o3[2] = weft.outer(weft.vec3d(1, 0, -1), weft.vec3d(2, 3, 4))
    end }
    local o2, o3, o4 = weft.zeros(2, weft.mat22), weft.zeros(3, weft.mat33d), weft.zeros(1, weft.mat44)
    weft.launch(k, 1, { o2, o3, o4 })
    check(o2:totable(), { { { 1, 0 }, { 0, 1 } }, { { 3, 4 }, { 6, 8 } } })
    check(o3:totable(), { { { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, { { 1, 0, 0 }, { 0, 2, 0 }, { 0, 0, 3 } },
                          { { 2, 3, 4 }, { 0, 0, 0 }, { -2, -3, -4 } } })
    check(o4:totable(), { { { 1, 0, 0, 0 }, { 0, 1, 0, 0 }, { 0, 0, 1, 0 }, { 0, 0, 0, 1 } } })
  end)

  it("non-square custom matrices: matrix(2, 3) * vector(3), * matrix(3, 2), transpose", function()
    local M23, M32 = weft.matrix(2, 3, weft.float64), weft.matrix(3, 2, weft.float64)
    local k = weft.kernel{ a = A(M23), v = A(weft.vec3d), o = A(weft.vec2d), p = A(weft.mat22d), t = A(M32),
      function(a, v, o, p, t)
        local m = a[0]
        o[0] = m * v[0]
        p[0] = m * weft.transpose(m)
        t[0] = weft.transpose(m)
      end }
    local mv = { { 1, 2, 3 }, { 4, 5, 6 } }
    local o, p, t = weft.zeros(1, weft.vec2d), weft.zeros(1, weft.mat22d), weft.zeros(1, M32)
    weft.launch(k, 1, { A({ mv }, M23), A({ { 1, 0, -1 } }, weft.vec3d), o, p, t })
    check(o:totable(), { mvec(mv, { 1, 0, -1 }) })
    check(p:totable(), { mmul(mv, mtrans(mv)) })
    check(t:totable(), { mtrans(mv) })
  end)

  it("spatial matrices: spatial_matrix * spatial_vector, transpose, +", function()
    local k = weft.kernel{ function(a, v, o, m)
      o[0] = a[0] * v[0]
      m[0] = weft.transpose(a[0]) + a[0]
    end }
    for _, spec in ipairs { { weft.spatial_matrix, weft.spatial_vector, 1e-4 },
                            { weft.spatial_matrixd, weft.spatial_vectord, 1e-12 } } do
      local mt, vt, tol = spec[1], spec[2], spec[3]
      local mv = {}
      local r = nums(36, 9)
      for i = 1, 6 do
        mv[i] = {}
        for j = 1, 6 do mv[i][j] = r[(i - 1) * 6 + j] end
      end
      local vv = nums(6, 4)
      local o, m = weft.zeros(1, vt), weft.zeros(1, mt)
      local a = A({ mv }, mt)
      mv = a:totable()[1]
      weft.launch(k, 1, { a, A({ vv }, vt), o, m })
      check(o:totable(), { mvec(mv, vv) }, tol)
      check(m:totable(), { mmap(mv, function(row, i) return vadd(row, mtrans(mv)[i]) end) }, tol)
    end
  end)
end)

describe("kernel quaternions and transforms", function()
  it("product, from_axis_angle, rotate, rotate_inv, inverse, identity (float32, float64)", function()
    local k = weft.kernel{ function(qa, qb, v, qo, vo)
      local i = weft.tid()
      local a, b = qa[i], qb[i]
      qo[i * 4 + 0] = a * b
      qo[i * 4 + 1] = weft.quat_inverse(a)
      qo[i * 4 + 2] = weft.quat_from_axis_angle(weft.normalize(v[i]), a.w)
      qo[i * 4 + 3] = weft.quat_identity(weft.float64) == weft.quatd(0, 0, 0, 1) and a or b
      vo[i * 2] = weft.quat_rotate(weft.normalize(a), v[i])
      vo[i * 2 + 1] = weft.quat_rotate_inv(weft.normalize(a), v[i])
    end }
    for _, spec in ipairs { { weft.quat, weft.vec3, 1e-5 }, { weft.quatd, weft.vec3d, 1e-12 } } do
      local qt, vt, tol = spec[1], spec[2], spec[3]
      local qav, qbv, vv = { nums(4, 1), nums(4, 2) }, { nums(4, 3), nums(4, 4) }, { nums(3, 5), nums(3, 6) }
      local qa, qb, v = A(qav, qt), A(qbv, qt), A(vv, vt)
      qav, qbv, vv = qa:totable(), qb:totable(), v:totable()
      local qo, vo = weft.zeros(8, qt), weft.zeros(4, vt)
      weft.launch(k, 2, { qa, qb, v, qo, vo })
      local wq, wv = {}, {}
      for i = 1, 2 do
        local a, b = qav[i], qbv[i]
        local na = vscale(a, 1 / math.sqrt(vdot(a, a)))
        local nv = vscale(vv[i], 1 / math.sqrt(vdot(vv[i], vv[i])))
        wq[#wq + 1] = qmul(a, b)
        wq[#wq + 1] = qconj(a)
        wq[#wq + 1] = qaxis(nv, a[4])
        wq[#wq + 1] = a
        wv[#wv + 1] = qrot(na, vv[i])
        wv[#wv + 1] = qrot(qconj(na), vv[i])
      end
      check(qo:totable(), wq, tol, qt.name)
      check(vo:totable(), wv, tol * 10, qt.name .. " rotations")
    end
  end)

  it("transforms: transform(p, q), p/q access, transform_point/vector/identity", function()
    local k = weft.kernel{ function(ts, v, vo, to)
      local i = weft.tid()
      local t = ts[i]
      vo[i * 4 + 0] = weft.transform_point(t, v[i])
      vo[i * 4 + 1] = weft.transform_vector(t, v[i])
      vo[i * 4 + 2] = t.p + weft.transform_get_translation(t)
      vo[i * 4 + 3] = weft.transform_point(weft.transform_identity(), v[i])
      local u = t
      u.p = v[i]
      u.q = weft.quat_inverse(t.q)
      to[i * 2] = u
      to[i * 2 + 1] = weft.transform(t.p * 2, weft.transform_get_rotation(t))
    end }
    local q1 = qaxis({ 0, 0, 1 }, 0.7)
    local q2 = qaxis({ 0.6, 0.8, 0 }, -1.2)
    local tv = { { 1, 2, 3, q1[1], q1[2], q1[3], q1[4] }, { -1, 0, 0.5, q2[1], q2[2], q2[3], q2[4] } }
    local vv = { { 1, 0, 0 }, { 0.5, -2, 3 } }
    local ts = A(tv, weft.transform)
    tv = ts:totable()
    local vo, to = weft.zeros(8, weft.vec3), weft.zeros(4, weft.transform)
    weft.launch(k, 2, { ts, A(vv, weft.vec3), vo, to })
    local wv, wt = {}, {}
    for i = 1, 2 do
      local t = tv[i]
      local p, q = { t[1], t[2], t[3] }, { t[4], t[5], t[6], t[7] }
      local r = qrot(q, vv[i])
      wv[#wv + 1] = vadd(r, p)
      wv[#wv + 1] = r
      wv[#wv + 1] = vscale(p, 2)
      wv[#wv + 1] = vv[i]
      local cq = qconj(q)
      wt[#wt + 1] = { vv[i][1], vv[i][2], vv[i][3], cq[1], cq[2], cq[3], cq[4] }
      wt[#wt + 1] = { 2 * p[1], 2 * p[2], 2 * p[3], q[1], q[2], q[3], q[4] }
    end
    check(vo:totable(), wv, 1e-5)
    check(to:totable(), wt, 1e-6)
  end)

  it("transform parameters by value, transformd", function()
    local k = weft.kernel{ t = weft.transformd, o = A(weft.vec3d), function(t, o)
      o[0] = weft.transform_point(t, weft.vec3d(1, 0, 0))
    end }
    local o = weft.zeros(1, weft.vec3d)
    weft.launch(k, 1, { weft.transformd(weft.vec3d(0, 0, 1), weft.quatd(0, 0, 0, 1)), o })
    check(o:totable(), { { 1, 0, 1 } })
  end)
end)

describe("kernel structs", function()
  local P = weft.struct{ { "pos", weft.vec3 }, { "vel", weft.vec3 }, { "mass", weft.float32 }, { "id", weft.int32 },
                         name = "Particle" }
  local W = weft.struct{ { "p", P }, { "tag", weft.uint8 }, { "scale", weft.float64 }, name = "Wrapped" }

  local function particles(n)
    local t = {}
    for i = 1, n do
      t[i] = P{ pos = weft.vec3(i, 2 * i, 0), vel = weft.vec3(1, -1, 0.5), mass = i * 0.5, id = i }
    end
    return t
  end

  it("arrays of structs: field reads, field writes, whole-element writes", function()
    local k = weft.kernel{ ps = A(P), dt = weft.float32, function(ps, dt)
      local i = weft.tid()
      local p = ps[i]
      p.pos = p.pos + p.vel * dt
      p.id = p.id * 10
      ps[i] = p
      ps[i].mass = ps[i].mass * 2
      ps[i].vel.z = 7
    end }
    local n = 4
    local ps = A(particles(n), P)
    weft.launch(k, n, { ps, 0.5 })
    for i = 1, n do
      local p = ps[i - 1]
      check({ p.pos.x, p.pos.y, p.pos.z, p.vel.x, p.vel.y, p.vel.z, p.mass, p.id },
            { i + 0.5, 2 * i - 0.5, 0.25, 1, -1, 7, i, i * 10 })
    end
  end)

  it("P{...} in kernels (missing fields are zero), struct parameters, nested structs", function()
    local k = weft.kernel{ base = P, out = A(P), w = A(W), function(base, out, w)
      local i = weft.tid()
      local q = P{ pos = base.pos * weft.float32(i), mass = base.mass + 1 }
      out[i] = q
      local x = W{ p = q, tag = weft.uint8(i + 250), scale = 0.5 }
      x.p.id = i
      w[i] = x
    end }
    local out, w = weft.zeros(3, P), weft.zeros(3, W)
    weft.launch(k, 3, { P{ pos = weft.vec3(1, 2, 3), vel = weft.vec3(9, 9, 9), mass = 1.5, id = 3 }, out, w })
    for i = 0, 2 do
      local p = out[i]
      check({ p.pos.x, p.pos.y, p.pos.z, p.vel.x, p.vel.y, p.vel.z, p.mass, p.id }, { i, 2 * i, 3 * i, 0, 0, 0, 2.5, 0 })
      local x = w[i]
      check({ x.p.pos.z, x.p.id, x.tag, x.scale }, { 3 * i, i, (i + 250) % 256, 0.5 })
    end
  end)

  it("structs through weft.func (argument and result)", function()
    local step = weft.func(function(p, dt)
      local r = p
      r.pos = p.pos + p.vel * dt
      return r
    end)
    local energy = weft.func(function(p) return 0.5 * p.mass * weft.length_sq(p.vel) end)
    local k = weft.kernel{ ps = A(P), e = A(weft.float32), function(ps, e)
      local i = weft.tid()
      ps[i] = step(ps[i], 2.0)
      e[i] = energy(ps[i])
    end }
    local ps, e = A(particles(2), P), weft.zeros(2)
    weft.launch(k, 2, { ps, e })
    check({ ps[0].pos.x, ps[1].pos.y, ps[1].pos.z }, { 3, 2, 1 })
    check(e:totable(), { 0.5 * 0.5 * 2.25, 0.5 * 1 * 2.25 }, 1e-6)
  end)
end)

describe("kernel arrays", function()
  it("1-d to 4-d arrays with multi-dim tids, .shape and #", function()
    local k = weft.kernel{ a1 = A(weft.int32), a2 = A(weft.int32, 2), a3 = A(weft.int32, 3), a4 = A(weft.int32, 4),
      function(a1, a2, a3, a4)
        local i, j, k, l = weft.tid()
        local v = i * 1000 + j * 100 + k * 10 + l
        a4[i][j][k][l] = v
        if l == 0 then a3[i][j][k] = v + #a4 * 10000 end
        if k == 0 and l == 0 then a2[i][j] = a4.shape[3] * 100 + a3.shape[2] * 10 + a2.shape[1] end
        if j == 0 and k == 0 and l == 0 then a1[i] = #a1 end
      end }
    local a1, a2 = weft.zeros(2, weft.int32), weft.zeros({ 2, 3 }, weft.int32)
    local a3, a4 = weft.zeros({ 2, 3, 4 }, weft.int32), weft.zeros({ 2, 3, 4, 5 }, weft.int32)
    weft.launch(k, { 2, 3, 4, 5 }, { a1, a2, a3, a4 })
    local w4, w3, w2 = {}, {}, {}
    for i = 0, 1 do
      w4[i + 1], w3[i + 1], w2[i + 1] = {}, {}, {}
      for j = 0, 2 do
        w4[i + 1][j + 1], w3[i + 1][j + 1] = {}, {}
        w2[i + 1][j + 1] = 5 * 100 + 4 * 10 + 3
        for k2 = 0, 3 do
          w4[i + 1][j + 1][k2 + 1] = {}
          w3[i + 1][j + 1][k2 + 1] = i * 1000 + j * 100 + k2 * 10 + 20000
          for l = 0, 4 do w4[i + 1][j + 1][k2 + 1][l + 1] = i * 1000 + j * 100 + k2 * 10 + l end
        end
      end
    end
    check(a4:totable(), w4)
    check(a3:totable(), w3)
    check(a2:totable(), w2)
    check(a1:totable(), { 2, 2 })
  end)

  it("a[i][j] peels views that funcs take as arrays of fewer dimensions", function()
    local sum1 = weft.func(function(row)
      local s = 0.0
      for j = 0, #row - 1 do s = s + row[j] end
      return s
    end)
    local sum2 = weft.func(function(m)
      local s = 0.0
      for r = 0, m.shape[0] - 1 do s = s + sum1(m[r]) end
      return s
    end)
    local k = weft.kernel{ a = A(weft.float64, 3), o = A(weft.float64, 2), p = A(weft.float64), function(a, o, p)
      local i, j = weft.tid()
      o[i][j] = sum1(a[i][j])
      if j == 0 then p[i] = sum2(a[i]) + a[i][1][2] * 0 end
    end }
    local av = {}
    for i = 1, 2 do
      av[i] = {}
      for j = 1, 3 do
        av[i][j] = {}
        for l = 1, 4 do av[i][j][l] = i * 100 + j * 10 + l end
      end
    end
    local o, p = weft.zeros({ 2, 3 }, weft.float64), weft.zeros(2, weft.float64)
    weft.launch(k, { 2, 3 }, { A(av, weft.float64), o, p })
    local wo, wp = {}, {}
    for i = 1, 2 do
      wo[i] = {}
      wp[i] = 0
      for j = 1, 3 do
        local s = 0
        for l = 1, 4 do s = s + av[i][j][l] end
        wo[i][j] = s
        wp[i] = wp[i] + s
      end
    end
    check(o:totable(), wo)
    check(p:totable(), wp)
  end)

  it("arrays of every scalar type load and store", function()
    local k = weft.kernel{ function(x, o)
      local i = weft.tid()
      o[#o - 1 - i] = x[i]
    end }
    for _, t in ipairs { weft.bool, weft.int8, weft.uint8, weft.int16, weft.uint16, weft.int32, weft.uint32,
                         weft.int64, weft.uint64, weft.float16, weft.float32, weft.float64 } do
      local xs = t == weft.bool and { true, false, false } or { 1, 2, 100 }
      local o = weft.zeros(3, t)
      weft.launch(k, 3, { A(xs, t), o })
      check(o:totable(), { xs[3], xs[2], xs[1] }, nil, t.name)
    end
  end)
end)
