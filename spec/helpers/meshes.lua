-- Test meshes and brute-force references for the mesh and BVH specs (and
-- the mesh bench and example): closed, outward-facing triangle meshes as
-- plain Lua tables (points: {x, y, z} lists, indices: a flat 0-based list),
-- and double-precision closest-point and ray tests done the slow way.
local M = {}

local sqrt, cos, sin, pi = math.sqrt, math.cos, math.sin, math.pi

local function sub(a, b) return { a[1] - b[1], a[2] - b[2], a[3] - b[3] } end
local function add(a, b) return { a[1] + b[1], a[2] + b[2], a[3] + b[3] } end
local function mul(a, s) return { a[1] * s, a[2] * s, a[3] * s } end
local function dot(a, b) return a[1] * b[1] + a[2] * b[2] + a[3] * b[3] end
local function cross(a, b)
  return { a[2] * b[3] - a[3] * b[2], a[3] * b[1] - a[1] * b[3], a[1] * b[2] - a[2] * b[1] }
end
M.sub, M.add, M.mul, M.dot, M.cross = sub, add, mul, dot, cross
function M.len(a) return sqrt(dot(a, a)) end

-- Signed volume (> 0: faces point outward).
function M.volume(pts, idx)
  local v = 0
  for f = 0, #idx / 3 - 1 do
    local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
    v = v + dot(a, cross(b, c)) / 6
  end
  return v
end

-- Flip every face if the mesh faces inward.
local function orient(pts, idx)
  if M.volume(pts, idx) < 0 then
    for f = 0, #idx / 3 - 1 do
      idx[3 * f + 2], idx[3 * f + 3] = idx[3 * f + 3], idx[3 * f + 2]
    end
  end
  return pts, idx
end

-- A grid of nu x nv quads, periodic in u (and in v when vwrap), two
-- triangles each; p(i, j) gives the point.
local function grid(nu, nv, vwrap, p)
  local pts, idx = {}, {}
  local rows = vwrap and nv or nv + 1
  for j = 0, rows - 1 do
    for i = 0, nu - 1 do pts[#pts + 1] = p(i, j) end
  end
  local function id(i, j) return (j % rows) * nu + (i % nu) end
  for j = 0, nv - 1 do
    for i = 0, nu - 1 do
      local a, b, c, d = id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1)
      idx[#idx + 1] = a; idx[#idx + 1] = b; idx[#idx + 1] = c
      idx[#idx + 1] = a; idx[#idx + 1] = c; idx[#idx + 1] = d
    end
  end
  return pts, idx
end

-- Torus around z: big radius R, tube radius r; nu x nv quads.
function M.torus(R, r, nu, nv)
  return orient(grid(nu, nv, true, function(i, j)
    local u, v = 2 * pi * i / nu, 2 * pi * j / nv
    return { (R + r * cos(v)) * cos(u), (R + r * cos(v)) * sin(u), r * sin(v) }
  end))
end

-- Is p inside the ideal torus (by at least margin)? 1 inside, -1 outside.
function M.torus_side(R, r, p)
  local q = sqrt(p[1] * p[1] + p[2] * p[2]) - R
  return sqrt(q * q + p[3] * p[3]) < r and 1 or -1
end

-- The cube [-h, h]^3: 8 points, 12 faces.
function M.cube(h)
  local pts = {}
  for k = 0, 7 do
    pts[k + 1] = { (k % 2 == 1) and h or -h, (math.floor(k / 2) % 2 == 1) and h or -h,
                   (math.floor(k / 4) == 1) and h or -h }
  end
  local quads = { { 0, 2, 3, 1 }, { 4, 5, 7, 6 }, { 0, 1, 5, 4 }, { 2, 6, 7, 3 }, { 0, 4, 6, 2 },
                  { 1, 3, 7, 5 } }
  local idx = {}
  for _, q in ipairs(quads) do
    for _, k in ipairs { q[1], q[2], q[3], q[1], q[3], q[4] } do idx[#idx + 1] = k end
  end
  return orient(pts, idx)
end

-- A sphere of radius about 1 whose radius wobbles by amp (poles shared:
-- the triangles next to them are degenerate, two corners equal).
function M.sphere(nu, nv, amp)
  local function radius(u, v) return 1 + amp * sin(3 * u) * sin(2 * v) end
  return orient(grid(nu, nv, false, function(i, j)
    local u, v = 2 * pi * i / nu, pi * j / nv
    local rr = radius(u, v)
    if j == 0 then return { 0, 0, 1 } end
    if j == nv then return { 0, 0, -1 } end
    return { rr * sin(v) * cos(u), rr * sin(v) * sin(u), rr * cos(v) }
  end))
end

-- Closest point of triangle abc to p, in double: the plane's foot if it
-- is inside, else the best of the three edges.
local function seg_closest(a, b, p)
  local ab = sub(b, a)
  local l2 = dot(ab, ab)
  local t = l2 > 0 and math.max(0, math.min(1, dot(sub(p, a), ab) / l2)) or 0
  return add(a, mul(ab, t))
end
function M.tri_closest(a, b, c, p)
  local n = cross(sub(b, a), sub(c, a))
  local nn = dot(n, n)
  if nn > 1e-30 then
    local q = sub(p, mul(n, dot(sub(p, a), n) / nn))
    local inside = dot(cross(sub(b, a), sub(q, a)), n) >= 0 and dot(cross(sub(c, b), sub(q, b)), n) >= 0
      and dot(cross(sub(a, c), sub(q, c)), n) >= 0
    if inside then return q end
  end
  local best, bd
  for _, e in ipairs { { a, b }, { b, c }, { c, a } } do
    local q = seg_closest(e[1], e[2], p)
    local d = dot(sub(q, p), sub(q, p))
    if not bd or d < bd then best, bd = q, d end
  end
  return best
end

-- Distance from p to the mesh, and a face at that distance.
function M.closest(pts, idx, p)
  local bd, bf = math.huge, -1
  for f = 0, #idx / 3 - 1 do
    local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
    local q = M.tri_closest(a, b, c, p)
    local d = M.len(sub(q, p))
    if d < bd then bd, bf = d, f end
  end
  return bd, bf
end

-- First hit of o + t d (t >= 0) by Moller-Trumbore in double, with a
-- tolerance eps on the barycentric bounds; returns t, face (or nil).
function M.raycast(pts, idx, o, d, eps)
  eps = eps or 0
  local bt, bf = math.huge, nil
  for f = 0, #idx / 3 - 1 do
    local a, b, c = pts[idx[3 * f + 1] + 1], pts[idx[3 * f + 2] + 1], pts[idx[3 * f + 3] + 1]
    local e1, e2 = sub(b, a), sub(c, a)
    local pv = cross(d, e2)
    local det = dot(e1, pv)
    if math.abs(det) > 1e-300 then
      local inv = 1 / det
      local tv = sub(o, a)
      local u = dot(tv, pv) * inv
      local qv = cross(tv, e1)
      local v = dot(d, qv) * inv
      local t = dot(e2, qv) * inv
      if u >= -eps and v >= -eps and u + v <= 1 + eps and t >= 0 and t < bt then bt, bf = t, f end
    end
  end
  if bf then return bt, bf end
  return nil
end

-- Face bounds overlap a box (touching counts)?
function M.face_box_overlap(pts, idx, f, lo, hi)
  for k = 1, 3 do
    local mn, mx = math.huge, -math.huge
    for j = 1, 3 do
      local v = pts[idx[3 * f + j] + 1][k]
      mn, mx = math.min(mn, v), math.max(mx, v)
    end
    if mn > hi[k] or mx < lo[k] then return false end
  end
  return true
end

-- The exact generalized winding number of the mesh at p (double): the
-- faces' solid angles over 4 pi.
function M.winding(pts, idx, p)
  local w = 0
  for f = 0, #idx / 3 - 1 do
    local a, b, c = sub(pts[idx[3 * f + 1] + 1], p), sub(pts[idx[3 * f + 2] + 1], p),
      sub(pts[idx[3 * f + 3] + 1], p)
    local la, lb, lc = M.len(a), M.len(b), M.len(c)
    w = w + 2 * math.atan2(dot(a, cross(b, c)), la * lb * lc + dot(a, b) * lc + dot(b, c) * la + dot(c, a) * lb)
  end
  return w / (4 * math.pi)
end

-- The faces weft.mesh_query_aabb returns for each box lo[i], hi[i] (Lua
-- lists of vec3 tables) on the mesh m of nf faces: a list of sets, and
-- the number of times a face came twice.
local box_kernel
function M.query_boxes(weft, m, nf, los, his)
  box_kernel = box_kernel or weft.kernel{
    id = weft.uint64, lo = weft.array(weft.vec3), hi = weft.array(weft.vec3), out = weft.array(weft.int32, 2),
    function(id, lo, hi, out)
      local i = weft.tid()
      local n = 0
      for f in weft.mesh_query_aabb(id, lo[i], hi[i]) do
        out[i][n + 1] = f
        n = n + 1
      end
      out[i][0] = n
    end }
  local out = weft.zeros({ #los, nf + 1 }, weft.int32)
  weft.launch(box_kernel, #los, { m.id, weft.array(los, weft.vec3), weft.array(his, weft.vec3), out })
  local sets, twice = {}, 0
  for i = 1, #los do
    local row, got = out[i - 1], {}
    for k = 1, row[0] do
      if got[row[k]] then twice = twice + 1 end
      got[row[k]] = true
    end
    sets[i] = got
  end
  return sets, twice
end

-- weft.mesh_query_furthest_point_no_sign(id, p, 0.5) at each point of ps:
-- the distances to the furthest points (-1: none beyond 0.5).
local far_kernel
function M.query_furthest(weft, m, ps)
  far_kernel = far_kernel or weft.kernel{
    id = weft.uint64, p = weft.array(weft.vec3), d = weft.array(weft.float32),
    function(id, p, d)
      local i = weft.tid()
      local q = weft.mesh_query_furthest_point_no_sign(id, p[i], 0.5)
      d[i] = q.result and weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - p[i]) or -1.0
    end }
  local d = weft.zeros(#ps, weft.float32)
  weft.launch(far_kernel, #ps, { m.id, weft.array(ps, weft.vec3), d })
  return d:totable()
end

-- A deterministic generator (LCG) of floats in [lo, hi).
function M.rng(seed)
  local s = seed
  return function(lo, hi)
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + (hi - lo) * s / 2147483648
  end
end

return M
