-- The CUDA backend without a GPU: device functions without a driver, CUDA C
-- output with #line positions, PTX for sm_75/80/90 assembled by nvJitLink,
-- and the emitted CUDA C run on the host (tests/cuda/shim.h) with the same
-- results as the CPU backend.
local weft = require "weft"
local shim = dofile("tests/cuda/shim.lua")

local core = weft._core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil
local have_gpu = weft.is_cuda_available()
local NODRIVER = "weft: CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)"

-- Representative kernels: name -> { kernel, dim, make_args() }
local K = {}

K.saxpy = {
  weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
    function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end },
  100,
  function()
    local x, y = {}, {}
    for i = 1, 100 do x[i], y[i] = i * 0.25, 1 - i end
    return { weft.array(x, weft.float32), weft.array(y, weft.float32), 2.5 }
  end,
}

K.loops = {
  weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32), n = weft.int32,
    function(x, out, n)
      local i = weft.tid()
      local acc = 0.0
      for k = 1, n do
        acc = acc + x[i] * weft.float32(k)
      end
      local v = weft.abs(x[i])
      local c = 0
      while v > 1.0 do
        v = v / 2.0
        c = c + 1
      end
      if x[i] < 0.0 then
        acc = acc - weft.sqrt(-x[i])
      else
        acc = acc + weft.floor(x[i] * 0.5)
      end
      out[i] = acc + weft.float32(c)
    end },
  16,
  function()
    local x = {}
    for i = 1, 16 do x[i] = (i - 8) * 1.75 end
    return { weft.array(x, weft.float32), weft.zeros(16), 6 }
  end,
}

K.intmath = {
  weft.kernel{ out = weft.array(weft.int32, 2),
    function(out)
      local i, j = weft.tid()
      local a = i - 4
      local b = j - 3
      out[i][j] = a % b + 10 * weft.floordiv(a, b)
    end },
  { 9, 7 },
  function() return { weft.zeros({ 9, 7 }, weft.int32) } end,
}

K.vec3 = {
  weft.kernel{ p = weft.array(weft.vec3), out = weft.array(weft.float32),
    function(p, out)
      local i = weft.tid()
      local v = p[i]
      local w = weft.cross(v, weft.vec3(0.0, 0.0, 1.0))
      out[i] = weft.dot(v, w) + weft.length(v)
    end },
  8,
  function()
    local p = {}
    for i = 1, 8 do p[i] = { i * 0.5, 2 - i, i * i * 0.125 } end
    return { weft.array(p, weft.vec3), weft.zeros(8) }
  end,
}

K.atomics = {
  weft.kernel{ x = weft.array(weft.float32), s = weft.array(weft.float32),
    function(x, s)
      local i = weft.tid()
      weft.atomic_add(s, 0, x[i])
      weft.atomic_max(s, 1, x[i])
      weft.atomic_min(s, 2, x[i])
    end },
  64,
  function()
    local x = {}
    for i = 1, 64 do x[i] = ((i * 37) % 64) - 20 end
    return { weft.array(x, weft.float32), weft.array({ 0, -1000, 1000 }, weft.float32) }
  end,
}

K.rng = {
  weft.kernel{ out = weft.array(weft.float32), seed = weft.int32,
    function(out, seed)
      local i = weft.tid()
      local r = weft.rand_init(seed, i)
      out[i] = weft.randf(r) + weft.randf(r)
    end },
  32,
  function() return { weft.zeros(32), 42 } end,
}

-- Compile what the front end accepts; a kernel it rejects is reported
-- (pending) rather than failing this spec: it belongs to the front end's.
local function module_of(k)
  local ok, m = pcall(function() return k:_module() end)
  return ok and m or nil, m
end

describe("cuda without a driver", function()
  if have_gpu then
    it("has a device", function() assert.is_true(#weft.devices() >= 2) end)
    return
  end
  it("reports no devices", function()
    assert.is_false(weft.is_cuda_available())
    assert.are.same({ "cpu" }, weft.devices())
    assert.are.equal("cpu", weft.get_device())
  end)
  it("raises NODRIVER on every cuda entry point", function()
    local function msg(f, ...)
      local ok, e = pcall(f, ...)
      assert.is_false(ok)
      return e
    end
    assert.are.equal(NODRIVER, msg(weft.set_device, "cuda:0"))
    assert.are.equal(NODRIVER, msg(weft.capture_begin, "cuda:0"))
    assert.are.equal(NODRIVER, msg(weft.cuda_device_info, "cuda:0"))
    local k = K.saxpy[1]
    assert.matches(NODRIVER, msg(weft.launch, k, 4, K.saxpy[3](), { device = "cuda:0" }), 1, true)
    assert.matches("cuda:0", msg(weft.zeros, 4, weft.float32, { device = "cuda:0" }), 1, true)
    assert.matches("unknown device", msg(weft.set_device, "gpu7"), 1, true)
  end)
  it("keeps the cpu working", function()
    weft.set_device("cpu")
    weft.synchronize()
    assert.are.equal("cpu", weft.get_device())
    assert.has_error(function() weft.capture_end() end, "weft.capture_end: no capture in progress")
  end)
end)

describe("cuda source", function()
  it("has extern C entries, a grid-stride loop and #line to this file", function()
    local src = K.saxpy[1]:source("cuda")
    assert.matches('extern "C" __global__ void', src, 1, true)
    assert.matches("gridDim.x", src, 1, true)
    assert.matches('#line 19 "spec/cuda_spec.lua"', src, 1, true)
  end)
end)

describe("cuda ptx", function()
  if not have_nvrtc then
    pending("NVRTC not found")
    return
  end
  for _, name in ipairs { "saxpy", "loops", "intmath", "vec3", "atomics", "rng" } do
    it(name .. " compiles for sm_75, sm_80, sm_90 and assembles", function()
      local m, err = module_of(K[name][1])
      if not m then
        pending("front end: " .. tostring(err))
        return
      end
      for _, arch in ipairs { "sm_75", "sm_80", "sm_90" } do
        local ptx = core.cuda_ptx(m, arch)
        assert.matches(".target " .. arch, ptx, 1, true)
        assert.matches(".entry ", ptx, 1, true)
        assert.is_true(core.cuda_assemble(ptx, arch) > 0)
      end
    end)
  end
  it("k:ptx gives PTX", function()
    assert.matches(".entry", K.saxpy[1]:ptx("sm_80"), 1, true)
  end)
  it("reports bad architectures", function()
    local m = module_of(K.saxpy[1])
    assert.has_error(function() core.cuda_ptx(m, "sm_8") end,
      "weft: bad CUDA architecture 'compute_8' (expected sm_XX or compute_XX)")
  end)
end)

local function close(x, y)
  if type(x) == "table" then
    assert.are.equal(#x, #y)
    for j = 1, #x do close(x[j], y[j]) end
    return
  end
  assert.is_true(math.abs(x - y) <= 1e-5 * math.max(1, math.abs(x)), x .. " ~= " .. y)
end

describe("cuda C on the host matches the cpu backend", function()
  if not shim.available() then
    pending("no g++")
    return
  end
  for _, name in ipairs { "saxpy", "loops", "intmath", "vec3", "atomics", "rng" } do
    it(name, function()
      local k, dim, make = K[name][1], K[name][2], K[name][3]
      if not module_of(k) then
        pending("front end does not compile " .. name)
        return
      end
      local a_cpu, a_gpu, a_init = make(), make(), make()
      weft.launch(k, dim, a_cpu)
      shim.run(weft, k, dim, a_gpu)
      local last -- the output: the last array argument changed
      for i, v in ipairs(a_cpu) do if weft.is_array(v) then last = i end end
      assert.are_not.same(a_init[last]:totable(), a_gpu[last]:totable())
      for i, v in ipairs(a_cpu) do
        if weft.is_array(v) then
          local x, y = v:totable(), a_gpu[i]:totable()
          if name == "vec3" or name == "loops" then
            close(x, y) -- libm and CUDA's sqrt/length may differ in the last bit
          else
            assert.are.same(x, y)
          end
        end
      end
    end)
  end
end)

describe("cuda on a GPU", function()
  if not have_gpu then
    pending("no CUDA device (tests/gpu/run.sh runs this on a GPU machine)")
    return
  end
  it("round-trips arrays and runs saxpy as the cpu does", function()
    local k, make = K.saxpy[1], K.saxpy[3]
    local cpu = make()
    weft.launch(k, 100, cpu)
    local a = make()
    local x, y = a[1]:to("cuda:0"), a[2]:to("cuda:0")
    assert.are.equal("cuda:0", y.device)
    weft.launch(k, 100, { x, y, 2.5 }, { device = "cuda:0" })
    weft.synchronize()
    assert.are.same(cpu[2]:totable(), y:totable())
  end)
  it("captures and replays a graph", function()
    local k, make = K.saxpy[1], K.saxpy[3]
    local a = make()
    local x, y = a[1]:to("cuda:0"), a[2]:to("cuda:0")
    weft.launch(k, 100, { x, y, 1.0 }, { device = "cuda:0" }) -- loads the module first
    weft.capture_begin("cuda:0")
    weft.launch(k, 100, { x, y, 1.0 }, { device = "cuda:0" })
    local g = weft.capture_end()
    weft.capture_launch(g)
    weft.synchronize()
    local xs, ys = a[1]:totable(), y:totable()
    for i = 1, 100 do assert.are.equal(a[2]:totable()[i] + 3 * xs[i], ys[i]) end
  end)
end)
