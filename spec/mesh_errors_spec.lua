-- Bad meshes and bad ids: clear errors, never a crash or a wild read (the
-- device mismatch case runs under scripts/cuda-emu).
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local function mesh_error(args)
  local ok, err = pcall(function() local m = weft.Mesh(args) return m end)
  assert.is_false(ok)
  return tostring(err)
end

local pts = { { 0, 0, 0 }, { 1, 0, 0 }, { 0, 1, 0 } }

describe("weft.Mesh and weft.Bvh errors", function()
  it("reports bad indices, counts, empty meshes and NaN points", function()
    local P = weft.array(pts, vec3)
    assert.matches("mesh_errors_spec.lua:%d+: weft.Mesh: indices%[2%] = 3 is out of range for the points",
                   mesh_error{ points = P, indices = weft.array({ 0, 1, 3 }, weft.int32) })
    assert.matches("indices%[0%] = %-1 is out of range",
                   mesh_error{ points = P, indices = weft.array({ -1, 1, 2 }, weft.int32) })
    assert.matches("weft.Mesh: indices has 4 entries, not a multiple of 3",
                   mesh_error{ points = P, indices = weft.array({ 0, 1, 2, 0 }, weft.int32) })
    assert.matches("weft.Mesh: indices is empty",
                   mesh_error{ points = P, indices = weft.zeros(0, weft.int32) })
    assert.matches("weft.Mesh: points is empty",
                   mesh_error{ points = weft.zeros(0, vec3), indices = weft.array({ 0, 1, 2 }, weft.int32) })
    local bad = weft.array({ { 0, 0, 0 }, { 0 / 0, 0, 0 }, { 0, 1, 0 } }, vec3)
    assert.matches("weft.Mesh: points%[1%] is not finite",
                   mesh_error{ points = bad, indices = weft.array({ 0, 1, 2 }, weft.int32) })
    assert.matches("weft.Mesh: points must be an array of weft.vec3, got an array of weft.vec3d",
                   mesh_error{ points = weft.array(pts, weft.vec3d), indices = weft.array({ 0, 1, 2 }, weft.int32) })
    assert.matches("weft.Mesh: indices must be an array of weft.int32, got an array of weft.float32",
                   mesh_error{ points = P, indices = weft.array({ 0, 1, 2 }, weft.float32) })
    assert.matches("weft.Mesh: unknown field 'point'", mesh_error{ point = P })
    assert.matches("velocities has 2 entries but points has 3",
                   mesh_error{ points = P, indices = weft.array({ 0, 1, 2 }, weft.int32),
                               velocities = weft.zeros(2, vec3) })
    -- refit checks the moved points too
    local m = weft.Mesh{ points = P, indices = weft.array({ 0, 1, 2 }, weft.int32) }
    P[1] = { math.huge, 0, 0 }
    local ok, err = pcall(m.refit, m)
    assert.is_false(ok)
    assert.matches("weft.Mesh: points%[1%] is not finite", tostring(err))
    local ok2, err2 = pcall(weft.Bvh, weft.zeros(2, vec3), weft.zeros(3, vec3))
    assert.is_false(ok2)
    assert.matches("weft.Bvh: lowers has 2 boxes but uppers has 3", tostring(err2))
  end)

  it("reports devices that differ", function()
    if not weft.is_cuda_available() then return end
    local err = mesh_error{ points = weft.array(pts, vec3),
                            indices = weft.array({ 0, 1, 2 }, weft.int32, { device = "cuda:0" }) }
    assert.matches("weft.Mesh: points is on cpu but indices is on cuda:0", err)
  end)

  it("fails a debug launch on an id that is not a live mesh", function()
    local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32), function(id, out)
      local q = weft.mesh_query_point(id, weft.vec3(), 10.0)
      out[weft.tid()] = q.u
    end }
    local tp, ti = G.cube(1.0)
    local m = weft.Mesh{ points = weft.array(tp, vec3), indices = weft.array(ti, weft.int32) }
    local b = weft.Bvh(weft.zeros(1, vec3), weft.ones(1, vec3))
    local out = weft.zeros(4, weft.float32)
    local mode = weft.config.mode
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, k, 4, { m.id, out })
    assert.is_true(ok, tostring(err))
    ok, err = pcall(weft.launch, k, 4, { weft.uint64(12345), out })
    assert.is_false(ok)
    assert.matches("mesh_errors_spec.lua:%d+: weft.mesh_query_point: id 12345 is not a live weft.Mesh", tostring(err))
    ok, err = pcall(weft.launch, k, 4, { b.id, out })
    assert.is_false(ok)
    assert.matches("weft.mesh_query_point: id %d+ is a weft.Bvh, not a weft.Mesh", tostring(err))
    -- element readers: an index out of range is an error too, not zeros
    local kg = weft.kernel{ id = weft.uint64, o = weft.array(vec3), function(id, o)
      o[0] = weft.mesh_get_point(id, 8)
    end }
    local o3 = weft.zeros(1, vec3)
    ok, err = pcall(weft.launch, kg, 1, { m.id, o3 })
    assert.is_false(ok)
    assert.matches("mesh_errors_spec.lua:%d+: weft.mesh_get_point: index 8 is out of range for 8 points",
                   tostring(err))
    local ke = weft.kernel{ id = weft.uint64, o = weft.array(vec3), function(id, o)
      o[0] = weft.mesh_eval_velocity(id, 0, 0.5, 0.5)
    end }
    ok, err = pcall(weft.launch, ke, 1, { m.id, o3 })
    assert.is_false(ok)
    assert.matches("weft.mesh_get_velocity: index %d is out of range for 0 velocities", tostring(err))
    weft.config.mode = mode
  end)
end)
