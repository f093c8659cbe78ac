-- Meshes in kernels: closest points, signs, ray casts and box queries
-- against brute force in double precision (spec/helpers/meshes.lua) on a
-- closed torus, a cube, a perturbed sphere (with degenerate triangles at
-- its poles), before and after refit.
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local function mesh_of(pts, idx, opts)
  local m = { points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
  for k, v in pairs(opts or {}) do m[k] = v end
  return weft.Mesh(m)
end

local point_kernel = weft.kernel{
  id = weft.uint64, p = weft.array(vec3), mode = weft.int32, dist = weft.array(weft.float32),
  sign = weft.array(weft.float32), face = weft.array(weft.int32), hit = weft.array(weft.int32),
  function(id, p, mode, dist, sign, face, hit)
    local i = weft.tid()
    local q = weft.mesh_query_point_no_sign(id, p[i], 100.0)
    if mode == 1 then q = weft.mesh_query_point(id, p[i], 100.0) end
    if mode == 2 then q = weft.mesh_query_point_sign_normal(id, p[i], 100.0) end
    if mode == 3 then q = weft.mesh_query_point_sign_winding_number(id, p[i], 100.0) end
    if mode == 4 then q = weft.mesh_query_point_no_sign(id, p[i], 0.05) end
    local c = weft.mesh_eval_position(id, q.face, q.u, q.v)
    dist[i] = weft.length(c - p[i])
    sign[i] = q.sign
    face[i] = q.face
    hit[i] = q.result and 1 or 0
  end }

local function query_points(m, pts, mode)
  local n = #pts
  local dist, sign = weft.zeros(n, weft.float32), weft.zeros(n, weft.float32)
  local face, hit = weft.zeros(n, weft.int32), weft.zeros(n, weft.int32)
  weft.launch(point_kernel, n, { m.id, weft.array(pts, vec3), mode, dist, sign, face, hit })
  return dist:totable(), sign:totable(), face:totable(), hit:totable()
end

local function random_points(n, lo, hi, seed)
  local r, pts = G.rng(seed), {}
  for i = 1, n do pts[i] = { r(lo, hi), r(lo, hi), r(lo, hi) } end
  return pts
end

local shapes = {
  torus = function() return G.torus(1.0, 0.4, 24, 12) end,
  cube = function() return G.cube(1.0) end,
  sphere = function() return G.sphere(20, 12, 0.15) end,
}

describe("mesh_query_point", function()
  for name, make in pairs(shapes) do
    it("finds the closest point on a " .. name .. " (brute force)", function()
      local pts, idx = make()
      local m = mesh_of(pts, idx)
      local ps = random_points(200, -2, 2, 7)
      local dist, _, face, hit = query_points(m, ps, 0)
      for i, p in ipairs(ps) do
        local d = G.closest(pts, idx, p)
        assert.are.equal(1, hit[i])
        assert.is_true(face[i] >= 0 and face[i] < #idx / 3)
        if math.abs(dist[i] - d) > 1e-4 * math.max(1, d) then
          error(string.format("%s point %d: distance %.7g, brute force %.7g", name, i, dist[i], d))
        end
      end
    end)

    it("tells inside from outside on a " .. name .. " (parity, normal, winding number)", function()
      local pts, idx = make()
      local m = mesh_of(pts, idx, { support_winding_number = true })
      local ps, want = {}, {}
      for _, p in ipairs(random_points(300, -1.6, 1.6, 11)) do
        local d = G.closest(pts, idx, p)
        if d > 1e-3 then -- points on the surface have no side
          ps[#ps + 1] = p
          want[#ps] = G.winding(pts, idx, p) > 0.5 and -1 or 1
        end
      end
      for mode = 1, 3 do
        local _, sign = query_points(m, ps, mode)
        for i = 1, #ps do
          if sign[i] ~= want[i] then
            error(string.format("%s mode %d point %d (%g %g %g): sign %g, want %g", name, mode, i,
                                ps[i][1], ps[i][2], ps[i][3], sign[i], want[i]))
          end
        end
      end
    end)
  end

  it("puts points on the surface at distance 0 and respects max_dist", function()
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    local m = mesh_of(pts, idx)
    local ps = {}
    for f = 0, 40 do -- vertices and face centroids
      local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
      ps[#ps + 1] = a
      ps[#ps + 1] = G.mul(G.add(G.add(a, b), c), 1 / 3)
    end
    local dist, _, _, hit = query_points(m, ps, 0)
    for i = 1, #ps do
      assert.are.equal(1, hit[i])
      assert.is_true(dist[i] < 1e-5, "distance " .. dist[i])
    end
    -- max_dist 0.05: points farther than that have no result
    local far = { { 0, 0, 0 }, { 3, 0, 0 }, { 1.4, 0, 0.03 } }
    local _, _, _, h = query_points(m, far, 4)
    assert.are.same({ 0, 0, 1 }, h)
  end)
end)

local ray_kernel = weft.kernel{
  id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3), t = weft.array(weft.float32),
  face = weft.array(weft.int32), sign = weft.array(weft.float32), nrm = weft.array(vec3),
  uvw = weft.array(vec3),
  function(id, o, d, t, face, sign, nrm, uvw)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, o[i], d[i], 1.0e6)
    if r.result then
      t[i] = r.t
      face[i] = r.face
      sign[i] = r.sign
      nrm[i] = r.normal
      uvw[i] = weft.mesh_eval_position(id, r.face, r.u, r.v)
    else
      t[i] = -1.0
      face[i] = -1
    end
  end }

local function cast(m, os, ds)
  local n = #os
  local t, face, sign = weft.zeros(n, weft.float32), weft.zeros(n, weft.int32), weft.zeros(n, weft.float32)
  local nrm, hitp = weft.zeros(n, vec3), weft.zeros(n, vec3)
  weft.launch(ray_kernel, n, { m.id, weft.array(os, vec3), weft.array(ds, vec3), t, face, sign, nrm, hitp })
  return t:totable(), face:totable(), sign:totable(), nrm:totable(), hitp:totable()
end

describe("mesh_query_furthest_point_no_sign", function()
  it("finds the furthest point (a vertex) beyond min_dist", function()
    local pts, idx = G.sphere(16, 10, 0.2)
    local m = mesh_of(pts, idx)
    local ps = random_points(50, -1, 1, 21)
    ps[#ps + 1] = { 0, 0, 40 } -- far outside: the other pole
    local got = G.query_furthest(weft, m, ps)
    for i, p in ipairs(ps) do
      local far = 0
      for _, v in ipairs(pts) do far = math.max(far, G.len(G.sub(v, p))) end
      assert.is_true(math.abs(got[i] - far) <= 1e-4 * far, string.format("point %d: %g, brute %g", i, got[i], far))
    end
  end)
end)

describe("mesh_query_ray", function()
  it("hits and misses as brute force does on a torus", function()
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    local m = mesh_of(pts, idx)
    local r = G.rng(3)
    local os, ds = {}, {}
    for i = 1, 300 do
      os[i] = { r(-3, 3), r(-3, 3), r(-3, 3) }
      local target = { r(-1.4, 1.4), r(-1.4, 1.4), r(-0.5, 0.5) }
      ds[i] = G.sub(target, os[i])
    end
    local t, face, sign, nrm, hitp = cast(m, os, ds)
    local hits = 0
    for i = 1, #os do
      local bt, bf = G.raycast(pts, idx, os[i], ds[i])
      if bt then
        hits = hits + 1
        assert.is_true(math.abs(t[i] - bt) <= 1e-4 * math.max(1, bt), string.format("ray %d: t %g, brute %g", i, t[i], bt))
        -- the hit point is on the ray and the normal faces the ray
        local p = G.add(os[i], G.mul(ds[i], t[i]))
        assert.is_true(G.len(G.sub(p, hitp[i])) < 1e-4 * G.len(ds[i]) * math.max(1, t[i]))
        assert.are.equal(G.dot(ds[i], nrm[i]) < 0 and 1 or -1, sign[i])
        assert.is_true(face[i] == bf or math.abs(t[i] - bt) < 1e-6)
      else
        assert.are.equal(-1, face[i], "ray " .. i .. " should miss")
      end
    end
    assert.is_true(hits > 100)
  end)

  it("hits edges and vertices shared by triangles, and from inside", function()
    local pts, idx = G.cube(1.0)
    local m = mesh_of(pts, idx)
    local os = {
      { -2, 0, 0 },   -- the diagonal edge splitting the x = -1 face
      { -2, -2, -2 }, -- the corner (-1, -1, -1)
      { -2, 1, 0.3 }, -- along the plane y = 1, onto the edge at x = -1
      { -2, 1.5, 0 }, -- past the cube
      { 0, 0, 0 },    -- from inside: the back side of a face
      { 2, 0.5, 0.5 },-- pointing away
    }
    local ds = { { 1, 0, 0 }, { 1, 1, 1 }, { 1, 0, 0 }, { 1, 0, 0 }, { 0, 0, 1 }, { 1, 0, 0 } }
    local t, face, sign = cast(m, os, ds)
    assert.is_true(math.abs(t[1] - 1) < 1e-6 and face[1] >= 0)
    assert.is_true(math.abs(t[2] - 1) < 1e-6 and face[2] >= 0)
    assert.is_true(math.abs(t[3] - 1) < 1e-6 and face[3] >= 0)
    assert.are.equal(-1, face[4])
    assert.is_true(math.abs(t[5] - 1) < 1e-6)
    assert.are.equal(-1, sign[5]) -- leaving through the face: the ray runs along its normal
    assert.are.equal(-1, face[6])
  end)

  it("casts rays through degenerate triangles without NaN", function()
    local pts = { { 0, 0, 0 }, { 1, 0, 0 }, { 2, 0, 0 }, { 0, 1, 0 }, { 0, 0, 0 } }
    local idx = { 0, 1, 2, 0, 0, 3, 0, 1, 3, 4, 0, 1 } -- collinear, repeated, a real one, a point
    local m = mesh_of(pts, idx)
    local t, face = cast(m, { { 0.2, 0.2, 1 }, { 0.5, 0, 1 }, { 3, 3, 1 } },
                         { { 0, 0, -1 }, { 0, 0, -1 }, { 0, 0, -1 } })
    assert.is_true(math.abs(t[1] - 1) < 1e-6)
    assert.are.equal(2, face[1])
    assert.is_true(t[2] == t[2]) -- an edge of the real face, or a miss: never NaN
    assert.are.equal(-1, face[3])
    local dist = query_points(m, { { 0.5, -1, 0 }, { 3, 0, 0 } }, 0)
    assert.is_true(math.abs(dist[1] - 1) < 1e-6 and math.abs(dist[2] - 1) < 1e-6)
  end)
end)

-- The limits the walks compare distances with as keys (query.h:
-- glim_key): infinite, zero, negative and NaN limits behave as the float
-- comparisons do.
describe("mesh query limits", function()
  local limit_kernel = weft.kernel{
    id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3), lim = weft.array(weft.float32),
    t = weft.array(weft.float32), dist = weft.array(weft.float32),
    function(id, o, d, lim, t, dist)
      local i = weft.tid()
      local r = weft.mesh_query_ray(id, o[i], d[i], lim[i])
      t[i] = r.result and r.t or -1.0
      local q = weft.mesh_query_point_no_sign(id, o[i], lim[i])
      dist[i] = q.result and weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - o[i]) or -1.0
    end }

  it("takes infinite, zero, negative and NaN ray lengths and distances", function()
    local pts, idx = G.cube(1.0)
    local m = mesh_of(pts, idx)
    local inf, nan = math.huge, 0 / 0
    local lims = { inf, 1.0e6, 2.5, 1.5, 0.0, -1.0, nan }
    local os, ds = {}, {}
    for i = 1, #lims do os[i], ds[i] = { 0, 0, 3 }, { 0, 0, -1 } end
    local n = #lims
    local t, dist = weft.zeros(n, weft.float32), weft.zeros(n, weft.float32)
    weft.launch(limit_kernel, n, { m.id, weft.array(os, vec3), weft.array(ds, vec3),
                                   weft.array(lims, weft.float32), t, dist })
    t, dist = t:totable(), dist:totable()
    -- the cube's face z = 1 lies 2 away along the ray and from the point
    local expect = { 2, 2, 2, -1, -1, -1, -1 }
    for i = 1, n do
      local what = "limit " .. tostring(lims[i])
      if expect[i] < 0 then
        assert.are.equal(-1, t[i], what .. ": no hit")
        assert.are.equal(-1, dist[i], what .. ": no closest point")
      else
        assert.is_true(math.abs(t[i] - 2) < 1e-6, what .. ": t " .. t[i])
        assert.is_true(math.abs(dist[i] - 2) < 1e-6, what .. ": distance " .. dist[i])
      end
    end
  end)
end)

describe("mesh_query_aabb", function()
  local function check_boxes(m, pts, idx, seed)
    local r = G.rng(seed)
    local los, his = {}, {}
    for i = 1, 60 do
      local c, h = { r(-1.6, 1.6), r(-1.6, 1.6), r(-0.6, 0.6) }, { r(0, 0.4), r(0, 0.4), r(0, 0.4) }
      los[i], his[i] = G.sub(c, h), G.add(c, h)
    end
    local nf = #idx / 3
    local sets, twice = G.query_boxes(weft, m, nf, los, his)
    assert.are.equal(0, twice, "faces returned twice")
    for i = 1, #los do
      local got = sets[i]
      for f = 0, nf - 1 do
        local want = G.face_box_overlap(pts, idx, f, los[i], his[i])
        if want ~= (got[f] or false) then
          error(string.format("box %d face %d: overlap %s, returned %s", i, f, tostring(want), tostring(got[f])))
        end
      end
    end
  end

  it("returns exactly the faces whose bounds overlap the box", function()
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    check_boxes(mesh_of(pts, idx), pts, idx, 5)
  end)

  it("follows the points after refit", function()
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    local m = mesh_of(pts, idx)
    local P = m.points
    local moved = {}
    for i, p in ipairs(pts) do
      moved[i] = { p[1] * 0.8 + 0.1, p[2] * 1.2, p[3] + 0.05 * math.sin(3 * p[1]) }
      P[i - 1] = moved[i]
    end
    m:refit()
    check_boxes(m, moved, idx, 9)
    local ps = random_points(100, -2, 2, 13)
    local dist = query_points(m, ps, 0)
    for i, p in ipairs(ps) do
      local d = G.closest(moved, idx, p)
      assert.is_true(math.abs(dist[i] - d) <= 1e-4 * math.max(1, d))
    end
  end)
end)

describe("refit of a large mesh (threaded)", function()
  it("casts as brute force after the points move", function()
    local pts, idx = G.torus(1.0, 0.4, 200, 180) -- 72k triangles: refit splits over threads
    local m = mesh_of(pts, idx)
    local moved = {}
    for i, p in ipairs(pts) do
      moved[i] = { p[1] * 0.9, p[2] + 0.1 * p[3], p[3] * 1.2 }
    end
    weft.copy(m.points, weft.array(moved, vec3))
    m:refit()
    local r = G.rng(4)
    local os, ds = {}, {}
    for i = 1, 8 do
      os[i] = { r(-3, 3), r(-3, 3), 2.5 }
      ds[i] = G.sub({ r(-1.2, 1.2), r(-1.2, 1.2), 0 }, os[i])
    end
    local t = cast(m, os, ds)
    for i = 1, #os do
      local bt = G.raycast(moved, idx, os[i], ds[i]) or -1
      assert.is_true(math.abs(t[i] - bt) <= 1e-4 * math.max(1, bt), string.format("ray %d: %g vs %g", i, t[i], bt))
    end
  end)
end)

describe("mesh element access", function()
  it("reads points, indices, velocities and face normals", function()
    local pts, idx = G.cube(1.0)
    local vel = {}
    for i, p in ipairs(pts) do vel[i] = { p[1] * 2, 0, i } end
    local m = mesh_of(pts, idx, { velocities = weft.array(vel, vec3) })
    local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), ix = weft.array(weft.int32),
      function(id, o, ix)
        local i = weft.tid()
        o[4 * i] = weft.mesh_get_point(id, i)
        o[4 * i + 1] = weft.mesh_eval_face_normal(id, i)
        o[4 * i + 2] = weft.mesh_eval_velocity(id, i, 0.25, 0.5)
        o[4 * i + 3] = weft.mesh_eval_position(id, i, 1.0, 0.0)
        ix[i] = weft.mesh_get_index(id, i)
      end }
    local o, ix = weft.zeros(32, vec3), weft.zeros(8, weft.int32)
    weft.launch(k, 8, { m.id, o, ix })
    local ot, it_ = o:totable(), ix:totable()
    for i = 0, 7 do
      assert.are.same(pts[i + 1], ot[4 * i + 1])
      assert.are.equal(idx[i + 1], it_[i + 1])
      local a, b, c = pts[idx[3 * i + 1] + 1], pts[idx[3 * i + 2] + 1], pts[idx[3 * i + 3] + 1]
      local n = G.cross(G.sub(b, a), G.sub(c, a))
      n = G.mul(n, 1 / G.len(n))
      for j = 1, 3 do assert.is_true(math.abs(ot[4 * i + 2][j] - n[j]) < 1e-6) end
      local va, vb, vc = vel[idx[3 * i + 1] + 1], vel[idx[3 * i + 2] + 1], vel[idx[3 * i + 3] + 1]
      local want = G.add(G.add(G.mul(va, 0.25), G.mul(vb, 0.5)), G.mul(vc, 0.25))
      for j = 1, 3 do assert.is_true(math.abs(ot[4 * i + 3][j] - want[j]) < 1e-5) end
      assert.are.same(a, ot[4 * i + 4])
    end
  end)
end)
