-- Gradients through meshes: mesh_eval_position and mesh_eval_velocity
-- with respect to the mesh's points (and velocities) and to u and v,
-- against central finite differences.
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local k = weft.kernel{ id = weft.uint64, uv = weft.array(vec3), loss = weft.array(weft.float32),
  function(id, uv, loss)
    local i = weft.tid()
    local p = weft.mesh_eval_position(id, i * 3, uv[i].x, uv[i].y)
    local v = weft.mesh_eval_velocity(id, i * 2 + 1, uv[i].y, uv[i].z)
    weft.atomic_add(loss, 0, p.x + 2.0 * p.y + p.z * p.z + v.x * p.y - 0.5 * v.z)
  end }

local function setup()
  local pts, idx = G.cube(1.0)
  local vel = {}
  for i, p in ipairs(pts) do vel[i] = { 0.1 * i, p[2], -p[1] } end
  local P = weft.array(pts, vec3, { requires_grad = true })
  local V = weft.array(vel, vec3, { requires_grad = true })
  local m = weft.Mesh{ points = P, indices = weft.array(idx, weft.int32), velocities = V }
  local uv = weft.array({ { 0.2, 0.3, 0.4 }, { 0.5, 0.1, 0.2 }, { 0.1, 0.6, 0.3 } }, vec3, { requires_grad = true })
  return m, P, V, uv
end

local function loss_of(m, uv)
  local loss = weft.zeros(1, weft.float32)
  weft.launch(k, 3, { m.id, uv, loss })
  return loss:totable()[1]
end

-- central difference of the loss in component c of element i of array a
local function fd(m, uv, a, i, c, h)
  local e = a:totable()[i + 1]
  local function at(x)
    local v = { e[1], e[2], e[3] }
    v[c] = x
    a[i] = v
    return loss_of(m, uv)
  end
  local d = (at(e[c] + h) - at(e[c] - h)) / (2 * h)
  a[i] = e
  return d
end

describe("mesh gradients", function()
  it("reach points, velocities, u and v (finite differences)", function()
    local m, P, V, uv = setup()
    local loss = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { m.id, uv, loss }) end)
    tape:backward(loss)
    local checked = 0
    for _, arr in ipairs { { P, 8 }, { V, 8 }, { uv, 3 } } do
      local a, n = arr[1], arr[2]
      local g = a.grad:totable()
      for i = 0, n - 1 do
        for c = 1, 3 do
          local want = fd(m, uv, a, i, c, 1e-2)
          if math.abs(g[i + 1][c] - want) > 2e-3 * math.max(1, math.abs(want)) then
            error(string.format("element %d component %d: gradient %.6g, finite difference %.6g", i, c,
                                g[i + 1][c], want))
          end
          if want ~= 0 then checked = checked + 1 end
        end
      end
    end
    assert.is_true(checked > 20)
  end)

  it("gives no gradient to points that do not require one", function()
    local pts, idx = G.cube(1.0)
    local P = weft.array(pts, vec3)
    local m = weft.Mesh{ points = P, indices = weft.array(idx, weft.int32) }
    local uv = weft.array({ { 0.2, 0.3, 0.4 }, { 0.5, 0.1, 0.2 }, { 0.1, 0.6, 0.3 } }, vec3, { requires_grad = true })
    local loss = weft.zeros(1, weft.float32, { requires_grad = true })
    local kp = weft.kernel{ id = weft.uint64, w = weft.array(vec3), l = weft.array(weft.float32),
      function(id, w, l)
        local i = weft.tid()
        local p = weft.mesh_eval_position(id, i, w[i].x, w[i].y)
        weft.atomic_add(l, 0, p.x + p.y)
      end }
    local tape = weft.Tape()
    tape:record(function() weft.launch(kp, 3, { m.id, uv, loss }) end)
    tape:backward(loss)
    assert.is_nil(P.grad)
    assert.is_true(math.abs(uv.grad:totable()[1][1]) > 0)
  end)
end)
