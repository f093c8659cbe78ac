-- weft.Bvh over boxes: box and ray queries return exactly the boxes they
-- touch (brute force), before and after refit; empty and huge inputs.
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local query = weft.kernel{
  id = weft.uint64, a = weft.array(vec3), b = weft.array(vec3), ray = weft.int32,
  out = weft.array(weft.int32, 2),
  function(id, a, b, ray, out)
    local i = weft.tid()
    local n = 0
    if ray == 1 then
      for k in weft.bvh_query_ray(id, a[i], b[i]) do
        out[i][n + 1] = k
        n = n + 1
      end
    else
      for k in weft.bvh_query_aabb(id, a[i], b[i]) do
        out[i][n + 1] = k
        n = n + 1
      end
    end
    out[i][0] = n
  end }

local function boxes(n, seed)
  local r, lo, hi = G.rng(seed), {}, {}
  for i = 1, n do
    local c = { r(-5, 5), r(-5, 5), r(-5, 5) }
    local h = { r(0, 0.5), r(0, 0.5), r(0, 0.5) }
    if i % 17 == 0 then h = { 0, 0, 0 } end -- points
    lo[i], hi[i] = G.sub(c, h), G.add(c, h)
  end
  return lo, hi
end

local function overlap(lo, hi, qlo, qhi)
  for k = 1, 3 do
    if lo[k] > qhi[k] or hi[k] < qlo[k] then return false end
  end
  return true
end

-- Does o + t d, t >= 0, meet the box? (slabs in double)
local function ray_box(lo, hi, o, d)
  local t0, t1 = 0, math.huge
  for k = 1, 3 do
    if d[k] == 0 then
      if o[k] < lo[k] or o[k] > hi[k] then return false end
    else
      local a, b = (lo[k] - o[k]) / d[k], (hi[k] - o[k]) / d[k]
      if a > b then a, b = b, a end
      t0, t1 = math.max(t0, a), math.min(t1, b)
    end
  end
  return t0 <= t1
end

local function run(b, qa, qb, ray, n)
  local out = weft.zeros({ #qa, n + 1 }, weft.int32)
  weft.launch(query, #qa, { b.id, weft.array(qa, vec3), weft.array(qb, vec3), ray, out })
  local res, sets = out:totable(), {}
  for i = 1, #qa do
    local s = {}
    for k = 1, res[i][1] do
      assert.is_nil(s[res[i][k + 1]], "a box returned twice")
      s[res[i][k + 1]] = true
    end
    sets[i] = s
  end
  return sets
end

local function check(lo, hi, qa, qb, sets, test, what)
  for i = 1, #qa do
    for k = 0, #lo - 1 do
      local want = test(lo[k + 1], hi[k + 1], qa[i], qb[i])
      if want ~= (sets[i][k] or false) then
        error(string.format("%s %d box %d: touches %s, returned %s", what, i, k, tostring(want),
                            tostring(sets[i][k] or false)))
      end
    end
  end
end

describe("weft.Bvh", function()
  it("answers box and ray queries as brute force, also after refit", function()
    local lo, hi = boxes(500, 1)
    local L, H = weft.array(lo, vec3), weft.array(hi, vec3)
    local b = weft.Bvh(L, H)
    local r = G.rng(2)
    local qa, qb, ro, rd = {}, {}, {}, {}
    for i = 1, 40 do
      local c, h = { r(-5, 5), r(-5, 5), r(-5, 5) }, { r(0, 1.5), r(0, 1.5), r(0, 1.5) }
      qa[i], qb[i] = G.sub(c, h), G.add(c, h)
      ro[i] = { r(-8, 8), r(-8, 8), r(-8, 8) }
      rd[i] = G.sub({ r(-3, 3), r(-3, 3), r(-3, 3) }, ro[i])
    end
    ro[41], rd[41] = { -9, 0.25, 0.25 }, { 1, 0, 0 } -- axis-parallel rays
    ro[42], rd[42] = { 0.1, -9, 0.3 }, { 0, 1, 0 }
    qa[41], qb[41], qa[42], qb[42] = qa[1], qb[1], qa[2], qb[2]
    check(lo, hi, qa, qb, run(b, qa, qb, 0, 500), overlap, "box")
    check(lo, hi, ro, rd, run(b, ro, rd, 1, 500), ray_box, "ray")
    -- move every box, refit, ask again
    for i = 1, #lo do
      local s = { 0.5 * math.sin(i), 0.3, -0.2 * i / #lo }
      lo[i], hi[i] = G.add(lo[i], s), G.add(hi[i], G.add(s, { 0.1, 0, 0 }))
      L[i - 1], H[i - 1] = lo[i], hi[i]
    end
    b:refit()
    check(lo, hi, qa, qb, run(b, qa, qb, 0, 500), overlap, "box after refit")
    check(lo, hi, ro, rd, run(b, ro, rd, 1, 500), ray_box, "ray after refit")
  end)

  it("handles one box and many equal boxes", function()
    local one = weft.Bvh(weft.array({ { 0, 0, 0 } }, vec3), weft.array({ { 1, 1, 1 } }, vec3))
    local s = run(one, { { 0.5, 0.5, 0.5 }, { 2, 2, 2 } }, { { 0.6, 0.6, 0.6 }, { 3, 3, 3 } }, 0, 1)
    assert.is_true(s[1][0])
    assert.is_nil(s[2][0])
    local lo, hi = {}, {}
    for i = 1, 3000 do lo[i], hi[i] = { 0, 0, 0 }, { 1, 1, 1 } end -- no split plane separates them
    local b = weft.Bvh(weft.array(lo, vec3), weft.array(hi, vec3))
    local sets = run(b, { { 0.5, 0.5, 0.5 } }, { { 0.5, 0.5, 0.5 } }, 0, 3000)
    local n = 0
    for _ in pairs(sets[1]) do n = n + 1 end
    assert.are.equal(3000, n)
  end)
end)
