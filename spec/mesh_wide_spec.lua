-- The 4-wide tree that every mesh query walks (src/geom/bvh4.c): ray
-- casts, closest and furthest points, winding numbers and box queries on
-- triangle soups of every size from one triangle (a leaf root) up, against
-- brute force in double precision, before and after a refit that moves
-- every point far (so lanes, and their winding-number data, must take
-- their new values).
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3),
  t = weft.array(weft.float32), dist = weft.array(weft.float32),
  function(id, o, d, t, dist)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, o[i], d[i], 1.0e6)
    t[i] = r.result and r.t or -1.0
    local q = weft.mesh_query_point_no_sign(id, o[i], 100.0)
    dist[i] = q.result and weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - o[i]) or -1.0
  end }

-- the sign of (winding number > thr[i]) at p[i]
local wind_k = weft.kernel{ id = weft.uint64, p = weft.array(vec3), acc = weft.float32,
  thr = weft.array(weft.float32), s = weft.array(weft.float32),
  function(id, p, acc, thr, s)
    local i = weft.tid()
    s[i] = weft.mesh_query_point_sign_winding_number(id, p[i], 100.0, acc, thr[i]).sign
  end }

local function soup(n, r, s)
  local pts, idx = {}, {}
  for f = 0, n - 1 do
    local c = { r(-s, s), r(-s, s), r(-s, s) }
    for v = 1, 3 do
      pts[3 * f + v] = { c[1] + r(-0.3, 0.3), c[2] + r(-0.3, 0.3), c[3] + r(-0.3, 0.3) }
      idx[3 * f + v] = 3 * f + v - 1
    end
  end
  return pts, idx
end

-- rays from points around the soup aimed at a random triangle's centroid
-- (most hit), and the same points for closest points
local function check(m, pts, idx, r, what)
  local n, o, d = #idx / 3, {}, {}
  for i = 1, 40 do
    o[i] = { r(-3, 3), r(-3, 3), r(-3, 3) }
    local f = math.floor(r(0, n))
    local c = G.mul(G.add(G.add(pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1]), pts[idx[3 * f + 3] + 1]), 1 / 3)
    d[i] = G.sub(c, o[i])
  end
  local T, D = weft.zeros(#o, weft.float32), weft.zeros(#o, weft.float32)
  weft.launch(k, #o, { m.id, weft.array(o, vec3), weft.array(d, vec3), T, D })
  local t, dist = T:totable(), D:totable()
  for i = 1, #o do
    local bt = G.raycast(pts, idx, o[i], d[i]) or -1
    assert.is_true(math.abs(t[i] - bt) <= 1e-4 * math.max(1, bt),
                   string.format("%s: ray %d: t %.7g, brute force %.7g", what, i, t[i], bt))
    local bd = G.closest(pts, idx, o[i])
    assert.is_true(math.abs(dist[i] - bd) <= 1e-4 * math.max(1, bd),
                   string.format("%s: point %d: distance %.7g, brute force %.7g", what, i, dist[i], bd))
  end
end

-- furthest points, winding numbers (exact: every triangle's solid angle
-- summed once, so the value lies between thresholds just below and above
-- brute force's) and box queries (exactly the faces whose bounds overlap)
local function check_more(m, pts, idx, r, what)
  local n, ps, thr = #idx / 3, {}, {}
  for i = 1, 30 do
    ps[i] = { r(-3, 3), r(-3, 3), r(-3, 3) }
  end
  local got = G.query_furthest(weft, m, ps)
  for i, p in ipairs(ps) do
    local far = -1
    for f = 0, n - 1 do
      for v = 1, 3 do far = math.max(far, G.len(G.sub(pts[idx[3 * f + v] + 1], p))) end
    end
    assert.is_true(math.abs(got[i] - far) <= 1e-4 * far,
                   string.format("%s: furthest %d: %.7g, brute force %.7g", what, i, got[i], far))
  end
  local want = {}
  for i, p in ipairs(ps) do
    local w = G.winding(pts, idx, p)
    thr[2 * i - 1], thr[2 * i], want[2 * i - 1], want[2 * i] = w - 2e-3, w + 2e-3, -1, 1
  end
  local ps2 = {}
  for i = 1, #thr do ps2[i] = ps[math.ceil(i / 2)] end
  local S = weft.zeros(#ps2, weft.float32)
  weft.launch(wind_k, #ps2, { m.id, weft.array(ps2, vec3), 1e30, weft.array(thr, weft.float32), S })
  local sign = S:totable()
  for i = 1, #ps2 do
    assert.are.equal(want[i], sign[i], string.format("%s: winding number at point %d, threshold %.7g",
                                                     what, math.ceil(i / 2), thr[i]))
  end
  local los, his = {}, {}
  for i = 1, 30 do
    local c, h = { r(-2, 2), r(-2, 2), r(-2, 2) }, { r(0, 0.6), r(0, 0.6), r(0, 0.6) }
    los[i], his[i] = G.sub(c, h), G.add(c, h)
  end
  local sets, twice = G.query_boxes(weft, m, n, los, his)
  assert.are.equal(0, twice, what .. ": faces returned twice")
  for i = 1, #los do
    for f = 0, n - 1 do
      local o = G.face_box_overlap(pts, idx, f, los[i], his[i])
      assert.are.equal(o, sets[i][f] or false, string.format("%s: box %d face %d", what, i, f))
    end
  end
end

describe("the 4-wide mesh tree", function()
  it("answers every query as brute force, from 1 to 400 triangles, and after refit", function()
    local r = G.rng(29)
    for _, n in ipairs { 1, 2, 3, 4, 5, 6, 9, 13, 17, 33, 64, 150, 400 } do
      local pts, idx = soup(n, r, 1.5)
      local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32),
                           support_winding_number = true }
      check(m, pts, idx, r, n .. " triangles")
      check_more(m, pts, idx, r, n .. " triangles")
      -- every point moves far: the old boxes would miss most of the new triangles
      local moved = {}
      for i, p in ipairs(pts) do moved[i] = { -p[2] * 1.3 + 0.5, p[3] * 0.7, p[1] - 0.4 } end
      weft.copy(m.points, weft.array(moved, vec3))
      m:refit()
      check(m, moved, idx, r, n .. " triangles after refit")
      check_more(m, moved, idx, r, n .. " triangles after refit")
    end
  end)

  -- meshes of 65536 triangles and more refit on the thread pool, in
  -- subtrees, then the lanes in node ranges: every lane must take its
  -- new box, which a fresh mesh over the moved points tells (its rays and
  -- closest points are the same numbers)
  it("refits large meshes on the thread pool as a fresh build over the moved points", function()
    local pts, idx = G.torus(1, 0.4, 256, 130) -- 66560 triangles
    local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
    local moved = {}
    for i, p in ipairs(pts) do
      moved[i] = { p[1] * 0.5 + p[3] * 0.8, p[2] * 1.7 - 0.3, p[3] * 2.5 + math.sin(3 * p[1]) }
    end
    local MP = weft.array(moved, vec3)
    weft.copy(m.points, MP)
    m:refit()
    local fresh = weft.Mesh{ points = MP, indices = weft.array(idx, weft.int32) }
    local r, o, d = G.rng(31), {}, {}
    for i = 1, 300 do
      o[i] = { r(-3, 3), r(-3, 3), r(-3, 3) }
      d[i] = G.sub(moved[math.floor(r(1, #moved))], o[i])
    end
    local O, D = weft.array(o, vec3), weft.array(d, vec3)
    local res = {}
    for j, mesh in ipairs { m, fresh } do
      local T, C = weft.zeros(#o, weft.float32), weft.zeros(#o, weft.float32)
      weft.launch(k, #o, { mesh.id, O, D, T, C })
      res[j] = { T:totable(), C:totable() }
    end
    local hits = 0
    for i = 1, #o do
      if res[2][1][i] >= 0 then hits = hits + 1 end
      assert.are.equal(res[2][1][i], res[1][1][i], "ray " .. i)
      assert.are.equal(res[2][2][i], res[1][2][i], "point " .. i)
    end
    assert.is_true(hits > 200, hits .. " rays hit")
    -- box queries on the refit tree: exactly the faces overlapping
    local los, his, nf = {}, {}, #idx / 3
    for i = 1, 20 do
      local c = moved[math.floor(r(1, #moved))]
      los[i], his[i] = G.sub(c, { 0.05, 0.05, 0.05 }), G.add(c, { 0.05, 0.05, 0.05 })
    end
    local sets, twice = G.query_boxes(weft, m, nf, los, his)
    assert.are.equal(0, twice, "faces returned twice")
    for i = 1, #los do
      local n = 0
      for f = 0, nf - 1 do
        local o = G.face_box_overlap(moved, idx, f, los[i], his[i])
        if o ~= (sets[i][f] or false) then error(string.format("box %d face %d: overlap %s", i, f, tostring(o))) end
        if o then n = n + 1 end
      end
      assert.is_true(n > 0, "box " .. i .. " holds no face")
    end
  end)
end)

-- the refit of large meshes fills the leaf-order triangle blocks leaf by
-- leaf in slot order on the pool's threads, a leaf reading the slots of a
-- block its predecessor wrote from the points: on one thread and on two
-- the same answers, those of a fresh mesh, and brute force's
describe("refit of a large soup on one and two threads", function()
  it("answers as a fresh mesh and as brute force", function()
    local r = G.rng(53)
    local pts, idx = soup(70000, r, 1.5)
    local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
    local moved = {}
    for i, p in ipairs(pts) do moved[i] = { p[3] * 1.1 - 0.2, p[1] * 0.9, p[2] + 0.3 * p[1] } end
    local MP = weft.array(moved, vec3)
    local o, d = {}, {}
    for i = 1, 200 do
      o[i] = { r(-2.5, 2.5), r(-2.5, 2.5), r(-2.5, 2.5) }
      d[i] = G.sub(moved[math.floor(r(1, #moved))], o[i])
    end
    local O, D = weft.array(o, vec3), weft.array(d, vec3)
    local function run(mesh)
      local T, C = weft.zeros(#o, weft.float32), weft.zeros(#o, weft.float32)
      weft.launch(k, #o, { mesh.id, O, D, T, C })
      return { T:totable(), C:totable() }
    end
    local saved = weft.config.num_threads
    local res = {}
    for j, nt in ipairs { 1, 2 } do
      weft.config.num_threads = nt
      run(m) -- the runtime takes the thread count at a launch
      weft.copy(m.points, weft.array(pts, vec3))
      m:refit()
      weft.copy(m.points, MP)
      m:refit()
      res[j] = run(m)
    end
    weft.config.num_threads = saved
    res[3] = run(weft.Mesh{ points = MP, indices = weft.array(idx, weft.int32) })
    for i = 1, #o do
      for j = 1, 2 do
        assert.are.equal(res[3][1][i], res[j][1][i], "ray " .. i)
        assert.are.equal(res[3][2][i], res[j][2][i], "point " .. i)
      end
    end
    for i = 1, 6 do
      local bd = G.closest(moved, idx, o[i])
      assert.is_true(math.abs(res[1][2][i] - bd) <= 1e-5 * math.max(1, bd),
                     string.format("point %d: %.8g, brute force %.8g", i, res[1][2][i], bd))
    end
  end)
end)

-- fast winding numbers (dipoles per wide lane, at the default accuracy)
-- on a closed torus, before and after a refit that stretches and moves
-- it: the lanes' dipole data must follow the points
describe("the 4-wide tree's winding-number data", function()
  it("tells inside from outside as brute force, before and after refit", function()
    local pts, idx = G.torus(1.0, 0.4, 40, 20)
    local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32),
                         support_winding_number = true }
    local r = G.rng(37)
    local function check_signs(p, what)
      local ps, thr, want = {}, {}, {}
      local lo, hi = { math.huge, math.huge, math.huge }, { -math.huge, -math.huge, -math.huge }
      for _, v in ipairs(p) do
        for k = 1, 3 do lo[k], hi[k] = math.min(lo[k], v[k]), math.max(hi[k], v[k]) end
      end
      while #ps < 150 do
        local q = { r(lo[1] - 0.3, hi[1] + 0.3), r(lo[2] - 0.3, hi[2] + 0.3), r(lo[3] - 0.3, hi[3] + 0.3) }
        if G.closest(p, idx, q) > 0.03 then
          ps[#ps + 1], thr[#ps + 1] = q, 0.5
          want[#ps] = G.winding(p, idx, q) > 0.5 and -1 or 1
        end
      end
      local S = weft.zeros(#ps, weft.float32)
      weft.launch(wind_k, #ps, { m.id, weft.array(ps, vec3), 2.0, weft.array(thr, weft.float32), S })
      local sign, inside = S:totable(), 0
      for i = 1, #ps do
        if want[i] < 0 then inside = inside + 1 end
        assert.are.equal(want[i], sign[i], string.format("%s: point %d (%g %g %g)", what, i, ps[i][1],
                                                         ps[i][2], ps[i][3]))
      end
      assert.is_true(inside > 10, inside .. " points inside")
    end
    check_signs(pts, "built")
    local moved = {}
    for i, p in ipairs(pts) do moved[i] = { 1.5 * p[1] + 0.3 * p[2] + 4, 0.8 * p[2] - 2, 1.2 * p[3] + 1 } end
    weft.copy(m.points, weft.array(moved, vec3))
    m:refit()
    check_signs(moved, "after refit")
  end)
end)
