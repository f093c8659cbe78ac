-- weft.jvp and a mesh's points: forward mode has no tangents of the points
-- a mesh query reads, so a tangent given for an array that a queried mesh
-- reads (its points, passed to the kernel as well) is refused at the
-- query's line instead of being dropped on the way through the query.
local weft = require "weft"

local vec3 = weft.vec3
local pts = { { 0, 0, 0 }, { 1.1, 0.1, -0.05 }, { 0.15, 0.95, 0.1 }, { 0.2, 0.25, 1.05 } }
local idx = { 0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3 }
local qs = { { 0.35, 0.3, -0.3 }, { 0.3, 0.3, 0.25 }, { 0.6, -0.4, 0.5 } }

-- out[i] = the closest point's u plus the first point's x (read directly)
local k = weft.kernel{ id = weft.uint64, P = weft.array(vec3), q = weft.array(vec3),
  out = weft.array(weft.float32), function(id, P, q, out)
    local i = weft.tid()
    local r = weft.mesh_query_point_no_sign(id, q[i], 10.0)
    out[i] = r.u + P[0][0]
  end }
local QUERY_LINE = 16

local function mesh()
  local P = weft.array(pts, vec3)
  return weft.Mesh{ points = P, indices = weft.array(idx, weft.int32) }, P
end

describe("weft.jvp through a mesh query", function()
  it("refuses a tangent of the queried mesh's points, at the query's line", function()
    local m, P = mesh()
    local q, out = weft.array(qs, vec3), weft.zeros(#qs, weft.float32)
    local tP = weft.full(#pts, { 1, 1, 1 }, vec3)
    local ok, err = pcall(weft.jvp, k, #qs, { m.id, P, q }, { false, tP, false }, { out },
                          { weft.zeros(#qs, weft.float32) })
    assert.is_false(ok)
    assert.matches("geom_jvp_points_spec.lua:" .. QUERY_LINE .. ": ", err, 1, true)
    assert.matches("weft.jvp", err, 1, true)
    assert.matches("'P'", err, 1, true)
    assert.matches("mesh", err, 1, true)
  end)

  it("refuses another array over the points' memory as well", function()
    local m, P = mesh()
    local alias = weft.array(P:ptr(), vec3, { shape = #pts, copy = false })
    local q, out = weft.array(qs, vec3), weft.zeros(#qs, weft.float32)
    local ok, err = pcall(weft.jvp, k, #qs, { m.id, alias, q }, { false, weft.zeros(#pts, vec3), false },
                          { out }, { weft.zeros(#qs, weft.float32) })
    assert.is_false(ok)
    assert.matches(":" .. QUERY_LINE .. ": ", err, 1, true)
  end)

  it("still carries tangents of other arrays, and of a copy of the points", function()
    local m, P = mesh()
    local q, out = weft.array(qs, vec3), weft.zeros(#qs, weft.float32)
    local P2 = weft.clone(P)
    local tP = weft.full(#pts, { 1, 1, 1 }, vec3)
    local tq = weft.zeros(#qs, vec3)
    local ot = weft.zeros(#qs, weft.float32)
    weft.jvp(k, #qs, { m.id, P2, q }, { false, tP, tq }, { out }, { ot })
    for _, v in ipairs(ot:totable()) do assert.are.equal(1, v) end -- d(P2[0][0]) only
  end)
end)
