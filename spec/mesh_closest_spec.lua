-- Closest points on the CPU's leaf path (src/geom/query.h): 4 triangles a
-- test in vector lanes, loaded from any slot of the leaf-order blocks,
-- and culled by each triangle's plane-and-ball bound. Checked against
-- brute force in double on meshes with leaves of every size, degenerate
-- and sliver triangles, points far off, near and on the surface, before
-- and after refits; and, under scripts/cuda-emu, against the emulated
-- device, whose build of the same code tests one triangle at a time with
-- no lanes: face, u and v must agree to the bit.
local ffi = require "ffi"
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local k = weft.kernel{ id = weft.uint64, p = weft.array(vec3), face = weft.array(weft.int32),
  u = weft.array(weft.float32), v = weft.array(weft.float32), dist = weft.array(weft.float32),
  function(id, p, face, u, v, dist)
    local i = weft.tid()
    local q = weft.mesh_query_point_no_sign(id, p[i], 50.0)
    face[i] = q.result and q.face or -1
    u[i], v[i] = q.u, q.v
    dist[i] = q.result and weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - p[i]) or -1.0
  end }

-- rays from each point towards the origin, on the same leaf lanes
local kr = weft.kernel{ id = weft.uint64, p = weft.array(vec3), face = weft.array(weft.int32),
  t = weft.array(weft.float32), u = weft.array(weft.float32), v = weft.array(weft.float32),
  function(id, p, face, t, u, v)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, p[i], weft.vec3(0.0, 0.0, 0.0) - p[i], 1.0e6)
    face[i] = r.result and r.face or -1
    t[i], u[i], v[i] = r.t, r.u, r.v
  end }

local function rays(m, pts, dev)
  local opt = { device = dev }
  local n = #pts
  local out = { weft.zeros(n, weft.int32, opt) }
  for c = 2, 4 do out[c] = weft.zeros(n, weft.float32, opt) end
  weft.launch(kr, n, { m.id, weft.array(pts, vec3, opt), out[1], out[2], out[3], out[4] }, opt)
  for c = 1, 4 do out[c] = out[c]:to("cpu"):totable() end
  return out
end

local function query(m, pts, dev)
  local opt = { device = dev }
  local n = #pts
  local F, U, V, D = weft.zeros(n, weft.int32, opt), weft.zeros(n, weft.float32, opt),
    weft.zeros(n, weft.float32, opt), weft.zeros(n, weft.float32, opt)
  weft.launch(k, n, { m.id, weft.array(pts, vec3, opt), F, U, V, D }, opt)
  return F:to("cpu"):totable(), U:to("cpu"):totable(), V:to("cpu"):totable(), D:to("cpu"):totable()
end

-- soups of n triangles (leaves of 1 .. n slots), with every third one
-- degenerate in a different way: a point, a sliver, and with segs a
-- segment (three distinct collinear corners). gclosest_tri takes such a
-- segment for a face when rounding leaves its area a little off zero, and
-- gives weights off the segment: only the bitwise comparison uses them.
local function soup(n, r, segs)
  local pts, idx = {}, {}
  for f = 0, n - 1 do
    local c = { r(-1, 1), r(-1, 1), r(-1, 1) }
    local t = {}
    for v = 1, 3 do t[v] = { c[1] + r(-0.3, 0.3), c[2] + r(-0.3, 0.3), c[3] + r(-0.3, 0.3) } end
    if f % 9 == 2 then t[2], t[3] = t[1], t[1] end
    if segs and f % 9 == 5 then t[3] = G.add(t[1], G.mul(G.sub(t[2], t[1]), 0.25)) end
    if f % 9 == 8 then t[3] = G.add(G.add(t[1], G.mul(G.sub(t[2], t[1]), 0.5)), { 1e-6, 0, 0 }) end
    for v = 1, 3 do
      pts[3 * f + v] = t[v]
      idx[3 * f + v] = 3 * f + v - 1
    end
  end
  return pts, idx
end

-- query points: far, near, and on random triangles (barycentric)
local function points(pts, idx, r, n)
  local o = {}
  for i = 1, n do
    if i % 3 == 0 then
      local f = math.floor(r(0, #idx / 3))
      local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
      local x, y = r(0, 1), r(0, 1)
      if x + y > 1 then x, y = 1 - x, 1 - y end
      o[i] = G.add(G.add(G.mul(a, x), G.mul(b, y)), G.mul(c, 1 - x - y))
    else
      local s = i % 3 == 1 and 3 or 1.3
      o[i] = { r(-s, s), r(-s, s), r(-s, s) }
    end
  end
  return o
end

-- every answer at the brute-force distance, its face's own distance too
local function check(pts, idx, o, res, what)
  local F, U, V, D = res[1], res[2], res[3], res[4]
  for i = 1, #o do
    local bd = G.closest(pts, idx, o[i])
    local f = F[i]
    assert.is_true(f >= 0 and f < #idx / 3, what .. ": point " .. i .. " found no face")
    assert.is_true(U[i] == U[i] and V[i] == V[i], what .. ": NaN weights at point " .. i)
    local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
    local fd = G.len(G.sub(G.tri_closest(a, b, c, o[i]), o[i]))
    local tol = 1e-5 * math.max(1, bd)
    assert.is_true(math.abs(D[i] - bd) <= tol and math.abs(fd - bd) <= tol,
                   string.format("%s: point %d: distance %.8g (face %d at %.8g), brute force %.8g",
                                 what, i, D[i], f, fd, bd))
  end
end

local function meshes(segs)
  local r = G.rng(41)
  local list = {}
  for _, n in ipairs { 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 17, 40, 130 } do
    local pts, idx = soup(n, r, segs)
    list[#list + 1] = { n .. "-triangle soup", pts, idx }
  end
  local tp, ti = G.torus(1, 0.4, 40, 16)
  list[#list + 1] = { "torus", tp, ti }
  local cp, ci = G.cube(0.8)
  list[#list + 1] = { "cube", cp, ci }
  local sp, si = G.sphere(20, 12, 0.15)
  list[#list + 1] = { "perturbed sphere", sp, si }
  return list, r
end

-- flat triangles, where the face's denominator is rounding noise: corners
-- exactly on a line (multiples of 1/64, exact in floats) with the third
-- between or outside the other two, on a line as rounded to floats,
-- nearly on a line (heights 1e-6 to 1e-2 of the edge), two corners equal,
-- all three equal; with query points near them, on their lines and far
local f32 = ffi.new("float[1]")
local function round32(x) f32[0] = x return f32[0] end
local function flat_soup(r)
  local pts, idx, exact = {}, {}, {}
  local function q64(x) return math.floor(x * 64) / 64 end
  for f = 0, 47 do
    local kind = f % 8
    local a = { q64(r(-1, 1)), q64(r(-1, 1)), q64(r(-1, 1)) }
    local d = { math.floor(r(-8, 8)) / 64, math.floor(r(-8, 8)) / 64, math.floor(r(1, 8)) / 64 }
    local t
    if kind == 0 then t = { a, G.add(a, G.mul(d, 4)), G.add(a, d) }
    elseif kind == 1 then t = { G.add(a, d), G.add(a, G.mul(d, -3)), G.add(a, G.mul(d, 5)) }
    elseif kind == 2 then t = { G.add(a, G.mul(d, 2)), a, G.add(a, G.mul(d, 6)) }
    else
      local b = G.add(a, { r(-0.5, 0.5), r(-0.5, 0.5), r(-0.5, 0.5) })
      local c = G.add(a, G.mul(G.sub(b, a), r(-0.5, 1.5)))
      if kind == 4 then
        local h = ({ 1e-6, 1e-4, 1e-2 })[f % 3 + 1] * G.len(G.sub(b, a))
        local n = G.cross(G.sub(b, a), { r(-1, 1), r(-1, 1), r(-1, 1) })
        c = G.add(c, G.mul(n, h / G.len(n)))
      end
      t = ({ [3] = { a, b, c }, [4] = { a, b, c }, [5] = { a, a, b }, [6] = { b, a, b },
             [7] = { b, b, b } })[kind]
      if kind == 6 and f % 16 == 14 then t = { a, b, b } end
    end
    for v = 1, 3 do
      pts[3 * f + v] = { round32(t[v][1]), round32(t[v][2]), round32(t[v][3]) }
      idx[3 * f + v] = 3 * f + v - 1
    end
    exact[f] = kind ~= 3 and kind ~= 4
  end
  return pts, idx, exact
end

local function flat_points(pts, idx, r)
  local o = {}
  for f = 0, #idx / 3 - 1 do
    local a, b = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 3] + 1]
    for i = 1, 6 do
      local q
      if i <= 3 then -- on the line through two corners, a little off it
        q = G.add(G.add(a, G.mul(G.sub(b, a), r(-0.5, 1.5))), { r(-1e-3, 1e-3), r(-1e-3, 1e-3), 0 })
      elseif i <= 5 then
        q = G.add(a, { r(-0.4, 0.4), r(-0.4, 0.4), r(-0.4, 0.4) })
      else
        q = { r(-3, 3), r(-3, 3), r(-3, 3) }
      end
      o[#o + 1] = { round32(q[1]), round32(q[2]), round32(q[3]) }
    end
  end
  return o
end

-- the nearest of the three edges' points to p (in double)
local function edge_dist(a, b, c, p)
  local best = math.huge
  for _, e in ipairs { { a, b }, { b, c }, { c, a } } do
    local ab = G.sub(e[2], e[1])
    local l2 = G.dot(ab, ab)
    local s = l2 > 0 and math.max(0, math.min(1, G.dot(G.sub(p, e[1]), ab) / l2)) or 0
    best = math.min(best, G.len(G.sub(G.add(e[1], G.mul(ab, s)), p)))
  end
  return best
end

-- every answer a point of its face (on the segment of its corners when
-- they lie on a line), at a distance between the brute-force distance to
-- the triangles and that to their edges (equal for segments and points)
local function check_flat(pts, idx, exact, o, res, what)
  local F, U, V, D = res[1], res[2], res[3], res[4]
  for i = 1, #o do
    local p, f = o[i], F[i]
    assert.is_true(f >= 0 and f < #idx / 3, what .. ": point " .. i .. " found no face")
    local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
    local q = G.add(G.add(G.mul(a, U[i]), G.mul(b, V[i])), G.mul(c, 1 - U[i] - V[i]))
    local off = exact[f] and edge_dist(a, b, c, q) or G.len(G.sub(G.tri_closest(a, b, c, q), q))
    local lo, hi = math.huge, math.huge
    for g = 0, #idx / 3 - 1 do
      local ga, gb, gc = pts[idx[3 * g + 1] + 1], pts[idx[3 * g + 2] + 1], pts[idx[3 * g + 3] + 1]
      local e = edge_dist(ga, gb, gc, p)
      lo = math.min(lo, exact[g] and e or G.len(G.sub(G.tri_closest(ga, gb, gc, p), p)))
      hi = math.min(hi, e)
    end
    local tol = 1e-5 * math.max(1, hi)
    local d = G.len(G.sub(q, p))
    assert.is_true(off <= tol and d >= lo - tol and d <= hi + tol and math.abs(D[i] - d) <= tol,
                   string.format("%s: point %d: face %d (%s), u %.9g v %.9g: %.3g off the face, "
                                 .. "distance %.9g (kernel %.9g), brute force %.9g .. %.9g", what,
                                 i, f, exact[f] and "a segment or a point" or "nearly flat",
                                 U[i], V[i], off, d, D[i], lo, hi))
  end
end

describe("closest points on the CPU", function()
  it("match brute force with leaves of 1 to 130 triangles, degenerate ones, before and after refit", function()
    local list, r = meshes()
    for _, e in ipairs(list) do
      local what, pts, idx = e[1], e[2], e[3]
      local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
      local o = points(pts, idx, r, 60)
      check(pts, idx, o, { query(m, o, "cpu") }, what)
      -- every point moves: the bounds of the old triangles would cull wrongly
      local moved = {}
      for i, p in ipairs(pts) do moved[i] = { p[2] * 1.2 - 0.3, -p[1] * 0.8, p[3] * 1.5 + 0.2 * p[1] } end
      weft.copy(m.points, weft.array(moved, vec3))
      m:refit()
      local o2 = points(moved, idx, r, 60)
      check(moved, idx, o2, { query(m, o2, "cpu") }, what .. " after refit")
    end
  end)

  it("lie on segments and points: corners on a line, nearly, or equal", function()
    local r = G.rng(7)
    for round = 1, 3 do
      local pts, idx, exact = flat_soup(r)
      local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
      local o = flat_points(pts, idx, r)
      check_flat(pts, idx, exact, o, { query(m, o, "cpu") }, "flat soup " .. round)
    end
  end)

  it("give the emulated device's one-lane closest points and ray hits to the bit (scripts/cuda-emu)", function()
    if require("helpers.cuda").missing() then return end
    local list, r = meshes(true)
    for _, e in ipairs(list) do
      local what, pts, idx = e[1], e[2], e[3]
      local o = points(pts, idx, r, 60)
      local res, hits = {}, {}
      for j, dev in ipairs { "cpu", "cuda:0" } do
        local opt = { device = dev }
        local m = weft.Mesh{ points = weft.array(pts, vec3, opt), indices = weft.array(idx, weft.int32, opt) }
        res[j] = { query(m, o, dev) }
        hits[j] = rays(m, o, dev)
      end
      for c = 1, 3 do assert.are.same(res[1][c], res[2][c], what) end
      assert.are.same(hits[1], hits[2], what .. ": rays")
      for i = 1, #o do assert.is_true(res[1][2][i] == res[1][2][i] and res[1][3][i] == res[1][3][i]) end
    end
    -- the flat triangles' fallback (gclosest_flat) on both, to the bit
    local r2 = G.rng(7)
    for round = 1, 3 do
      local pts, idx, exact = flat_soup(r2)
      local o = flat_points(pts, idx, r2)
      local res = {}
      for j, dev in ipairs { "cpu", "cuda:0" } do
        local opt = { device = dev }
        local m = weft.Mesh{ points = weft.array(pts, vec3, opt), indices = weft.array(idx, weft.int32, opt) }
        res[j] = { query(m, o, dev) }
      end
      check_flat(pts, idx, exact, o, res[2], "flat soup " .. round .. " on cuda:0")
      for c = 1, 3 do assert.are.same(res[1][c], res[2][c], "flat soup " .. round) end
    end
  end)
end)
