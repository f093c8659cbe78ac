-- Volume builtins in kernels: sampling (closest, trilinear), the gradient
-- builtin, lookups, index/world transforms, gradients with respect to the
-- sample position through the tape, and bad ids in debug mode.
local ffi = require "ffi"
local weft = require "weft"

local LINEAR, CLOSEST = weft.Volume.LINEAR, weft.Volume.CLOSEST

-- f(x, y, z) on an NX x NY x NZ block, as a volume with voxel size h
local NX, NY, NZ = 12, 9, 20
local function field_volume(f, h, origin)
  local a = weft.zeros({ NX, NY, NZ }, weft.float32)
  local p = ffi.cast("float*", a.h.data)
  for x = 0, NX - 1 do
    for y = 0, NY - 1 do
      for z = 0, NZ - 1 do p[(x * NY + y) * NZ + z] = f(x, y, z) end
    end
  end
  return weft.Volume.from_dense(a, { voxel_size = h or 1, origin = origin or { 0, 0, 0 }, background = -7 })
end
local function linear(x, y, z) return x + 10 * y + 100 * z end

local sample_k = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), mode = weft.int32,
  val = weft.array(weft.float32), grad = weft.array(weft.vec3), val2 = weft.array(weft.float32),
  function(id, p, mode, val, grad, val2)
    local i = weft.tid()
    local v, g = weft.volume_sample_grad_f(id, p[i], mode)
    val[i] = v
    grad[i] = g
    val2[i] = weft.volume_sample_f(id, p[i], mode)
  end,
}

local function run_sample(v, pts, mode)
  local n = #pts
  local p = weft.array(pts, weft.vec3)
  local val, grad, val2 = weft.zeros(n), weft.zeros(n, weft.vec3), weft.zeros(n)
  weft.launch(sample_k, n, { v.id, p, mode, val, grad, val2 })
  return val:totable(), grad:totable(), val2:totable()
end

describe("volume_sample_f and volume_sample_grad_f", function()
  it("interpolate a linear field exactly, with its gradient", function()
    local v = field_volume(linear)
    local val, grad, val2 = run_sample(v, { { 1.25, 2.5, 3.75 }, { 10.5, 0.25, 18.125 }, { 3, 4, 5 } }, LINEAR)
    assert.same({ 1.25 + 25 + 375, 10.5 + 2.5 + 1812.5, 3 + 40 + 500 }, val)
    assert.same(val, val2)
    for _, g in ipairs(grad) do assert.same({ 1, 10, 100 }, g) end
  end)

  it("take the closest voxel (halves away from zero) with a zero gradient", function()
    local v = field_volume(linear)
    local val, grad = run_sample(v, { { 0.5, 0.5, 0.5 }, { 2.49, 3.51, 4 }, { -3, 0, 0 } }, CLOSEST)
    assert.same({ 111, 2 + 40 + 400, -7 }, val)
    assert.same({ { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }, grad)
  end)

  it("read the same values inside the block table's box and outside it", function()
    -- the box is the active voxels grown by one, in whole 8^3 blocks;
    -- cells beyond it take the tree walk: both must agree with the field
    local function f(x, y, z) return 1 + x + 10 * y + 100 * z end
    local v = field_volume(f)
    local function at(x, y, z)
      if x < 0 or y < 0 or z < 0 or x >= NX or y >= NY or z >= NZ then return -7 end
      return f(x, y, z)
    end
    local pts, want = {}, {}
    for x = -17.75, NX + 17, 2.375 do
      for y = -17.5, NY + 17, 3.125 do
        for z = -17.25, NZ + 17, 4.5 do
          local i, j, k = math.floor(x), math.floor(y), math.floor(z)
          local fx, fy, fz = x - i, y - j, z - k
          local s = 0
          for c = 0, 7 do
            local ox, oy, oz = math.floor(c / 4), math.floor(c / 2) % 2, c % 2
            s = s + (ox == 1 and fx or 1 - fx) * (oy == 1 and fy or 1 - fy) * (oz == 1 and fz or 1 - fz)
                * at(i + ox, j + oy, k + oz)
          end
          pts[#pts + 1], want[#want + 1] = { x, y, z }, s
        end
      end
    end
    local val = run_sample(v, pts, LINEAR)
    for n = 1, #pts do
      assert.near(want[n], val[n], 1e-3 * (1 + math.abs(want[n])),
                  ("at %g %g %g"):format(pts[n][1], pts[n][2], pts[n][3]))
    end
  end)

  it("give the background outside and across leaf borders", function()
    local v = field_volume(linear)
    -- x = 7.5 straddles the first and second leaf; z = 19.5 the block's end
    local val = run_sample(v, { { 7.5, 1, 1 }, { 1, 1, 19.5 }, { -50, 3, 3 } }, LINEAR)
    assert.same({ 7.5 + 10 + 100, 0.5 * (1 + 10 + 1900) + 0.5 * -7, -7 }, val)
  end)
end)

describe("volume gradients w.r.t. the sample position", function()
  local wave = function(x, y, z) return math.sin(0.7 * x) * math.cos(0.4 * y) + 0.05 * z * z end
  local loss_k = weft.kernel{
    id = weft.uint64, p = weft.array(weft.vec3), out = weft.array(weft.float32),
    function(id, p, out)
      local i = weft.tid()
      local q = weft.volume_world_to_index(id, p[i])
      out[i] = weft.volume_sample_f(id, q, 1) * 2.0
    end,
  }

  it("match finite differences through the world transform", function()
    local v = field_volume(wave, 0.5, { 1, -2, 0.25 })
    -- world points well inside cells (differences must not cross a border)
    local pts = { { 2.1, -1.3, 3.2 }, { 4.6, 0.1, 7.1 }, { 3.35, 1.1, 5.6 } }
    local p = weft.array(pts, weft.vec3, { requires_grad = true })
    local out = weft.zeros(#pts, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(loss_k, #pts, { v.id, p }, { outputs = { out } }) end)
    tape:backward{ grads = { [out] = weft.ones(#pts) } }
    local g = p.grad:totable()
    local eps = 1e-2
    for i, x in ipairs(pts) do
      for c = 1, 3 do
        local hi, lo = { x[1], x[2], x[3] }, { x[1], x[2], x[3] }
        hi[c], lo[c] = hi[c] + eps, lo[c] - eps
        local o = weft.zeros(2)
        weft.launch(loss_k, 2, { v.id, weft.array({ hi, lo }, weft.vec3) }, { outputs = { o } })
        local fd = (o[0] - o[1]) / (2 * eps)
        assert.near(fd, g[i][c], 2e-2 * math.max(1, math.abs(fd)))
      end
      -- and the builtin's own gradient agrees (index space: times 1/h)
    end
    local q = weft.zeros(#pts, weft.vec3)
    local to_index = weft.kernel{ id = weft.uint64, pp = weft.array(weft.vec3), qq = weft.array(weft.vec3),
      function(id, pp, qq) qq[weft.tid()] = weft.volume_world_to_index(id, pp[weft.tid()]) end }
    weft.launch(to_index, #pts, { v.id, p, q })
    local _, grad = run_sample(v, q:totable(), LINEAR)
    for i = 1, #pts do
      for c = 1, 3 do assert.near(2 * grad[i][c] / 0.5, g[i][c], 1e-3 * math.max(1, math.abs(g[i][c]))) end
    end
  end)
end)

describe("volume lookups, vec3 and int32 grids, transforms", function()
  it("read voxels of each type", function()
    local va = weft.zeros({ 3, 4, 5 }, weft.vec3f)
    va[1][2][3] = weft.vec3(1, 2, 3)
    local ia = weft.zeros({ 3, 4, 5 }, weft.int32)
    ia[2][3][4] = 77
    local vv = weft.Volume.from_dense(va, { background = { 9, 8, 7 } })
    local iv = weft.Volume.from_dense(ia, { background = -1 })
    local k = weft.kernel{ a = weft.uint64, b = weft.uint64, vo = weft.array(weft.vec3),
      io = weft.array(weft.int32),
      function(a, b, vo, io)
        vo[0] = weft.volume_lookup_v(a, 1, 2, 3)
        vo[1] = weft.volume_sample_v(a, weft.vec3(1.0, 2.0, 3.5), 1)
        vo[2] = weft.volume_sample_v(a, weft.vec3(-5.0, 0.0, 0.0), 0)
        io[0] = weft.volume_lookup_i(b, 2, 3, 4)
        io[1] = weft.volume_sample_i(b, weft.vec3(2.4, 2.6, 4.0))
        io[2] = weft.volume_lookup_i(b, 3, 0, 0)
      end }
    local vo, io = weft.zeros(3, weft.vec3), weft.zeros(3, weft.int32)
    weft.launch(k, 1, { vv.id, iv.id, vo, io })
    assert.same({ { 1, 2, 3 }, { 0.5, 1, 1.5 }, { 9, 8, 7 } }, vo:totable())
    assert.same({ 77, 77, -1 }, io:totable())
  end)

  it("pick the sampler by the type argument of volume_sample", function()
    local a = weft.zeros({ 3, 4, 5 })
    a[1][2][3] = 5
    local va = weft.zeros({ 3, 4, 5 }, weft.vec3f)
    va[1][2][3] = weft.vec3(1, 2, 3)
    local ia = weft.zeros({ 3, 4, 5 }, weft.int32)
    ia[1][2][3] = 9
    local fv, vv, iv = weft.Volume.from_dense(a), weft.Volume.from_dense(va), weft.Volume.from_dense(ia)
    local k = weft.kernel{ f = weft.uint64, v = weft.uint64, i = weft.uint64, out = weft.array(weft.vec3),
      function(f, v, i, out)
        local p = weft.vec3(1.0, 2.0, 3.5)
        out[0] = weft.vec3(weft.volume_sample(f, p, weft.Volume.LINEAR, weft.float32), 0.0,
                           weft.float32(weft.volume_sample(i, p, weft.Volume.CLOSEST, weft.int32)))
        out[1] = weft.volume_sample(v, p, weft.Volume.LINEAR, weft.vec3)
      end }
    local out = weft.zeros(2, weft.vec3)
    weft.launch(k, 1, { fv.id, vv.id, iv.id, out })
    assert.same({ { 2.5, 0, 0 }, { 0.5, 1, 1.5 } }, out:totable())
  end)

  it("give zeros when the sampler's type is not the grid's (as Warp)", function()
    local va = weft.full({ 2, 2, 2 }, { 3, 3, 3 }, weft.vec3f)
    local vv = weft.Volume.from_dense(va, { background = 1 })
    local f = weft.Volume.from_dense(weft.full({ 2, 2, 2 }, 3), { background = 1 })
    local k = weft.kernel{ a = weft.uint64, b = weft.uint64, out = weft.array(weft.float32),
      function(a, b, out)
        local p = weft.vec3(0.5, 0.5, 0.5)
        out[0] = weft.volume_sample_f(a, p, 1) + weft.volume_lookup_f(a, 0, 0, 0)
        out[1] = weft.float32(weft.volume_lookup_i(a, 0, 0, 0) + weft.volume_sample_i(b, p))
        out[2] = weft.volume_sample_v(b, p, 1).x + weft.volume_lookup_v(b, 0, 0, 0).y
        out[3] = weft.volume_sample_f(b, p, 1) + weft.volume_sample_v(a, p, 0).z
      end }
    local out = weft.zeros(4)
    weft.launch(k, 1, { vv.id, f.id, out })
    assert.same({ 0, 0, 0, 6 }, out:totable())
  end)

  it("map index and world coordinates both ways", function()
    local v = field_volume(linear, 0.25, { 1, -2, 0.5 })
    local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.vec3), function(id, out)
      out[0] = weft.volume_index_to_world(id, weft.vec3(4.0, 8.0, -2.0))
      out[1] = weft.volume_world_to_index(id, weft.vec3(2.0, 0.0, 0.0))
      out[2] = weft.volume_index_to_world_dir(id, weft.vec3(4.0, 8.0, -2.0))
      out[3] = weft.volume_world_to_index_dir(id, weft.vec3(2.0, 0.0, 0.5))
    end }
    local out = weft.zeros(4, weft.vec3)
    weft.launch(k, 1, { v.id, out })
    assert.same({ { 2, 0, 0 }, { 4, 8, -2 }, { 1, 2, -0.5 }, { 8, 0, 2 } }, out:totable())
  end)
end)

describe("volume ids in debug mode", function()
  local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32), function(id, out)
    out[0] = weft.volume_lookup_f(id, 0, 0, 0)
  end }
  it("reject an id that is not a live volume", function()
    local mode = weft.config.mode
    weft.config.mode = "debug"
    local out = weft.zeros(1)
    local ok, err = pcall(weft.launch, k, 1, { weft.uint64(12345), out })
    local g = weft.HashGrid(2, 2, 2)
    local ok2, err2 = pcall(weft.launch, k, 1, { g.id, out })
    local v = field_volume(linear)
    local ok3 = pcall(weft.launch, k, 1, { v.id, out })
    weft.config.mode = mode
    assert.is_false(ok)
    assert.matches("spec/volume_kernel_spec.lua:%d+: weft.volume_lookup_f: id 12345 is not a live weft.Volume", err)
    assert.is_false(ok2)
    assert.matches("is a weft.HashGrid, not a weft.Volume", err2)
    assert.is_true(ok3)
  end)
end)
