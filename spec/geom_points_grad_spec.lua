-- Derivatives with respect to a mesh's points and velocities, whichever
-- way the mesh's id reaches the kernel: a parameter, an element of an
-- array of ids, a field of a struct. Forward mode (weft.jvp): the tangents
-- given for the argument arrays over a mesh's arrays reach the queries'
-- float fields (through mesh_get_point / mesh_get_velocity, which read the
-- tangents the mesh is pointed at before each tangent launch). Reverse
-- mode (tape:backward, weft.jacobian): their adjoints reach the arrays'
-- gradients, and a tape whose replay would read moved points is refused.
-- Checked against central differences of the launch with the points,
-- velocities and query arguments moved (the mesh refit at each step).
local ffi = require "ffi"
local weft = require "weft"

local vec3 = weft.vec3
local pts = { { 0, 0, 0 }, { 1.1, 0.1, -0.05 }, { 0.15, 0.95, 0.1 }, { 0.2, 0.25, 1.05 } }
local idx = { 0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3 }
local vels = { { 0.1, 0.2, 0.3 }, { -0.2, 0.1, 0.0 }, { 0.3, -0.1, 0.2 }, { 0.0, 0.4, -0.1 } }
-- query points (closest points inside faces) and rays (hitting a face)
local qs = { { 0.35, 0.3, -0.3 }, { 0.3, 0.3, 0.25 }, { 0.6, -0.4, 0.5 } }
local os_ = { { 0.3, 0.25, 2.0 }, { 0.35, -1.5, 0.3 }, { 2.0, 0.6, 0.4 } }
local ds = { { 0.05, 0.02, -1 }, { 0.02, 1, 0.1 }, { -1, -0.1, 0.05 } }
-- the tangents of the points, velocities, query points and ray origins
local tpts = { { 0.2, -0.1, 0.3 }, { -0.3, 0.2, 0.1 }, { 0.1, 0.3, -0.2 }, { 0.25, -0.15, 0.2 } }
local tvels = { { 0.5, -0.2, 0.1 }, { 0.1, 0.3, -0.4 }, { -0.2, 0.1, 0.2 }, { 0.3, 0.2, 0.1 } }
local tqs = { { 0.1, 0.2, -0.1 }, { -0.2, 0.1, 0.3 }, { 0.2, -0.1, 0.1 } }
local tos = { { 0.1, -0.2, 0.05 }, { 0.2, 0.1, -0.1 }, { -0.1, 0.2, 0.1 } }

-- Every float field of the queries, mixed into one number: the closest
-- point's u, v and position, the ray's t, u, v and normal, a face normal
-- and the velocity at the closest point; plus the first point read
-- directly (its tangent comes from the array's own).
local probe = weft.func{ id = weft.uint64, P = weft.array(vec3), q = vec3, o = vec3, d = vec3,
  i = weft.int32, function(id, P, q, o, d, i)
    local s = 0.0
    local c = weft.mesh_query_point(id, q, 10.0)
    if c.result then
      s = s + 1.1 * c.u - 0.6 * c.v
        + weft.dot(weft.mesh_eval_position(id, c.face, c.u, c.v), vec3(0.4, -0.3, 0.7))
        + weft.dot(weft.mesh_eval_velocity(id, c.face, c.u, c.v), vec3(-0.5, 0.8, 0.2))
    end
    local r = weft.mesh_query_ray(id, o, d, 100.0)
    if r.result then
      s = s + 0.7 * r.t + 1.3 * r.u - 0.9 * r.v + weft.dot(r.normal, vec3(0.3, -0.7, 0.5))
    end
    s = s + weft.dot(weft.mesh_eval_face_normal(id, i), vec3(0.2, 0.5, -0.4))
    return s + 0.8 * P[0][0]
  end }

local S = weft.struct{ { "scale", weft.float32 }, { "mesh", weft.uint64 } }
local A = weft.array(vec3)
local kernels = {
  parameter = weft.kernel{ P = A, V = A, id = weft.uint64, q = A, o = A, d = A,
    out = weft.array(weft.float32), function(P, V, id, q, o, d, out)
      local i = weft.tid()
      out[i] = probe(id, P, q[i], o[i], d[i], i) + V[0][1]
    end },
  array = weft.kernel{ P = A, V = A, ids = weft.array(weft.uint64), q = A, o = A, d = A,
    out = weft.array(weft.float32), function(P, V, ids, q, o, d, out)
      local i = weft.tid()
      out[i] = probe(ids[1], P, q[i], o[i], d[i], i) + V[0][1]
    end },
  struct = weft.kernel{ P = A, V = A, s = S, q = A, o = A, d = A,
    out = weft.array(weft.float32), function(P, V, s, q, o, d, out)
      local i = weft.tid()
      out[i] = s.scale * probe(s.mesh, P, q[i], o[i], d[i], i) + V[0][1]
    end },
}

-- a + h b, elementwise over lists of triples
local function along(a, b, h)
  local r = {}
  for i, e in ipairs(a) do r[i] = { e[1] + h * b[i][1], e[2] + h * b[i][2], e[3] + h * b[i][3] } end
  return r
end

-- The launch's arguments for the id form `form` over mesh m (points P,
-- velocities V) and the query arrays.
local function id_arg(form, m, dev)
  if form == "parameter" then return m.id end
  if form == "array" then return weft.array({ 0, m.id }, weft.uint64, { device = dev }) end
  return S{ scale = 1.5, mesh = m.id }
end

local function mesh(dev, requires_grad)
  local o = { device = dev, requires_grad = requires_grad }
  local P, V = weft.array(pts, vec3, o), weft.array(vels, vec3, o)
  return weft.Mesh{ points = P, velocities = V, indices = weft.array(idx, weft.int32, o) }, P, V
end

-- Central differences of the outputs along the directions dir = { of
-- the points, velocities, query points, ray origins } (default: the
-- tangents above), the mesh refit at each step.
local function differences(form, h, dir)
  dir = dir or { tpts, tvels, tqs, tos }
  local m, P, V = mesh()
  local function run(s)
    weft.copy(P, weft.array(along(pts, dir[1], s), vec3))
    weft.copy(V, weft.array(along(vels, dir[2], s), vec3))
    m:refit()
    local out = weft.zeros(#qs, weft.float32)
    weft.launch(kernels[form], #qs, { P, V, id_arg(form, m), weft.array(along(qs, dir[3], s), vec3),
                                      weft.array(along(os_, dir[4], s), vec3), weft.array(ds, vec3), out })
    return out:totable()
  end
  local hi, lo, r = run(h), run(-h), {}
  for i = 1, #hi do r[i] = (hi[i] - lo[i]) / (2 * h) end
  return r
end

-- the output tangents (opts.no_points: none given for the mesh's arrays;
-- opts.device: where everything lives)
local function jvp(form, opts)
  opts = opts or {}
  local dev = opts.device
  local o = { device = dev }
  local m, P, V = mesh(dev)
  local out, ot = weft.zeros(#qs, weft.float32, o), weft.zeros(#qs, weft.float32, o)
  local tP, tV = false, false
  if not opts.no_points then tP, tV = weft.array(tpts, vec3, o), weft.array(tvels, vec3, o) end
  weft.jvp(kernels[form], #qs, { P, V, id_arg(form, m, dev), weft.array(qs, vec3, o),
                                 weft.array(os_, vec3, o), weft.array(ds, vec3, o) },
           { tP, tV, false, weft.array(tqs, vec3, o), weft.array(tos, vec3, o), false }, { out }, { ot })
  return ot:to("cpu"):totable(), m
end

describe("weft.jvp through a mesh's points and velocities", function()
  for _, form in ipairs { "parameter", "array", "struct" } do
    it("carries their tangents through the queries, the id passed as a " .. form, function()
      local got, want = jvp(form), differences(form, 1e-3)
      local without = jvp(form, { no_points = true })
      for i = 1, #qs do
        assert(math.abs(got[i] - want[i]) < 1e-2 * math.max(1, math.abs(want[i])),
               string.format("%s output %d: jvp %.6g, finite difference %.6g", form, i, got[i], want[i]))
        -- the points' and velocities' part is there, and not small
        assert(math.abs(got[i] - without[i]) > 0.05,
               string.format("%s output %d: %.6g with the points' tangents, %.6g without", form, i,
                             got[i], without[i]))
      end
    end)
  end

  it("reads no tangent for a mesh whose arrays are not arguments", function()
    -- the same kernel given copies of the mesh's arrays: their tangents
    -- reach the direct reads only, the mesh's points are no input
    local m = mesh()
    local k = kernels.array
    local out, ot = weft.zeros(#qs, weft.float32), weft.zeros(#qs, weft.float32)
    local args = { weft.array(pts, vec3), weft.array(vels, vec3), id_arg("array", m), weft.array(qs, vec3),
                   weft.array(os_, vec3), weft.array(ds, vec3) }
    weft.jvp(k, #qs, args, { weft.array(tpts, vec3), weft.array(tvels, vec3), false, false, false, false },
             { out }, { ot })
    for _, v in ipairs(ot:totable()) do
      assert(math.abs(v - (0.8 * tpts[1][1] + tvels[1][2])) < 1e-6, tostring(v))
    end
    -- and a later launch with the mesh's own arrays is not left reading
    -- the tangents of an earlier one
    local got = jvp("array")
    local again = jvp("array", { no_points = true })
    assert.is_true(math.abs(got[1] - again[1]) > 0.05)
  end)

  it("reads the tangents of a larger array that holds the points", function()
    -- the mesh's points are rows 1 .. 4 of a 5-point array passed whole
    local big = weft.array({ { 9, 9, 9 }, pts[1], pts[2], pts[3], pts[4] }, vec3)
    local P = weft.array(ffi.cast("char *", big:ptr()) + 12, vec3, { shape = #pts, copy = false })
    local m = weft.Mesh{ points = P, velocities = weft.array(vels, vec3), indices = weft.array(idx, weft.int32) }
    local k = weft.kernel{ B = A, id = weft.uint64, q = A, out = weft.array(weft.float32),
      function(B, id, q, out)
        local i = weft.tid()
        out[i] = weft.mesh_query_point(id, q[i], 10.0).u + 0.0 * B[0][0]
      end }
    local tb = weft.array({ { 5, 5, 5 }, tpts[1], tpts[2], tpts[3], tpts[4] }, vec3)
    local out, ot = weft.zeros(#qs, weft.float32), weft.zeros(#qs, weft.float32)
    weft.jvp(k, #qs, { big, m.id, weft.array(qs, vec3) }, { tb, false, false }, { out }, { ot })
    -- the same as with the points' own array and tangent
    local m2 = weft.Mesh{ points = weft.array(pts, vec3), indices = weft.array(idx, weft.int32) }
    local out2, ot2 = weft.zeros(#qs, weft.float32), weft.zeros(#qs, weft.float32)
    weft.jvp(k, #qs, { m2.points, m2.id, weft.array(qs, vec3) }, { weft.array(tpts, vec3), false, false },
             { out2 }, { ot2 })
    local a, b = ot:totable(), ot2:totable()
    for i = 1, #qs do assert.is_true(math.abs(a[i] - b[i]) < 1e-6 and math.abs(b[i]) > 0.01) end
  end)

  it("refuses an array over part of the points: its tangent cannot cover them", function()
    local m, P = mesh()
    local part = weft.array(P:ptr(), vec3, { shape = 2, copy = false })
    local out, ot = weft.zeros(#qs, weft.float32), weft.zeros(#qs, weft.float32)
    local ok, err = pcall(weft.jvp, kernels.array, #qs,
                          { part, weft.array(vels, vec3), id_arg("array", m), weft.array(qs, vec3),
                            weft.array(os_, vec3), weft.array(ds, vec3) },
                          { weft.zeros(2, vec3), false, false, false, false, false }, { out }, { ot })
    assert.is_false(ok)
    assert.matches("geom_points_grad_spec.lua:%d+: weft.jvp of '.-': 'P' overlaps the points of a "
                   .. "weft.Mesh, but not as a compact float32 array holding them all", err)
  end)

  it("match the CPU's on a CUDA device (scripts/cuda-emu)", function()
    if require("helpers.cuda").missing() then return end
    for _, form in ipairs { "parameter", "array", "struct" } do
      local cpu, gpu = jvp(form), jvp(form, { device = "cuda:0" })
      local none = jvp(form, { device = "cuda:0", no_points = true })
      for i = 1, #qs do
        assert(math.abs(cpu[i] - gpu[i]) < 1e-4 * math.max(1, math.abs(cpu[i])),
               string.format("%s output %d: cpu %.6g, cuda %.6g", form, i, cpu[i], gpu[i]))
        assert.is_true(math.abs(gpu[i] - none[i]) > 0.05)
      end
    end
  end)
end)

-- the gradient weights of the outputs (the loss is their weighted sum)
local w = { 0.7, -1.2, 0.9 }

-- The tape's gradients of the points, velocities, query points and ray
-- origins (opts.late: the mesh built before its arrays required them).
local function tape_grads(form, opts)
  opts = opts or {}
  local m, P, V = mesh(nil, not opts.late)
  if opts.late then P.requires_grad, V.requires_grad = true, true end
  local rg = { requires_grad = true }
  local q, o = weft.array(qs, vec3, rg), weft.array(os_, vec3, rg)
  local out = weft.zeros(#qs, weft.float32, rg)
  local tape = weft.Tape()
  tape:record(function()
    weft.launch(kernels[form], #qs, { P, V, id_arg(form, m), q, o, weft.array(ds, vec3), out })
  end)
  tape:backward{ grads = { [out] = weft.array(w, weft.float32) } }
  return { P.grad:totable(), V.grad:totable(), q.grad:totable(), o.grad:totable() }
end

local function zeros_like(t)
  local r = {}
  for i = 1, #t do r[i] = { 0, 0, 0 } end
  return r
end

describe("tape:backward into a mesh's points and velocities", function()
  for _, form in ipairs { "parameter", "array", "struct" } do
    for _, late in ipairs { false, true } do
      it(string.format("match central differences, the id passed as a%s %s%s", form == "array" and "n" or "",
                       form, late and ", gradients required after the mesh was built" or ""), function()
        local g = tape_grads(form, { late = late })
        local lists = { pts, vels, qs, os_ }
        for a = 1, 4 do
          for i = 1, #lists[a] do
            for c = 1, 3 do
              local dir = { zeros_like(pts), zeros_like(vels), zeros_like(qs), zeros_like(os_) }
              dir[a][i][c] = 1
              local d, want = differences(form, 1e-3, dir), 0
              for j = 1, #qs do want = want + w[j] * d[j] end
              local got = g[a][i][c]
              assert(math.abs(got - want) < 1e-2 * math.max(1, math.abs(want)),
                     string.format("%s array %d element %d component %d: tape %.6g, finite difference %.6g",
                                   form, a, i - 1, c, got, want))
            end
          end
        end
      end)
    end
  end

  it("weft.jacobian takes the points' rows through the queries as well", function()
    -- its adjoints are scratch arrays, not the points' .grad
    local m, P, V = mesh(nil, true)
    local args = { P, V, id_arg("array", m), weft.array(qs, vec3), weft.array(os_, vec3), weft.array(ds, vec3) }
    local J = weft.jacobian(kernels.array, #qs, args, { weft.zeros(#qs, weft.float32) }, 1, 1):totable()
    for i = 1, #qs do
      for e = 1, #pts do
        for c = 1, 3 do
          local dir = { zeros_like(pts), zeros_like(vels), zeros_like(qs), zeros_like(os_) }
          dir[1][e][c] = 1
          local want = differences("array", 1e-3, dir)[i]
          local got = J[i][3 * (e - 1) + c]
          assert(math.abs(got - want) < 1e-2 * math.max(1, math.abs(want)),
                 string.format("d out[%d] / d P[%d][%d]: jacobian %.6g, finite difference %.6g", i - 1,
                               e - 1, c - 1, got, want))
        end
      end
    end
    for _, v in ipairs(P.grad:totable()) do assert.are.same({ 0, 0, 0 }, v) end -- left alone
  end)

  -- A tape whose query replays would read moved points is refused, for
  -- ids that kernels read from arrays or structs as for parameters.
  local move = weft.kernel{ p = A, function(p)
    local i = weft.tid()
    p[i] = p[i] + vec3(0.1, 0.0, 0.0)
  end }
  for _, form in ipairs { "parameter", "array", "struct" } do
    for _, after in ipairs { "refit", "move" } do
      it(string.format("refuse a replay after a %s, the id passed as a%s %s", after,
                       form == "array" and "n" or "", form), function()
        local m, P, V = mesh(nil, true)
        local out = weft.zeros(#qs, weft.float32, { requires_grad = true })
        local tape = weft.Tape()
        tape:record(function()
          weft.launch(kernels[form], #qs, { P, V, id_arg(form, m), weft.array(qs, vec3), weft.array(os_, vec3),
                                            weft.array(ds, vec3), out })
          if after == "move" then weft.launch(move, #pts, { P }) end
        end)
        if after == "refit" then m:refit() end
        local ok, err = pcall(function() tape:backward(weft.zeros(1, weft.float32)) end)
        assert.is_false(ok)
        local what = ({ parameter = "the object passed as 'id'", struct = "the object held by 's.mesh'",
                        array = "a live weft.Mesh (weft.mesh_query_point at " })[form]
        assert.matches(after == "refit" and "queried " .. what or "needs the arrays of " .. what, err, 1, true)
        assert.matches(after == "refit" and "refit or rebuilt afterwards" or "launch 2 ('move') overwrote one",
                       err, 1, true)
      end)
    end
  end
end)
