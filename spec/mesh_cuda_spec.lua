-- Meshes and Bvh objects on a CUDA device: the same query code (src/geom/
-- query.h) compiles into the CUDA C, through ptxas for sm_75/80/90 always,
-- and runs on the device under scripts/cuda-emu, matching the CPU.
local weft = require "weft"
local run_child = dofile("spec/helpers/run_child.lua")
local G = require "helpers.meshes"

local vec3 = weft.vec3

local k = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3),
  t = weft.array(weft.float32), dist = weft.array(weft.float32), n = weft.array(weft.int32),
  function(id, o, d, t, dist, n)
    local i = weft.tid()
    local r = weft.mesh_query_ray(id, o[i], d[i], 1.0e6)
    t[i] = r.result and r.t or -1.0
    local q = weft.mesh_query_point(id, o[i], 10.0)
    dist[i] = weft.length(weft.mesh_eval_position(id, q.face, q.u, q.v) - o[i]) * q.sign
    local c = 0
    for f in weft.mesh_query_aabb(id, o[i] - weft.vec3(0.3, 0.3, 0.3), o[i] + weft.vec3(0.3, 0.3, 0.3)) do
      c = c + f - f + 1
    end
    n[i] = c
  end }

local kb = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3), n = weft.array(weft.int32),
  function(id, o, d, n)
    local i = weft.tid()
    local c = 0
    for b in weft.bvh_query_ray(id, o[i], d[i]) do c = c + 1 + b - b end
    for b in weft.bvh_query_aabb(id, o[i], o[i] + d[i]) do c = c + 1000 + b - b end
    n[i] = c
  end }

describe("meshes on CUDA", function()
  it("compile to PTX for sm_75, sm_80 and sm_90", function()
    for _, arch in ipairs { "sm_75", "sm_80", "sm_90" } do
      assert.matches("%.target%s+" .. arch, (k:ptx(arch)))
      assert.matches("%.target%s+" .. arch, (kb:ptx(arch)))
    end
  end)

  -- CUDA keeps traversal stacks in local memory: 4-byte entries there
  -- (src/geom/query.h, WF_GSTACK_NARROW) keep the frame of a kernel with a
  -- ray cast and a closest point at 1008 bytes with NVRTC's default
  -- --Ofast-compile=min (1744 with 8-byte entries) and 880 at full
  -- optimization. Each level compiles in a fresh process: NVRTC 13 keeps
  -- optimizer state across compiles in one process, and a "min" compile
  -- after a full one gave 1712 bytes (seen in make test).
  it("keep a ray and closest-point kernel's stack frame small (ptxas -v, sm_80)", function()
    local ptxas = "/usr/local/cuda/bin/ptxas"
    if not io.open(ptxas) then return pending("no " .. ptxas) end
    for _, level in ipairs { "min", "0" } do
      local src, obj = os.tmpname(), os.tmpname()
      local out = run_child(([[
        local weft = require "weft"
        local vec3 = weft.vec3
        local ks = weft.kernel{ id = weft.uint64, o = weft.array(vec3), d = weft.array(vec3),
          t = weft.array(weft.float32),
          function(id, o, d, t)
            local i = weft.tid()
            local r = weft.mesh_query_ray(id, o[i], d[i], 1.0e6)
            local q = weft.mesh_query_point_no_sign(id, o[i], 100.0)
            t[i] = (r.result and r.t or -1.0) + q.u
          end }
        local f = assert(io.open(%q, "w"))
        f:write((ks:ptx("sm_80", nil, { fast_compile = %q })))
        f:close()
        print("written")
      ]]):format(src, level))
      assert.matches("written", out, 1, true)
      local p = assert(io.popen(ptxas .. " -v -arch=sm_80 " .. src .. " -o " .. obj .. " 2>&1"))
      local log = p:read("*a")
      p:close()
      os.remove(src)
      os.remove(obj)
      local frame = -1
      for b in log:gmatch("(%d+) bytes stack frame") do frame = math.max(frame, tonumber(b)) end
      assert.is_true(frame >= 0, log)
      assert.is_true(frame <= 1100, frame .. " bytes stack frame at fast_compile " .. level)
    end
  end)

  local function run(dev, m, b, o, d)
    local opt = { device = dev }
    local n = #o
    local O, D = weft.array(o, vec3, opt), weft.array(d, vec3, opt)
    local t, dist, c = weft.zeros(n, weft.float32, opt), weft.zeros(n, weft.float32, opt), weft.zeros(n, weft.int32, opt)
    weft.launch(k, n, { m.id, O, D, t, dist, c }, opt)
    local cb = weft.zeros(n, weft.int32, opt)
    weft.launch(kb, n, { b.id, O, D, cb }, opt)
    return t:to("cpu"):totable(), dist:to("cpu"):totable(), c:to("cpu"):totable(), cb:to("cpu"):totable()
  end

  it("cast rays, find closest points and boxes as on the CPU (scripts/cuda-emu)", function()
    if require("helpers.cuda").missing() then return end
    local pts, idx = G.torus(1.0, 0.4, 24, 12)
    local r = G.rng(17)
    local o, d, lo, hi = {}, {}, {}, {}
    for i = 1, 96 do
      o[i] = { r(-2, 2), r(-2, 2), r(-1, 1) }
      d[i] = { r(-1, 1), r(-1, 1), r(-1, 1) }
      lo[i] = { r(-2, 2), r(-2, 2), r(-1, 1) }
      hi[i] = G.add(lo[i], { 0.2, 0.3, 0.1 })
    end
    local function objects(dev)
      local opt = { device = dev }
      local P = weft.array(pts, vec3, opt)
      local m = weft.Mesh{ points = P, indices = weft.array(idx, weft.int32, opt) }
      local b = weft.Bvh(weft.array(lo, vec3, opt), weft.array(hi, vec3, opt))
      return m, b, P
    end
    local mc, bc, Pc = objects("cpu")
    local mg, bg, Pg = objects("cuda:0")
    assert.are.same({ run("cpu", mc, bc, o, d) }, { run("cuda:0", mg, bg, o, d) })
    -- move the points on each device, refit, compare again
    local moved = {}
    for i, p in ipairs(pts) do moved[i] = { p[1] * 1.1, p[2] - 0.2, p[3] * 0.9 } end
    weft.copy(Pc, weft.array(moved, vec3))
    weft.copy(Pg, weft.array(moved, vec3, { device = "cuda:0" }))
    mc:refit()
    mg:refit()
    local t1 = run("cpu", mc, bc, o, d)
    local t2 = run("cuda:0", mg, bg, o, d)
    assert.are.same(t1, t2)
    for i = 1, #o do
      local bt = G.raycast(moved, idx, o[i], d[i]) or -1
      assert.is_true(math.abs(bt - t2[i]) <= 1e-4 * math.max(1, bt))
    end
  end)

  it("refuses a device mesh's id in a debug CPU launch", function()
    if require("helpers.cuda").missing() then return end
    local pts, idx = G.cube(1.0)
    local opt = { device = "cuda:0" }
    local m = weft.Mesh{ points = weft.array(pts, vec3, opt), indices = weft.array(idx, weft.int32, opt) }
    local t = weft.zeros(1, weft.float32)
    local mode = weft.config.mode
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, k, 1, { m.id, weft.zeros(1, vec3), weft.zeros(1, vec3), t,
                                               weft.zeros(1, weft.float32), weft.zeros(1, weft.int32) })
    weft.config.mode = mode
    assert.is_false(ok)
    assert.matches("weft.mesh_query_ray: id %d+ is a weft.Mesh on cuda:0, but this launch runs on the cpu",
                   tostring(err))
  end)
end)
