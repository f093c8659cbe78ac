-- Geometry ids a kernel is given that name no live object of the right kind
-- (freed, made up, another kind, read from an array): in release and debug
-- mode a CPU launch fails with the query's line and kernel, never a wild
-- read. (The CUDA part runs under scripts/cuda-emu.)
local weft = require "weft"
local G = require "helpers.meshes"

local vec3 = weft.vec3

local function cube()
  local tp, ti = G.cube(1.0)
  return weft.Mesh{ points = weft.array(tp, vec3), indices = weft.array(ti, weft.int32) }
end

local qpoint = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32), function(id, out)
  local q = weft.mesh_query_point(id, weft.vec3(0.2, 0.3, 3.0), 10.0)
  out[weft.tid()] = q.result and q.u or -1.0
end }
local Q_LINE = 16

-- ids read from an array, one per thread
local qarray = weft.kernel{ ids = weft.array(weft.uint64), out = weft.array(weft.float32),
  function(ids, out)
    local i = weft.tid()
    local q = weft.mesh_query_point(ids[i], weft.vec3(0.2, 0.3, 3.0), 10.0)
    out[i] = q.result and q.u or -1.0
  end }
local A_LINE = 25

local lookup = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32), function(id, out)
  out[weft.tid()] = weft.volume_lookup_f(id, 0, 0, 0)
end }

-- a query only some threads reach
local guarded = weft.kernel{ id = weft.uint64, n = weft.int32, out = weft.array(weft.float32),
  function(id, n, out)
    local i = weft.tid()
    if i < n then out[i] = weft.mesh_query_point(id, weft.vec3(0.2, 0.3, 3.0), 10.0).u end
  end }

local getp = weft.kernel{ id = weft.uint64, k = weft.int32, out = weft.array(vec3), function(id, k, out)
  out[weft.tid()] = weft.mesh_get_point(id, k + weft.tid())
end }

local function fails(k, n, args, pat)
  local ok, err = pcall(weft.launch, k, n, args)
  assert.is_false(ok, "launch should fail")
  assert.matches(pat, tostring(err))
  return tostring(err)
end

local function stale_id()
  local m = cube()
  local id = m.id
  m = nil -- luacheck: ignore 311
  collectgarbage()
  collectgarbage()
  return id
end

for _, mode in ipairs { "release", "debug" } do
  describe("geometry ids in " .. mode .. " mode (cpu)", function()
    local saved
    before_each(function() saved = weft.config.mode; weft.config.mode = mode end)
    after_each(function() weft.config.mode = saved end)

    it("a live mesh's id works, a freed one fails at the query's line", function()
      local m = cube()
      local out = weft.zeros(64)
      weft.launch(qpoint, 64, { m.id, out })
      assert.is_true(out[0] >= 0 and out[63] >= 0)
      local id = stale_id()
      local err = fails(qpoint, 64, { id, out },
                        "geom_ids_spec.lua:" .. Q_LINE .. ": weft.mesh_query_point: id %d+ is not a live weft.Mesh")
      assert.matches("in kernel 'qpoint'", err, 1, true)
    end)

    it("a made-up id fails, for small and huge values and 0", function()
      local out = weft.zeros(8)
      for _, v in ipairs { weft.uint64(12345), weft.uint64(0xdeadbeef000ULL), weft.uint64(-1ULL),
                           weft.uint64(0) } do
        fails(qpoint, 8, { v, out }, ":" .. Q_LINE .. ": weft.mesh_query_point: id %d+ is not a live weft.Mesh")
      end
    end)

    it("an id of another kind fails", function()
      local out = weft.zeros(4)
      local v = weft.Volume.from_dense(weft.ones({ 2, 2, 2 }), {})
      local g = weft.HashGrid(2, 2, 2)
      fails(qpoint, 4, { v.id, out }, "weft.mesh_query_point: id %d+ is a weft.Volume, not a weft.Mesh")
      fails(lookup, 4, { g.id, out }, "weft.volume_lookup_f: id %d+ is a weft.HashGrid, not a weft.Volume")
      fails(lookup, 4, { cube().id, out }, "weft.volume_lookup_f: id %d+ is a weft.Mesh, not a weft.Volume")
      weft.launch(lookup, 4, { v.id, out })
      assert.equals(1, out[3])
    end)

    it("ids read from an array are checked each", function()
      local m1, m2 = cube(), cube()
      local n = 1000
      local ids = weft.zeros(n, weft.uint64)
      for i = 0, n - 1 do ids[i] = i % 3 == 0 and m1.id or m2.id end
      local out = weft.zeros(n)
      weft.launch(qarray, n, { ids, out })
      assert.is_true(out[0] >= 0 and out[n - 1] >= 0)
      ids[777] = stale_id()
      fails(qarray, n, { ids, out }, "geom_ids_spec.lua:" .. A_LINE .. ": weft.mesh_query_point: id %d+ is not a live")
      ids[777] = weft.Volume.from_dense(weft.ones({ 2, 2, 2 }), {}).id
      fails(qarray, n, { ids, out }, "is a weft.Volume, not a weft.Mesh")
    end)

    it("an id held by a struct argument is checked", function()
      local H = weft.struct{ { "mesh", weft.uint64 }, { "r", weft.float32 } }
      local ks = weft.kernel{ h = H, out = weft.array(weft.float32), function(h, out)
        out[weft.tid()] = weft.mesh_query_point(h.mesh, weft.vec3(0.2, 0.3, 3.0), h.r).u
      end }
      local m, out = cube(), weft.zeros(4)
      weft.launch(ks, 4, { H{ mesh = m.id, r = 10 }, out })
      fails(ks, 4, { H{ mesh = stale_id(), r = 10 }, out }, "weft.mesh_query_point: id %d+ is not a live weft.Mesh")
    end)

    it("a bad id in a query no thread reaches is no error", function()
      local out = weft.zeros(16)
      weft.launch(guarded, 16, { weft.uint64(0), 0, out })
      assert.equals(0, out[5])
      fails(guarded, 16, { weft.uint64(0), 9, out }, "weft.mesh_query_point: id 0 is not a live weft.Mesh")
    end)

    it("element readers check their index", function()
      local m, out = cube(), weft.zeros(4, vec3)
      weft.launch(getp, 4, { m.id, 4, out })
      fails(getp, 4, { m.id, 5, out }, "weft.mesh_get_point: index 8 is out of range for 8 points")
      fails(getp, 1, { m.id, -1, out }, "weft.mesh_get_point: index %-1 is out of range")
      fails(getp, 1, { stale_id(), 0, out }, "weft.mesh_get_point: id %d+ is not a live weft.Mesh")
    end)
  end)
end

-- CUDA (scripts/cuda-emu): the launch checks the id parameters that reach a
-- query unchanged, before the kernel runs, so a device never reads
-- through them. Ids read from arrays are not checked on CUDA: a device
-- fault (CUDA_ERROR_ILLEGAL_ADDRESS, the device lost for the process), on
-- a GPU as on the emulator.
describe("geometry ids on CUDA", function()
  local dev = { device = "cuda:0" }
  local function cuda_cube()
    local tp, ti = G.cube(1.0)
    return weft.Mesh{ points = weft.array(tp, vec3, dev), indices = weft.array(ti, weft.int32, dev) }
  end

  for _, mode in ipairs { "release", "debug" } do
    it("fail at the query's line in " .. mode .. " mode, outputs untouched", function()
      if require("helpers.cuda").missing() then return end
      local saved = weft.config.mode
      weft.config.mode = mode
      local out = weft.full(8, 5.0, weft.float32, dev)
      local m = cuda_cube()
      weft.launch(qpoint, 8, { m.id, out }, dev)
      assert.is_true(out:to("cpu")[7] >= 0)
      out:fill_(5.0)
      local function bad(id, pat)
        local ok, err = pcall(weft.launch, qpoint, 8, { id, out }, dev)
        assert.is_false(ok)
        assert.matches(pat, tostring(err))
        assert.equals(5, out:to("cpu")[3])
      end
      local at = "geom_ids_spec.lua:" .. Q_LINE .. ": weft.mesh_query_point: "
      bad(weft.uint64(12345), at .. "id 12345 is not a live weft.Mesh %(freed, or not an id%), in kernel 'qpoint'")
      local stale
      do
        local m2 = cuda_cube()
        stale = m2.id
        m2 = nil -- luacheck: ignore 311
        collectgarbage()
        collectgarbage()
      end
      bad(stale, at .. "id %d+ is not a live weft.Mesh")
      bad(cube().id, at .. "id %d+ is a weft.Mesh on the cpu, but this launch runs on cuda:0")
      local v = weft.Volume.from_dense(weft.ones({ 2, 2, 2 }), dev)
      bad(v.id, at .. "id %d+ is a weft.Volume, not a weft.Mesh")
      -- through a weft.func's parameter
      local q = weft.func(function(id) return weft.mesh_query_point(id, weft.vec3(0.2, 0.3, 3.0), 10.0).u end)
      local kf = weft.kernel{ id = weft.uint64, o = weft.array(weft.float32), function(id, o)
        o[weft.tid()] = q(id)
      end }
      -- held by a struct argument
      local H = weft.struct{ { "r", weft.float32 }, { "mesh", weft.uint64 } }
      local ks = weft.kernel{ h = H, o = weft.array(weft.float32), function(h, o)
        o[weft.tid()] = weft.mesh_query_point(h.mesh, weft.vec3(0.2, 0.3, 3.0), h.r).u
      end }
      weft.launch(ks, 8, { H{ mesh = m.id, r = 10 }, out }, dev)
      local okh, errh = pcall(weft.launch, ks, 8, { H{ mesh = stale, r = 10 }, out }, dev)
      assert.is_false(okh)
      assert.matches("weft.mesh_query_point: id %d+ is not a live weft.Mesh", tostring(errh))
      weft.launch(kf, 8, { m.id, out }, dev)
      local ok, err = pcall(weft.launch, kf, 8, { weft.uint64(7), out }, dev)
      assert.is_false(ok)
      assert.matches("geom_ids_spec.lua:%d+: weft.mesh_query_point: id 7 is not a live weft.Mesh", tostring(err))
      weft.config.mode = saved
    end)
  end
  it("tell the device of hash grids and volumes", function()
    if require("helpers.cuda").missing() then return end
    local pid = weft.kernel{ id = weft.uint64, out = weft.array(weft.int32), function(id, out)
      out[weft.tid()] = weft.hash_grid_point_id(id, 0)
    end }
    local g = weft.HashGrid(4, 4, 4, dev)
    g:build(weft.zeros(10, vec3, dev), 0.1)
    local gc = weft.HashGrid(4, 4, 4)
    gc:build(weft.zeros(10, vec3), 0.1)
    local v = weft.Volume.from_dense(weft.ones({ 2, 2, 2 }), dev)
    local ok, err = pcall(weft.launch, pid, 4, { g.id, weft.zeros(4, weft.int32) })
    assert.is_false(ok)
    assert.matches("weft.hash_grid_point_id: id %d+ is a weft.HashGrid on cuda:0, but this launch runs on the cpu",
                   tostring(err))
    ok, err = pcall(weft.launch, pid, 4, { gc.id, weft.zeros(4, weft.int32, dev) }, dev)
    assert.is_false(ok)
    assert.matches("weft.hash_grid_point_id: id %d+ is a weft.HashGrid on the cpu, but this launch runs on cuda:0",
                   tostring(err))
    ok, err = pcall(weft.launch, lookup, 4, { v.id, weft.zeros(4) })
    assert.is_false(ok)
    assert.matches("weft.volume_lookup_f: id %d+ is a weft.Volume on cuda:0, but this launch runs on the cpu",
                   tostring(err))
    local o = weft.zeros(4, weft.int32, dev)
    weft.launch(pid, 4, { g.id, o }, dev)
    local f = weft.zeros(4, weft.float32, dev)
    weft.launch(lookup, 4, { v.id, f }, dev)
    assert.equals(1, f:to("cpu")[2])
  end)
  it("an id read from an array is a device fault, reported, the process alive (in a child)", function()
    if require("helpers.cuda").missing() then return end
    local out = require "helpers.run_child" [[
      local weft = require "weft"
      local k = weft.kernel{ ids = weft.array(weft.uint64), out = weft.array(weft.float32), function(ids, out)
        out[weft.tid()] = weft.mesh_query_point(ids[weft.tid()], weft.vec3(), 10.0).u
      end }
      local d = { device = "cuda:0" }
      weft.launch(k, 2, { weft.array({ 12345, 12345 }, weft.uint64, d), weft.zeros(2, weft.float32, d) }, d)
      print(pcall(weft.synchronize))
      print("still running")
    ]]
    assert.matches("false\t[^\n]+:8: weft: CUDA synchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS", out)
    assert.matches("still running", out, 1, true)
  end)
end)
