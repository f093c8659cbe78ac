-- Volumes and hash grids on a CUDA device: run under scripts/cuda-emu (the
-- emulated device) by scripts/run-tests, pending without a device. The
-- same kernels on cpu and cuda:0 give the same numbers.
local ffi = require "ffi"
local weft = require "weft"

local has_cuda = weft.is_cuda_available()
local test = has_cuda and it or pending

local function linear_block()
  local a = weft.zeros({ 12, 9, 20 })
  local p = ffi.cast("float*", a.h.data)
  for x = 0, 11 do
    for y = 0, 8 do
      for z = 0, 19 do p[(x * 9 + y) * 20 + z] = x + 10 * y + 100 * z end
    end
  end
  return a
end

local sample_k = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), out = weft.array(weft.float32), g = weft.array(weft.vec3),
  function(id, p, out, g)
    local i = weft.tid()
    local v, gr = weft.volume_sample_grad_f(id, p[i], weft.Volume.LINEAR)
    out[i] = v + weft.volume_sample_f(id, p[i], weft.Volume.CLOSEST)
    g[i] = gr + weft.volume_world_to_index(id, p[i])
  end,
}

local count_k = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, n = weft.array(weft.int32),
  function(id, p, r, n)
    local i = weft.hash_grid_point_id(id, weft.tid())
    local c = 0
    for j in weft.hash_grid_query(id, p[i], r) do
      if weft.length_sq(p[j] - p[i]) <= r * r then c = c + 1 end
    end
    n[i] = c
  end,
}

describe("geometry on cuda:0", function()
  test("volumes sample as on the cpu", function()
    local pts = { { 1.25, 2.5, 3.75 }, { 0, 0, 0 }, { 10.5, 0.25, 18.125 }, { -3, 40, 2 }, { 7.5, 7.5, 7.5 } }
    local res = {}
    for _, dev in ipairs { "cpu", "cuda:0" } do
      local v = weft.Volume.from_dense(linear_block(), { voxel_size = 0.5, origin = { 1, 2, 3 },
                                                         background = -7, device = dev })
      assert.equal(dev, v.device)
      local out, g = weft.zeros(#pts, weft.float32, { device = dev }), weft.zeros(#pts, weft.vec3, { device = dev })
      weft.launch(sample_k, #pts, { v.id, weft.array(pts, weft.vec3, { device = dev }), out, g }, { device = dev })
      res[dev] = { out:to("cpu"):totable(), g:to("cpu"):totable() }
    end
    assert.same(res.cpu, res["cuda:0"])
    -- the gradient (1, 10, 100) plus the world point's index ((p - origin) / h)
    assert.same({ 1 + 0.5, 10 + 1, 100 + 1.5 }, res.cpu[2][1])
  end)

  test("hash grids count neighbours as on the cpu, keeping their id across builds", function()
    math.randomseed(5)
    local pts = {}
    for i = 1, 700 do pts[i] = { math.random(), math.random(), math.random() } end
    local res = {}
    for _, dev in ipairs { "cpu", "cuda:0" } do
      local p = weft.array(pts, weft.vec3, { device = dev })
      local g = weft.HashGrid(8, 8, 8, { device = dev })
      local id = g.id
      g:build(p, 0.05)
      g:build(p, 0.1)
      assert.equal(id, g.id)
      local n = weft.zeros(#pts, weft.int32, { device = dev })
      weft.launch(count_k, #pts, { g.id, p, 0.1, n }, { device = dev })
      res[dev] = n:to("cpu"):totable()
    end
    assert.same(res.cpu, res["cuda:0"])
  end)
end)

describe("geometry builtins in CUDA C", function()
  it("compile with NVRTC and assemble with ptxas for sm_75, sm_80 and sm_90", function()
    local internal = require "weft.internal"
    local k = weft.kernel{
      id = weft.uint64, g = weft.uint64, p = weft.array(weft.vec3), out = weft.array(weft.float32),
      function(id, g, p, out)
        local i = weft.hash_grid_point_id(g, weft.tid())
        local v, gr = weft.volume_sample_grad_f(id, p[i], weft.Volume.LINEAR)
        local c = 0.0
        for j in weft.hash_grid_query(g, p[i], 0.1) do c = c + weft.length(p[j]) end
        local w = weft.volume_index_to_world(id, weft.volume_world_to_index_dir(id, p[i]))
        out[i] = v + gr.x + c + w.y + weft.volume_sample_v(id, p[i], 1).z
          + weft.float32(weft.volume_sample_i(id, p[i]) + weft.volume_lookup_index(id, 1, 2, 3))
          + weft.volume_sample(id, p[i], 0, weft.float32)
      end,
    }
    local src = k:source("cuda")
    -- calls, not the definitions the prelude carries: "name(&result, ..."
    assert.matches("wf_nat_volume_cell_f(&", src, 1, true)
    assert.matches("wf_nat_hash_grid_query_slice(&", src, 1, true) -- the nested form of the loop
    for _, arch in ipairs { "sm_75", "sm_80", "sm_90" } do
      local ptx = k:ptx(arch)
      assert.matches("%.entry%s+weft_k", ptx)
      assert.is_true(internal.core.cuda_assemble(ptx, arch) > 0)
    end
  end)
end)
