-- Gradients through the mesh queries (src/geom/native.h; their gradient
-- functions: lua/weft/geom.lua, P.native_diff): t, u, v and normal of
-- mesh_query_ray, u and v of the closest-point queries and
-- mesh_eval_face_normal, with respect to the query's arguments and the
-- mesh's points, against central finite differences (the mesh refit at
-- each step). The CUDA part runs under scripts/cuda-emu and must match
-- the CPU.
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

-- one output per query: a fixed mix of the float fields
local ray_k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3),
  out = weft.array(weft.float32),
  function(id, o, d, out)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, o[i], d[i], 100.0)
    if r.result then
      out[i] = 0.7 * r.t + 1.3 * r.u - 0.9 * r.v + weft.dot(r.normal, vec3(0.3, -0.7, 0.5))
    end
  end }

local function point_kernel(query)
  return weft.kernel{ id = weft.uint64, p = weft.array(vec3), out = weft.array(weft.float32),
    function(id, p, out)
      local i = weft.tid()
      local q = query(id, p[i], 10.0)
      if q.result then out[i] = 1.1 * q.u - 0.6 * q.v + 0.1 * q.sign end
    end }
end

-- a closest point's position (continuous where u and v are not: at an
-- edge or a vertex shared by faces)
local position_k = weft.kernel{ id = weft.uint64, p = weft.array(vec3), out = weft.array(weft.float32),
  function(id, p, out)
    local i = weft.tid()
    local q = weft.mesh_query_point_no_sign(id, p[i], 100.0)
    if q.result then
      out[i] = weft.dot(weft.mesh_eval_position(id, q.face, q.u, q.v), vec3(0.7, -1.1, 0.4))
    end
  end }

local normal_k = weft.kernel{ id = weft.uint64, w = weft.array(vec3), out = weft.array(weft.float32),
  function(id, w, out)
    local i = weft.tid()
    out[i] = weft.dot(weft.mesh_eval_face_normal(id, i), w[i])
  end }

-- a pair energy over hash-grid neighbours
local near_k = weft.kernel{ id = weft.uint64, x = weft.array(vec3), e = weft.array(weft.float32),
  function(id, x, e)
    local i = weft.tid()
    for j in weft.hash_grid_query(id, x[i], 0.5) do
      if j ~= i then
        local r = weft.length(x[i] - x[j])
        if r < 0.5 then weft.atomic_add(e, 0, (0.5 - r) * (0.5 - r) * weft.float32(j + 1)) end
      end
    end
  end }

local tetra_pts = { { 0, 0, 0 }, { 1.1, 0.1, -0.05 }, { 0.15, 0.95, 0.1 }, { 0.2, 0.25, 1.05 } }
local tetra_idx = { 0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3 }

-- The launch: a mesh over pts (points requiring gradients) and the
-- kernel's array arguments (tables of vec3, the first two requiring
-- gradients); returns the mesh, the points, the input arrays and out.
local function setup(k, pts, idx, inputs, n, dev, winding)
  local opt = { device = dev }
  local P = weft.array(pts, vec3, { device = dev, requires_grad = true })
  local m = weft.Mesh{ points = P, indices = weft.array(idx, weft.int32, opt), support_winding_number = winding }
  local arrs = {}
  for j, t in ipairs(inputs) do arrs[j] = weft.array(t, vec3, { device = dev, requires_grad = true }) end
  local out = weft.zeros(n, weft.float32, { device = dev, requires_grad = true })
  local args = { m.id }
  for _, a in ipairs(arrs) do args[#args + 1] = a end
  args[#args + 1] = out
  local function run()
    out:zero_()
    weft.launch(k, n, args, opt)
    local s = 0
    for _, v in ipairs(out:to("cpu"):totable()) do s = s + v end
    return s
  end
  return m, P, arrs, out, run
end

-- the gradients of sum(out) by the tape, as tables
local function tape_grads(k, n, m, P, arrs, out, dev)
  local args = { m.id }
  for _, a in ipairs(arrs) do args[#args + 1] = a end
  args[#args + 1] = out
  local tape = weft.Tape()
  tape:record(function() weft.launch(k, n, args, { device = dev }) end)
  tape:backward{ grads = { [out] = weft.full(n, 1.0, weft.float32, { device = dev }) } }
  local g = { P.grad:to("cpu"):totable() }
  for _, a in ipairs(arrs) do g[#g + 1] = a.grad:to("cpu"):totable() end
  return g
end

-- Central differences of run() in every component of the points and the
-- input arrays against the tape's; returns how many were nonzero.
local function check(k, pts, idx, inputs, opts)
  opts = opts or {}
  local n = #inputs[1]
  local m, P, arrs, out, run = setup(k, pts, idx, inputs, n, "cpu", opts.winding)
  local g = tape_grads(k, n, m, P, arrs, out, "cpu")
  local h, nonzero, skipped = opts.h or 1e-3, 0, 0
  for j, a in ipairs { P, arrs[1], arrs[2] } do
    local vals = a:totable()
    for i = 0, #vals - 1 do
      for c = 1, 3 do
        local e = vals[i + 1]
        local function at(x)
          local v = { e[1], e[2], e[3] }
          v[c] = x
          a[i] = v
          if a == P then m:refit() end
          return run()
        end
        local f0, fp, fm = at(e[c]), at(e[c] + h), at(e[c] - h)
        local want = (fp - fm) / (2 * h)
        at(e[c])
        local got = g[j][i + 1][c]
        -- where a step of h moves the query to another face or region the
        -- one-sided differences disagree: no derivative to compare there
        local jump = math.abs((fp - f0) - (f0 - fm)) / h > 0.05 * math.max(1, math.abs(want))
        if opts.jumps and jump then
          skipped = skipped + 1
        elseif math.abs(got - want) > (opts.tol or 5e-3) * math.max(1, math.abs(want)) then
          -- where the closest point moves fast the difference over h is
          -- off by its curvature: a tenth of h must agree then
          local h2 = h / 10
          local want2 = (at(e[c] + h2) - at(e[c] - h2)) / (2 * h2)
          at(e[c])
          if math.abs(got - want2) > (opts.tol or 5e-3) * math.max(1, math.abs(want2)) then
            error(string.format("%s element %d component %d: tape %.6g, finite difference %.6g "
                                .. "(%.6g over h / 10)", j == 1 and "points" or "input " .. (j - 1),
                                i, c, got, want, want2), 2)
          end
        end
        if not jump and math.abs(want) > 1e-3 then nonzero = nonzero + 1 end
      end
    end
  end
  return nonzero, skipped
end

-- query points around the tetrahedron: near its faces (inside and out),
-- beyond its edges and beyond its vertices
local tetra_q = { { 0.35, 0.3, -0.3 }, { 0.3, 0.3, 0.25 }, { 0.6, -0.4, 0.5 }, { -0.5, 0.4, 0.3 },
                  { 0.8, 0.6, 0.5 }, { 1.6, 0.1, -0.3 }, { 0.1, 0.1, 1.6 }, { -0.4, -0.3, -0.2 },
                  { 0.55, 0.55, -0.2 }, { 0.2, 0.15, 0.1 } }

describe("mesh query gradients", function()
  it("mesh_query_ray: t, u, v and normal by origin, direction and points", function()
    local o = { { 0.3, 0.25, 2.0 }, { 0.35, -1.5, 0.3 }, { 2.0, 0.6, 0.4 }, { -1.2, 0.3, 0.25 }, { 0.3, 0.3, 0.2 } }
    local d = { { 0.05, 0.02, -1 }, { 0.02, 1, 0.1 }, { -1, -0.1, 0.05 }, { 1, 0.05, 0.1 }, { 0.2, 0.1, -1 } }
    assert.is_true(check(ray_k, tetra_pts, tetra_idx, { o, d }) > 40)
  end)

  it("mesh_query_ray on a perturbed sphere", function()
    local pts, idx = G.sphere(10, 6, 0.15)
    local r = G.rng(5)
    local o, d = {}, {}
    for i = 1, 6 do
      o[i] = { r(-0.3, 0.3), r(-0.3, 0.3), r(-0.3, 0.3) } -- from inside
      d[i] = { r(-1, 1), r(-1, 1), r(-1, 1) }
    end
    local nz, skipped = check(ray_k, pts, idx, { o, d }, { jumps = true })
    assert.is_true(nz > 40 and skipped < 10, nz .. " checked, " .. skipped .. " skipped")
  end)

  for _, name in ipairs { "mesh_query_point", "mesh_query_point_no_sign", "mesh_query_point_sign_normal",
                          "mesh_query_point_sign_winding_number" } do
    it(name .. ": u and v by the point and the points", function()
      local k = point_kernel(weft[name])
      local nz = check(k, tetra_pts, tetra_idx, { tetra_q }, { winding = true })
      assert.is_true(nz > 30)
    end)
  end

  it("closest points on a perturbed sphere: their positions by the query point and the points", function()
    -- the position, not u and v: a point whose nearest point is on an
    -- edge or a vertex is as near to every face there, and which one the
    -- walk meets first (u and v) depends on the tree's bounds; the
    -- position they give does not
    local k = position_k
    local pts, idx = G.sphere(10, 6, 0.15)
    local r = G.rng(9)
    local q = {}
    for i = 1, 8 do q[i] = { r(-1.4, 1.4), r(-1.4, 1.4), r(-1.4, 1.4) } end
    local nz, skipped = check(k, pts, idx, { q }, { jumps = true })
    assert.is_true(nz > 30 and skipped < nz / 2, nz .. " checked, " .. skipped .. " skipped")
  end)

  it("closest points on flat triangles: the point's position by the query point and the points", function()
    -- corners on a line (rounded to floats) or two equal: the
    -- native answers on their segments (query.h: gclosest_flat) and the
    -- gradient's recompute must take the same point (u and v are not
    -- unique there: the position they give is)
    local k = position_k
    local d = { 0.31, 0.52, 0.79 }
    local pts, idx, q = {}, {}, {}
    local function tri(o, a, b, c)
      for _, t in ipairs { a, b, c } do
        pts[#pts + 1] = { o + d[1] * t[1] + t[2], o + d[2] * t[1] - t[2], 0.5 * o + d[3] * t[1] }
        idx[#idx + 1] = #pts - 1
      end
    end
    tri(0, { 0.1, 0 }, { 1.3, 0 }, { 2.2, 0 })     -- on a line
    tri(12, { 0.4, 0 }, { 0.4, 0 }, { 1.9, 0 })    -- two corners equal
    tri(18, { 1.2, 0 }, { 0.3, 0 }, { 2.0, 0 })    -- on a line, the middle corner last
    local r = G.rng(17)
    for _, o in ipairs { 0, 12, 18 } do
      for _ = 1, 4 do
        local t = r(-0.3, 2.5)
        q[#q + 1] = { o + d[1] * t + r(-0.4, 0.4), o + d[2] * t + r(-0.4, 0.4), 0.5 * o + d[3] * t + r(-0.4, 0.4) }
      end
    end
    -- a corner moved off the line tilts the face either way alike: a kink
    -- the one-sided differences show (skipped), ~24 of the 63 components
    local nz, skipped = check(k, pts, idx, { q }, { jumps = true })
    assert.is_true(nz >= 20 and skipped <= 30, nz .. " checked, " .. skipped .. " skipped")
  end)

  it("queries in for and while loops", function()
    local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), out = weft.array(weft.float32),
      function(id, o, out)
        local i = weft.tid()
        local s = 0.0
        for j = 1, 3 do
          local r = weft.mesh_query_ray(id, o[i] * (1.0 + 0.1 * weft.float32(j)), vec3(0.05, 0.02, -1.0), 100.0)
          if r.result then s = s + r.t * r.u end
        end
        local p, n = o[i], 0
        while n < 2 do
          local q = weft.mesh_query_point(id, p, 10.0)
          s = s + q.u * q.v
          p = p * 0.9
          n = n + 1
        end
        out[i] = s
      end }
    local nz = check(k, tetra_pts, tetra_idx, { { { 0.2, 0.25, 2.0 }, { 0.3, 0.2, 1.5 } } })
    assert.is_true(nz >= 10, nz .. " nonzero")
  end)

  it("through the loops of hash_grid_query and mesh_query_aabb", function()
    -- the adjoint replays a query loop from its start for each iteration it
    -- reverses: the query restarts there
    local pts = { { 0, 0, 0 }, { 0.3, 0, 0 }, { 0, 0.2, 0.1 }, { 0.1, 0.1, 0.3 }, { 0.35, 0.3, 0.2 } }
    local x = weft.array(pts, vec3, { requires_grad = true })
    local g = weft.HashGrid(8, 8, 8)
    g:build(x, 0.5)
    local e = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(near_k, #pts, { g.id, x, e }) end)
    tape:backward(e)
    local gx = x.grad:totable()
    local function energy(p)
      local xx = weft.array(p, vec3)
      g:build(xx, 0.5)
      local ee = weft.zeros(1, weft.float32)
      weft.launch(near_k, #p, { g.id, xx, ee })
      return ee:totable()[1]
    end
    local h = 1e-3
    for i = 1, #pts do
      for c = 1, 3 do
        local a, b = {}, {}
        for n, v in ipairs(pts) do a[n], b[n] = { v[1], v[2], v[3] }, { v[1], v[2], v[3] } end
        a[i][c], b[i][c] = a[i][c] + h, b[i][c] - h
        local want = (energy(a) - energy(b)) / (2 * h)
        assert(math.abs(gx[i][c] - want) < 5e-3 * math.max(1, math.abs(want)),
               string.format("hash grid point %d component %d: tape %g, finite difference %g", i, c, gx[i][c], want))
      end
    end
    -- faces near a point, weighted by their normals' z: the points' gradient
    local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), out = weft.array(weft.float32),
      function(id, o, out)
        local i = weft.tid()
        local s = 0.0
        for f in weft.mesh_query_aabb(id, o[i] - vec3(0.3, 0.3, 0.3), o[i] + vec3(0.3, 0.3, 0.3)) do
          s = s + weft.mesh_eval_face_normal(id, f).z * weft.float32(f + 1)
        end
        out[i] = s
      end }
    assert.is_true(check(k, tetra_pts, tetra_idx, { { { 0.1, 0.1, 0.1 }, { 0.9, 0.1, 0.0 } } }) > 5)
  end)

  it("mesh_eval_face_normal by the points", function()
    local w = { { 0.3, -0.2, 0.9 }, { -0.5, 0.8, 0.1 }, { 0.7, 0.7, -0.3 }, { 0.1, -0.9, 0.4 } }
    assert.is_true(check(normal_k, tetra_pts, tetra_idx, { w }) > 20)
  end)

  it("mesh_query_furthest_point_no_sign: u and v are steps (zero gradient)", function()
    local k = point_kernel(weft.mesh_query_furthest_point_no_sign)
    assert.are.equal(0, check(k, tetra_pts, tetra_idx, { tetra_q }))
  end)

  it("volume transforms and samples by the point", function()
    local a = weft.zeros({ 6, 5, 7 }, weft.float32)
    local ffi = require "ffi"
    local d = ffi.cast("float*", a.h.data)
    for i = 0, 6 * 5 * 7 - 1 do d[i] = math.sin(0.37 * i) + 0.01 * i end
    local vol = weft.Volume.from_dense(a, { voxel_size = 0.5, origin = { 0.3, -0.2, 0.1 }, background = 0 })
    local k = weft.kernel{ id = weft.uint64, p = weft.array(vec3), out = weft.array(weft.float32),
      function(id, p, out)
        local i = weft.tid()
        local u = weft.volume_world_to_index(id, p[i])
        local w = weft.volume_index_to_world(id, p[i] * 0.3)
        local du = weft.volume_world_to_index_dir(id, p[i])
        local dw = weft.volume_index_to_world_dir(id, p[i])
        out[i] = weft.dot(u, vec3(0.3, 1.1, -0.4)) + weft.dot(w, vec3(-0.7, 0.2, 0.5))
          + weft.dot(du, vec3(0.2, 0.1, 0.9)) + weft.dot(dw, vec3(1.0, -0.3, 0.2))
          + weft.volume_sample_f(id, u, weft.Volume.LINEAR)
      end }
    local pts = { { 1.07, 0.91, 1.33 }, { 0.62, 1.18, 2.04 }, { 2.11, 0.43, 0.77 } }
    local p = weft.array(pts, vec3, { requires_grad = true })
    local out = weft.zeros(#pts, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, #pts, { vol.id, p, out }) end)
    tape:backward{ grads = { [out] = weft.full(#pts, 1.0) } }
    local g = p.grad:totable()
    local h = 1e-3
    for i = 0, #pts - 1 do
      for c = 1, 3 do
        local function at(x)
          local v = { pts[i + 1][1], pts[i + 1][2], pts[i + 1][3] }
          v[c] = x
          p[i] = v
          out:zero_()
          weft.launch(k, #pts, { vol.id, p, out })
          return out:totable()[i + 1]
        end
        local e = pts[i + 1][c]
        local want = (at(e + h) - at(e - h)) / (2 * h)
        at(e)
        assert(math.abs(g[i + 1][c] - want) < 5e-3 * math.max(1, math.abs(want)),
               string.format("point %d component %d: tape %g, finite difference %g", i, c, g[i + 1][c], want))
      end
    end
  end)

  it("forward mode (weft.jvp): tangents by the query's arguments", function()
    local o = { { 0.3, 0.25, 2.0 }, { 0.35, -1.5, 0.3 }, { 2.0, 0.6, 0.4 }, { 0.3, 0.3, 0.2 } }
    local d = { { 0.05, 0.02, -1 }, { 0.02, 1, 0.1 }, { -1, -0.1, 0.05 }, { 0.2, 0.1, -1 } }
    local to = { { 0.3, -0.2, 0.5 }, { 0.1, 0.4, -0.3 }, { -0.2, 0.3, 0.1 }, { 0.5, 0.1, 0.2 } }
    local td = { { 0.1, 0.2, -0.1 }, { -0.3, 0.1, 0.2 }, { 0.2, -0.1, 0.3 }, { 0.1, 0.1, 0.1 } }
    local m = weft.Mesh{ points = weft.array(tetra_pts, vec3), indices = weft.array(tetra_idx, weft.int32) }
    local pk = point_kernel(weft.mesh_query_point)
    for _, case in ipairs { { ray_k, { o, d }, { to, td } }, { pk, { tetra_q }, { tetra_q } } } do
      local k, ins, tans = case[1], case[2], case[3]
      local n = #ins[1]
      local function run(h)
        local args = { m.id }
        for j, t in ipairs(ins) do
          local v = {}
          for i, e in ipairs(t) do
            local dt = tans[j][i]
            v[i] = { e[1] + h * dt[1], e[2] + h * dt[2], e[3] + h * dt[3] }
          end
          args[#args + 1] = weft.array(v, vec3)
        end
        local out = weft.zeros(n, weft.float32)
        args[#args + 1] = out
        weft.launch(k, n, args)
        return out:totable()
      end
      local arrs, targs = { m.id }, { false }
      for j, t in ipairs(ins) do
        arrs[#arrs + 1] = weft.array(t, vec3)
        targs[#targs + 1] = weft.array(tans[j], vec3)
      end
      local out, ot = weft.zeros(n, weft.float32), weft.zeros(n, weft.float32)
      weft.jvp(k, n, arrs, targs, { out }, { ot })
      local got, hi, lo, nz = ot:totable(), run(1e-3), run(-1e-3), 0
      for i = 1, n do
        local want = (hi[i] - lo[i]) / 2e-3
        assert(math.abs(got[i] - want) < 5e-3 * math.max(1, math.abs(want)),
               string.format("output %d: jvp %g, finite difference %g", i, got[i], want))
        if math.abs(want) > 1e-3 then nz = nz + 1 end
      end
      assert.is_true(nz >= 3)
    end
  end)

  it("a query without its gradient function is an error, not a zero gradient", function()
    -- in a process of its own: the compiler's environment is set up once
    local script = [[
      package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local weft = require "weft"
      require("weft.internal").native_diff = nil
      local k = weft.kernel{ id = weft.uint64, o = weft.array(weft.vec3), out = weft.array(weft.float32),
        function(id, o, out)
          local i = weft.tid()
          out[i] = weft.mesh_query_ray(id, o[i], weft.vec3(0.0, 0.0, -1.0), 10.0).t
        end }
      local m = weft.Mesh{ points = weft.array({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 1, 0 } }, weft.vec3),
                           indices = weft.array({ 0, 1, 2 }, weft.int32) }
      local o = weft.array({ { 0.2, 0.2, 1 } }, weft.vec3, { requires_grad = true })
      local out = weft.zeros(1, weft.float32, { requires_grad = true })
      local tape = weft.Tape()
      tape:record(function() weft.launch(k, 1, { m.id, o, out }) end)
      local ok, err = pcall(function() tape:backward(out) end)
      io.write(tostring(ok), " ", tostring(err))
    ]]
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    local p = assert(io.popen("luajit " .. path .. " 2>&1"))
    local got = p:read("*a")
    p:close()
    os.remove(path)
    assert.matches("^false .*:7: autodiff: weft.mesh_query_ray has no gradient %(reverse mode%)", got)
  end)

  it("refuse a tape whose later launch moved the points an earlier query read", function()
    local P = weft.array(tetra_pts, vec3, { requires_grad = true })
    local m = weft.Mesh{ points = P, indices = weft.array(tetra_idx, weft.int32) }
    local move = weft.kernel{ p = weft.array(vec3), function(p)
      local i = weft.tid()
      p[i] = p[i] + vec3(0.1, 0.0, 0.0)
    end }
    local o = weft.array({ { 0.3, 0.25, 2.0 } }, vec3, { requires_grad = true })
    local d = weft.array({ { 0.05, 0.02, -1 } }, vec3)
    local out = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function()
      weft.launch(ray_k, 1, { m.id, o, d, out })
      weft.launch(move, #tetra_pts, { P })
    end)
    local ok, err = pcall(function() tape:backward(out) end)
    assert.is_false(ok)
    assert.matches("tape:backward: launch 1 %('.-'%) needs the arrays of the object passed as 'id' %(its "
                   .. "queries are replayed for the gradient%), but launch 2 %('.-'%) overwrote one", tostring(err))
  end)

  it("refuse a tape whose mesh or hash grid was refit or rebuilt after a query", function()
    local P = weft.array(tetra_pts, vec3, { requires_grad = true })
    local m = weft.Mesh{ points = P, indices = weft.array(tetra_idx, weft.int32) }
    local o = weft.array({ { 0.3, 0.25, 2.0 } }, vec3, { requires_grad = true })
    local d = weft.array({ { 0.05, 0.02, -1 } }, vec3)
    local out = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(ray_k, 1, { m.id, o, d, out }) end)
    m:refit()
    local ok, err = pcall(function() tape:backward(out) end)
    assert.is_false(ok)
    assert.matches("tape:backward: launch 1 %('.-'%) queried the object passed as 'id', which was refit or "
                   .. "rebuilt afterwards", tostring(err))

    local x = weft.array({ { 0, 0, 0 }, { 0.3, 0, 0 }, { 0, 0.2, 0.1 } }, vec3, { requires_grad = true })
    local g = weft.HashGrid(8, 8, 8)
    g:build(x, 0.5)
    local e = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape2 = weft.Tape()
    tape2:record(function() weft.launch(near_k, 3, { g.id, x, e }) end)
    tape2:backward(e) -- the grid as it was: fine
    assert.is_true(x.grad:totable()[1][1] ~= 0)
    g:build(x, 0.5)
    ok, err = pcall(function() tape2:backward(e) end)
    assert.is_false(ok)
    assert.matches("launch 1 %('.-'%) queried the object passed as 'id', which was refit or rebuilt", tostring(err))
  end)

  it("refuse reverse mode through atomic_exch and atomic_cas of floats, at the line", function()
    local k = weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32),
      function(x, out)
        local i = weft.tid()
        weft.atomic_exch(out, i, x[i] * 2.0)
      end }
    local x = weft.array({ 1, 2, 3 }, weft.float32, { requires_grad = true })
    local out = weft.zeros(3, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { x }, { outputs = { out } }) end)
    local ok, err = pcall(function() tape:backward{ grads = { [out] = weft.full(3, 1.0) } } end)
    assert.is_false(ok)
    assert.matches("geom_grad_spec.lua:%d+: autodiff: weft.atomic_exch on an array of floats has no gradient",
                   tostring(err))
  end)

  it("come from functions that recompute the native's values", function()
    -- the gradient functions run in the kernel next to the native: their
    -- t, u, v and normal against the native's on a torus
    local diff = require("weft.internal").native_diff
    local dray, dpoint = weft.func(diff.mesh_query_ray), weft.func(diff.mesh_query_point_no_sign)
    local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3), err = weft.array(weft.float32),
      function(id, o, d, err)
        local i = weft.tid()
        local r = weft.mesh_query_ray(id, o[i], d[i], 100.0)
        local r2 = dray(id, o[i], d[i], 100.0, r)
        err[2 * i] = weft.max(weft.abs(r.t - r2.t) / weft.max(r.t, 1.0), weft.abs(r.u - r2.u) + weft.abs(r.v - r2.v))
          + weft.length(r.normal - r2.normal)
        local q = weft.mesh_query_point_no_sign(id, o[i], 100.0)
        local q2 = dpoint(id, o[i], 100.0, q)
        err[2 * i + 1] = weft.abs(q.u - q2.u) + weft.abs(q.v - q2.v)
      end }
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    local m = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
    local r = G.rng(3)
    local o, d = {}, {}
    for i = 1, 400 do
      o[i] = { r(-2, 2), r(-2, 2), r(-1, 1) }
      d[i] = { r(-1, 1), r(-1, 1), r(-1, 1) }
    end
    local err = weft.zeros(800, weft.float32)
    weft.launch(k, 400, { m.id, weft.array(o, vec3), weft.array(d, vec3), err })
    local worst = 0
    for _, e in ipairs(err:totable()) do worst = math.max(worst, e) end
    assert.is_true(worst < 1e-4, "largest difference " .. worst)
  end)

  it("match the CPU's on a CUDA device (scripts/cuda-emu)", function()
    if require("helpers.cuda").missing() then return end
    local o = { { 0.3, 0.25, 2.0 }, { 0.35, -1.5, 0.3 }, { 2.0, 0.6, 0.4 } }
    local d = { { 0.05, 0.02, -1 }, { 0.02, 1, 0.1 }, { -1, -0.1, 0.05 } }
    local pk = point_kernel(weft.mesh_query_point)
    local res = {}
    for _, dev in ipairs { "cpu", "cuda:0" } do
      local m, P, arrs, out = setup(ray_k, tetra_pts, tetra_idx, { o, d }, 3, dev)
      local m2, P2, arrs2, out2 = setup(pk, tetra_pts, tetra_idx, { tetra_q }, #tetra_q, dev)
      -- a hash-grid loop's adjoint restarts the query on the device too
      local x = weft.array({ { 0, 0, 0 }, { 0.3, 0, 0 }, { 0, 0.2, 0.1 }, { 0.1, 0.1, 0.3 } }, vec3,
                           { device = dev, requires_grad = true })
      local g = weft.HashGrid(8, 8, 8, { device = dev })
      g:build(x, 0.5)
      local e = weft.zeros(1, weft.float32, { device = dev, requires_grad = true })
      local tape = weft.Tape()
      tape:record(function() weft.launch(near_k, 4, { g.id, x, e }, { device = dev }) end)
      tape:backward(e)
      res[dev] = { tape_grads(ray_k, 3, m, P, arrs, out, dev), tape_grads(pk, #tetra_q, m2, P2, arrs2, out2, dev),
                   { x.grad:to("cpu"):totable() } }
    end
    for a, ga in ipairs(res.cpu) do
      for b, gb in ipairs(ga) do
        for i, e in ipairs(gb) do
          for c = 1, 3 do
            local x, y = e[c], res["cuda:0"][a][b][i][c]
            assert(math.abs(x - y) <= 1e-4 * math.max(1, math.abs(x)),
                   string.format("%d %d %d %d: cpu %g cuda %g", a, b, i, c, x, y))
          end
        end
      end
    end
  end)
end)
