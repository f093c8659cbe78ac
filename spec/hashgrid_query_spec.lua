-- weft.HashGrid: neighbour queries in kernels against brute force, the
-- periodic grid, hash_grid_point_id, the two lowerings of the loop, and the
-- errors of bad input. The device section runs on cuda:0 under
-- scripts/cuda-emu (scripts/run-tests), pending without a device.
local weft = require "weft"

local H = require "helpers.points"
local random_points, brute_counts = H.random_points, H.brute_counts

local count_k = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, n = weft.array(weft.int32),
  cand = weft.array(weft.int32),
  function(id, p, r, n, cand)
    local i = weft.hash_grid_point_id(id, weft.tid())
    local c, k = 0, 0
    for j in weft.hash_grid_query(id, p[i], r) do
      k = k + 1
      if weft.length_sq(p[j] - p[i]) <= r * r then c = c + 1 end
    end
    n[i] = c
    cand[i] = k
  end,
}

local function counts(g, pts, r)
  local p = weft.array(pts, weft.vec3)
  g:build(p, r)
  local n, cand = weft.zeros(#pts, weft.int32), weft.zeros(#pts, weft.int32)
  weft.launch(count_k, #pts, { g.id, p, r, n, cand })
  return n:totable(), cand:totable()
end

describe("weft.hash_grid_query", function()
  it("finds every neighbour within r (brute force)", function()
    local pts = random_points(1500, 1, 0)
    local got = counts(weft.HashGrid(16, 16, 16), pts, 0.07)
    local want = brute_counts(pts, 0.07)
    for i = 1, #pts do assert.equal(want[i], got[i]) end
  end)

  it("wraps a grid smaller than the query box without repeating cells", function()
    local pts = random_points(300, 1, 0, 5)
    local got, cand = counts(weft.HashGrid(2, 2, 2), pts, 0.3)
    local want = brute_counts(pts, 0.3)
    for i = 1, #pts do
      assert.equal(want[i], got[i])
      assert.equal(want[i], cand[i]) -- each point within r once, no other
    end
  end)

  it("yields the points within r and none beyond it (the query filters)", function()
    local pts = random_points(2000, 1, 0, 61)
    local pa = weft.array(pts, weft.vec3)
    local far_k = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
      far = weft.array(weft.int32),
      function(id, p, r, far)
        local i = weft.tid()
        for j in weft.hash_grid_query(id, p[i], r) do
          if weft.length_sq(p[j] - p[i]) > r * r * 1.0001 then far[i] = far[i] + 1 end
        end
      end }
    for _, case in ipairs { { 16, 0.05 }, { 4, 0.3 }, { 64, 0.004 } } do
      local g = weft.HashGrid(case[1], case[1], case[1])
      g:build(pa, case[2])
      local far = weft.zeros(#pts, weft.int32)
      weft.launch(far_k, #pts, { g.id, pa, case[2], far })
      for i = 1, #pts do assert.equal(0, far[i - 1]) end
    end
  end)

  it("takes any radius: 0, negative, NaN, far beyond the grid", function()
    local pts = random_points(300, 1, 0, 71)
    pts[301] = { pts[1][1], pts[1][2], pts[1][3] } -- a duplicate of the first
    local pa = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(8, 8, 8)
    g:build(pa, 0.125)
    local cand_k = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
      n = weft.array(weft.int32),
      function(id, p, r, n)
        local i = weft.tid()
        for _ in weft.hash_grid_query(id, p[i], r) do n[i] = n[i] + 1 end
      end }
    local function run(r)
      local n = weft.zeros(#pts, weft.int32)
      weft.launch(cand_k, #pts, { g.id, pa, r, n })
      return n:totable()
    end
    local zero, neg, nan, huge = run(0), run(-0.5), run(0 / 0), run(1e30)
    for i = 1, #pts do
      local dup = (i == 1 or i == 301) and 2 or 1
      assert.equal(dup, zero[i]) -- itself (and its duplicate)
      assert.equal(0, neg[i])
      assert.equal(0, nan[i])
      assert.equal(#pts, huge[i]) -- every point once
    end
  end)

  it("filters by the positions of the last build", function()
    -- points moved since the build are still found where they were then
    -- (as Warp's cells are): the kernel's own test sees the new positions
    local pts = random_points(400, 1, 0, 67)
    local pa = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(8, 8, 8)
    g:build(pa, 0.2)
    local at_build = brute_counts(pts, 0.2)
    for i = 0, #pts - 1 do pa[i] = weft.vec3(pts[i + 1][1] * 0.5, pts[i + 1][2], pts[i + 1][3]) end
    local cand_k = weft.kernel{ id = weft.uint64, q = weft.array(weft.vec3), r = weft.float32,
      n = weft.array(weft.int32),
      function(id, q, r, n)
        local i = weft.tid()
        for _ in weft.hash_grid_query(id, q[i], r) do n[i] = n[i] + 1 end
      end }
    local n = weft.zeros(#pts, weft.int32)
    weft.launch(cand_k, #pts, { g.id, weft.array(pts, weft.vec3), 0.2, n })
    assert.same(at_build, n:totable())
  end)

  it("works far from the origin and with negative coordinates", function()
    local pts = random_points(400, 2, -5000.5, 9)
    local got = counts(weft.HashGrid(8, 8, 8), pts, 0.25)
    local want = brute_counts(pts, 0.25)
    for i = 1, #pts do assert.equal(want[i], got[i]) end
  end)

  it("orders points by cell in hash_grid_point_id, each once", function()
    local pts = random_points(500, 1, 0, 3)
    local g = weft.HashGrid(4, 4, 4)
    g:build(weft.array(pts, weft.vec3), 0.25)
    local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.int32), function(id, out)
      local i = weft.tid()
      out[i] = weft.hash_grid_point_id(id, i)
    end }
    local out = weft.zeros(502, weft.int32)
    weft.launch(k, 502, { g.id, out })
    local ids, seen = out:totable(), {}
    for i = 1, 500 do
      assert.is_nil(seen[ids[i]])
      seen[ids[i]] = true
    end
    assert.same({ -1, -1 }, { ids[501], ids[502] }) -- past the end
    -- cell order: the cell index never decreases
    local function cell(p)
      local x, y, z = math.floor(p[1] / 0.25) % 4, math.floor(p[2] / 0.25) % 4, math.floor(p[3] / 0.25) % 4
      return (z * 4 + y) * 4 + x
    end
    for i = 2, 500 do assert.is_true(cell(pts[ids[i - 1] + 1]) <= cell(pts[ids[i] + 1])) end
  end)

  it("yields nothing before a build and after building no points", function()
    local g = weft.HashGrid(4, 4, 4)
    local k = weft.kernel{ id = weft.uint64, n = weft.array(weft.int32), function(id, n)
      for _ in weft.hash_grid_query(id, weft.vec3(0.0, 0.0, 0.0), 1.0) do n[0] = n[0] + 1 end
    end }
    local n = weft.zeros(1, weft.int32)
    weft.launch(k, 1, { g.id, n })
    g:build(weft.zeros(0, weft.vec3), 0.5)
    weft.launch(k, 1, { g.id, n })
    assert.equal(0, n[0])
  end)

  it("rebuilds with more points after reserve", function()
    local g = weft.HashGrid(8, 8, 8)
    g:reserve(10)
    local pts = random_points(800, 1, 0, 21)
    local got = counts(g, pts, 0.1)
    local want = brute_counts(pts, 0.1)
    for i = 1, #pts do assert.equal(want[i], got[i]) end
  end)
end)

describe("weft.hash_grid_query on the CPU's prefetching path", function()
  -- The CPU query prefetches positions from the array the grid was built
  -- from (src/geom/hashgrid.h); none of that may change what it yields.
  -- the counts on a grid d^3 are brute force's; returns them
  local function check_counts(pts, d, r)
    local got, cand = counts(weft.HashGrid(d, d, d), pts, r)
    local want = brute_counts(pts, r)
    for i = 1, #pts do
      assert.equal(want[i], got[i])
      assert.is_true(cand[i] >= got[i])
    end
    return got
  end

  it("counts clustered points (cells fuller than the prefetch budget)", function()
    local pts = random_points(600, 0.02, 0.5, 17) -- most of them in one or two cells
    for i, p in ipairs(random_points(200, 1, 0, 19)) do pts[600 + i] = p end
    check_counts(pts, 32, 0.04)
  end)

  it("counts at the ends of the id array (empty first rows, a full last cell)", function()
    -- every point in the grid's last cell (3, 3, 3) but two in cell 0: the
    -- rows of most queries start at point id 0 or end at the last id
    local pts = random_points(300, 0.2, 0.78, 53)
    pts[301], pts[302] = { 0.01, 0.02, 0.03 }, { 0.2, 0.1, 0.05 }
    assert.equal(2, check_counts(pts, 4, 0.25)[301]) -- the two in cell 0 see each other
  end)

  it("gives the same counts in debug mode and after a break", function()
    local pts = random_points(700, 1, 0, 23)
    local g = weft.HashGrid(16, 16, 16)
    local pa = weft.array(pts, weft.vec3)
    g:build(pa, 0.08)
    local first = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
      out = weft.array(weft.int32),
      function(id, p, r, out)
        local i = weft.tid()
        out[i] = -1
        for j in weft.hash_grid_query(id, p[i], r) do
          if j ~= i and weft.length_sq(p[j] - p[i]) <= r * r then
            out[i] = j
            break
          end
        end
      end }
    local out, dbg = weft.zeros(#pts, weft.int32), weft.zeros(#pts, weft.int32)
    weft.launch(first, #pts, { g.id, pa, 0.08, out })
    local mode = weft.config.mode
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, first, #pts, { g.id, pa, 0.08, dbg })
    weft.config.mode = mode
    assert(ok, err)
    local want = brute_counts(pts, 0.08)
    local o, d = out:totable(), dbg:totable()
    for i = 1, #pts do
      assert.equal(o[i], d[i])
      if want[i] > 1 then -- a neighbour other than itself: the first one found
        local q, r = pts[o[i] + 1], pts[i]
        local dx, dy, dz = q[1] - r[1], q[2] - r[2], q[3] - r[3]
        assert.is_true(dx * dx + dy * dy + dz * dz <= 0.08 * 0.08 * (1 + 1e-6))
      else
        assert.equal(-1, o[i])
      end
    end
  end)

  it("reads other positions than the grid's and outlives its build array", function()
    local pts = random_points(500, 1, 0, 29)
    local g, kept = weft.HashGrid(8, 8, 8), weft.HashGrid(8, 8, 8)
    g:build(weft.array(pts, weft.vec3), 0.15) -- that array is garbage from here on
    local alive = weft.array(pts, weft.vec3)
    kept:build(alive, 0.15)
    collectgarbage()
    collectgarbage()
    local shifted = {}
    for i, q in ipairs(pts) do shifted[i] = { q[1] + 0.01, q[2] - 0.02, q[3] } end
    local p = weft.array(shifted, weft.vec3)
    local function run(grid)
      local n, cand = weft.zeros(#pts, weft.int32), weft.zeros(#pts, weft.int32)
      weft.launch(count_k, #pts, { grid.id, p, 0.15, n, cand })
      return n:totable(), cand:totable()
    end
    local n1, c1 = run(g)
    local n2, c2 = run(kept)
    assert.same(n2, n1)
    assert.same(c2, c1)
  end)
end)

-- Candidate j of thread i in seq[i * M + k] (k counting from 0), the number
-- of candidates in n[i]: one kernel per lowering of the loop (a break
-- anywhere in the body keeps the general, state-machine form).
local M = 64
local record = weft.func(function(seq, i, k, j)
  if k < 64 then seq[i * 64 + k] = j end
  return k + 1
end)
local function seq_kernel(f)
  return weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
    n = weft.array(weft.int32), seq = weft.array(weft.int32), f }
end
local seq_nested = seq_kernel(function(id, p, r, n, seq)
  local i, k = weft.tid(), 0
  for j in weft.hash_grid_query(id, p[i], r) do k = record(seq, i, k, j) end
  n[i] = k
end)
local seq_general = seq_kernel(function(id, p, r, n, seq)
  local i, k = weft.tid(), 0
  for j in weft.hash_grid_query(id, p[i], r) do
    k = record(seq, i, k, j)
    if k > 1000000 then break end -- never taken
  end
  n[i] = k
end)

-- n random points in the unit cube, as an array, and a grid d^3 built on them
local function built(n, seed, d, r)
  local pts = random_points(n, 1, 0, seed)
  local pa = weft.array(pts, weft.vec3)
  local g = weft.HashGrid(d, d, d)
  g:build(pa, r)
  return pts, pa, g
end

local function sequences(k, g, pa, r, npts, dev)
  local n = weft.zeros(npts, weft.int32, { device = dev })
  local seq = weft.full(npts * M, -1, weft.int32, { device = dev })
  weft.launch(k, npts, { g.id, pa, r, n, seq }, { device = dev })
  return n:totable(), seq:totable()
end

describe("weft.hash_grid_query lowerings", function()
  it("yield the same candidates in the same order, nested or not", function()
    -- wrapping rows (a 5-cell grid under a 3-cell box), rows that do not
    -- wrap, and empty cells
    local pts = random_points(900, 1.3, -0.2, 31)
    local pa = weft.array(pts, weft.vec3)
    local g = weft.HashGrid(5, 7, 6)
    g:build(pa, 0.11)
    local n1, s1 = sequences(seq_nested, g, pa, 0.11, #pts)
    local n2, s2 = sequences(seq_general, g, pa, 0.11, #pts)
    assert.same(n2, n1)
    assert.same(s2, s1)
    local total = 0
    for i = 1, #pts do total = total + n1[i] end
    assert.is_true(total > #pts) -- candidates beyond the points themselves
  end)

  it("keep the nested form only for bodies that run to their end", function()
    local ok, src = pcall(seq_nested.source, seq_nested, "cuda")
    if not ok then return end -- no CUDA C backend in this build
    -- the calls (the definitions come with the prelude)
    assert.matches("wf_nat_hash_grid_query_slice(&", src, 1, true)
    assert.is_nil(src:find("wf_nat_hash_grid_query_next(&", 1, true))
    src = seq_general:source("cuda")
    assert.matches("wf_nat_hash_grid_query_next(&", src, 1, true)
    assert.is_nil(src:find("wf_nat_hash_grid_query_slice(&", 1, true))
  end)

  it("run bodies with a return and with inner breaks", function()
    local pts, pa, g = built(600, 37, 12, 0.09)
    local k = weft.kernel{
      id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, capped = weft.array(weft.int32),
      twice = weft.array(weft.int32),
      function(id, p, r, capped, twice)
        local i = weft.tid()
        -- an inner loop's break leaves that loop only: the nested form
        local t2 = 0
        for j in weft.hash_grid_query(id, p[i], r) do
          for _ = 1, 10 do
            if weft.length_sq(p[j] - p[i]) > r * r then break end
            t2 = t2 + 1
            if t2 % 2 == 0 then break end
          end
        end
        twice[i] = t2
        -- return from inside the loop
        local c = 0
        capped[i] = -1
        for j in weft.hash_grid_query(id, p[i], r) do
          if weft.length_sq(p[j] - p[i]) <= r * r then c = c + 1 end
          if c == 3 then
            capped[i] = 3
            return
          end
        end
        capped[i] = c
      end,
    }
    local n = #pts
    local capped, twice = weft.zeros(n, weft.int32), weft.zeros(n, weft.int32)
    weft.launch(k, n, { g.id, pa, 0.09, capped, twice })
    local want = brute_counts(pts, 0.09)
    local c, t = capped:totable(), twice:totable()
    local more = 0
    for i = 1, n do
      assert.equal(math.min(want[i], 3), c[i])
      -- each neighbour adds 1 if the running count was odd before it, else 2
      local w, s = 0, 0
      for _ = 1, want[i] do
        w = w + 1
        if w % 2 == 1 then w = w + 1 end
        s = w
      end
      assert.equal(s, t[i])
      if want[i] > 3 then more = more + 1 end
    end
    assert.is_true(more > 0) -- some returned early
  end)

  it("take Lua's goto continue in the body", function()
    local pts, pa, g = built(500, 43, 10, 0.1)
    local k = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
      out = weft.array(weft.int32),
      function(id, p, r, out)
        local i = weft.tid()
        local c = 0
        for j in weft.hash_grid_query(id, p[i], r) do
          if weft.length_sq(p[j] - p[i]) > r * r then goto continue end
          c = c + 1
          ::continue::
        end
        out[i] = c
      end }
    local out = weft.zeros(#pts, weft.int32)
    weft.launch(k, #pts, { g.id, pa, 0.1, out })
    assert.same(brute_counts(pts, 0.1), out:totable())
    -- a goto to a label anywhere else is still an error at its line
    local ok, err = pcall(weft.kernel, { id = weft.uint64, p = weft.array(weft.vec3), function(id, p)
      for j in weft.hash_grid_query(id, p[0], 1.0) do
        if j == 0 then goto skip end
        ::skip::
        p[j] = p[0]
      end
    end })
    if ok then ok, err = pcall(err.compile, err) end
    assert.is_false(ok)
    assert.matches("hashgrid_query_spec.lua:%d+: only a goto to a label at the end of the enclosing loop's body",
                   tostring(err))
  end)

  it("nest a query in a query's body", function()
    local pts, pa, g = built(400, 41, 8, 0.15)
    local k = weft.kernel{
      id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, hops = weft.array(weft.int32),
      function(id, p, r, hops)
        local i = weft.tid()
        local c = 0
        for j in weft.hash_grid_query(id, p[i], r) do
          if weft.length_sq(p[j] - p[i]) <= r * r then
            for l in weft.hash_grid_query(id, p[j], r) do
              if weft.length_sq(p[l] - p[j]) <= r * r then c = c + 1 end
            end
          end
        end
        hops[i] = c
      end,
    }
    local hops = weft.zeros(#pts, weft.int32)
    weft.launch(k, #pts, { g.id, pa, 0.15, hops })
    local want = brute_counts(pts, 0.15)
    local h = hops:totable()
    for i, p in ipairs(pts) do
      local s = 0
      for j, q in ipairs(pts) do
        local dx, dy, dz = p[1] - q[1], p[2] - q[2], p[3] - q[3]
        if dx * dx + dy * dy + dz * dz <= 0.15 * 0.15 * (1 + 1e-6) then s = s + want[j] end
      end
      assert.equal(s, h[i])
    end
  end)
end)

describe("weft.hash_grid_query on cuda:0", function()
  local test = weft.is_cuda_available() and it or pending
  test("gives the CPU's candidates, order and counts in both lowerings", function()
    local pts = random_points(700, 1.2, -0.1, 43)
    local res = {}
    for _, dev in ipairs { "cpu", "cuda:0" } do
      local pa = weft.array(pts, weft.vec3, { device = dev })
      local g = weft.HashGrid(6, 9, 7, { device = dev })
      g:build(pa, 0.1)
      local n1, s1 = sequences(seq_nested, g, pa, 0.1, #pts, dev)
      local n2, s2 = sequences(seq_general, g, pa, 0.1, #pts, dev)
      assert.same(n2, n1)
      assert.same(s2, s1)
      local n, cand = weft.zeros(#pts, weft.int32, { device = dev }), weft.zeros(#pts, weft.int32, { device = dev })
      weft.launch(count_k, #pts, { g.id, pa, 0.1, n, cand }, { device = dev })
      assert.same(brute_counts(pts, 0.1), n:totable())
      assert.same(n1, cand:totable())
      res[dev] = { n1, s1 }
    end
    assert.same(res.cpu, res["cuda:0"])
  end)
end)

describe("weft.HashGrid errors", function()
  it("reject bad dimensions, points and radii", function()
    assert.has_error(function() weft.HashGrid(0, 4, 4) end,
      "HashGrid: dimensions must be positive (got 0, 4, 4)")
    assert.has_error(function() weft.HashGrid(2.5, 4, 4) end,
      "weft.HashGrid: dim_x must be an integer, got a number")
    local g = weft.HashGrid(4, 4, 4)
    assert.has_error(function() g:build(weft.zeros(4), 0.1) end,
      "HashGrid:build: points must be a 1-D array of vec3f, got a 1-D array of float32")
    assert.has_error(function() g:build(weft.zeros(4, weft.vec3), -1) end,
      "HashGrid:build: radius must be positive and finite (got -1)")
    assert.has_error(function() g:reserve(-3) end,
      "HashGrid: cannot hold -3 points (0 to 2^31 - 1)")
  end)

  it("reject an id that is not a live hash grid in debug mode", function()
    local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.int32), function(id, out)
      out[0] = weft.hash_grid_point_id(id, 0)
    end }
    local mode = weft.config.mode
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, k, 1, { weft.uint64(4242), weft.zeros(1, weft.int32) })
    weft.config.mode = mode
    assert.is_false(ok)
    assert.matches("spec/hashgrid_query_spec.lua:%d+: weft.hash_grid_point_id: id 4242 is not a live weft.HashGrid", err)
  end)
end)
