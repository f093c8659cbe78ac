-- Closest points on the CPU's leaf path (src/geom/query.h): 4 triangles a
-- test in vector lanes, loaded from any slot of the leaf-order blocks,
-- and culled by each triangle's plane-and-ball bound. Checked against
-- brute force in double on meshes with leaves of every size, degenerate
-- and sliver triangles, points far off, near and on the surface, before
-- and after refits; and, under scripts/cuda-emu, against the emulated
-- device, whose build of the same code tests one triangle at a time with
-- no lanes: face, u and v must agree to the bit.
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

  it("give the emulated device's one-lane closest points and ray hits to the bit (scripts/cuda-emu)", function()
    if not weft.is_cuda_available() then
      pending("no CUDA device: run under scripts/cuda-emu")
      return
    end
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
  end)
end)
