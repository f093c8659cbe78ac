-- The 4-wide tree that ray casts and closest points walk (src/geom/bvh4.c):
-- triangle soups of every size from one triangle (a leaf root) up, against
-- brute force in double precision, before and after a refit that moves
-- every point far (so lanes must take their new boxes).
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

describe("the 4-wide mesh tree", function()
  it("casts rays and finds closest points as brute force, from 1 to 400 triangles, and after refit", function()
    local r = G.rng(29)
    for _, n in ipairs { 1, 2, 3, 4, 5, 6, 9, 13, 17, 33, 64, 150, 400 } do
      local pts, idx = soup(n, r, 1.5)
      local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
      check(m, pts, idx, r, n .. " triangles")
      -- every point moves far: the old boxes would miss most of the new triangles
      local moved = {}
      for i, p in ipairs(pts) do moved[i] = { -p[2] * 1.3 + 0.5, p[3] * 0.7, p[1] - 0.4 } end
      weft.copy(m.points, weft.array(moved, vec3))
      m:refit()
      check(m, moved, idx, r, n .. " triangles after refit")
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
  end)
end)
