-- The CUDA backend without a GPU: device functions without a driver, CUDA C
-- output with #line positions, PTX for sm_75/80/90 assembled by nvJitLink,
-- and the emitted CUDA C run on the host (tests/cuda/shim.h) with the same
-- results as the CPU backend.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table
local shim = dofile("tests/cuda/shim.lua")

local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil
local have_gpu = weft.is_cuda_available()
local NODRIVER = "CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)"

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
      local b = j < 3 and j - 3 or j - 2 -- no zero: it stops the launch (int_div_spec.lua)
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


local A = function(data, t) return weft.array(data, t) end

local function seq(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return t
end

K.mat33 = {
  weft.kernel{ a = weft.array(weft.mat33), v = weft.array(weft.vec3), mo = weft.array(weft.mat33),
               vo = weft.array(weft.vec3), so = weft.array(weft.float32),
    function(a, v, mo, vo, so)
      local i = weft.tid()
      local m = a[i]
      local n = weft.transpose(m)
      mo[i * 3] = m * n + weft.identity(3, weft.float32)
      mo[i * 3 + 1] = weft.inverse(m)
      mo[i * 3 + 2] = weft.outer(v[i], v[i]) - m * 2.0
      vo[i] = m * v[i] + m[1]
      so[i] = weft.determinant(m) + m[2][1]
    end },
  4,
  function()
    local ms = seq(4, function(i)
      return { { 2 + i, 1, 0.5 }, { -1, 3, 0.25 * i }, { 0.5, -i, 4 } }
    end)
    return { A(ms, weft.mat33), A(seq(4, function(i) return { i, 1 - i, 0.5 } end), weft.vec3),
             weft.zeros(12, weft.mat33), weft.zeros(4, weft.vec3), weft.zeros(4) }
  end,
  { tol = 1e-5 },
}

K.quat = {
  weft.kernel{ qs = weft.array(weft.quatd), v = weft.array(weft.vec3d), qo = weft.array(weft.quatd),
               vo = weft.array(weft.vec3d), ts = weft.array(weft.transformd),
    function(qs, v, qo, vo, ts)
      local i = weft.tid()
      local q = weft.normalize(qs[i])
      qo[i * 2] = q * weft.quat_inverse(q) + weft.quat_from_axis_angle(weft.normalize(v[i]), 0.3)
      qo[i * 2 + 1] = q * qs[i]
      vo[i * 2] = weft.quat_rotate(q, v[i])
      local t = weft.transformd(v[i], q)
      vo[i * 2 + 1] = weft.transform_point(t, weft.vec3d(1.0, 2.0, 3.0))
      ts[i] = t
    end },
  3,
  function()
    return { A(seq(3, function(i) return { 0.1 * i, 0.5, -0.25, 1 } end), weft.quatd),
             A(seq(3, function(i) return { i, -1, 0.5 * i } end), weft.vec3d),
             weft.zeros(6, weft.quatd), weft.zeros(6, weft.vec3d), weft.zeros(3, weft.transformd) }
  end,
  { tol = 1e-12 },
}

local Particle = weft.struct{ { "pos", weft.vec3 }, { "vel", weft.vec3 }, { "mass", weft.float32 },
                              { "id", weft.int32 }, { "tag", weft.uint8 }, name = "CudaParticle" }
K.structs = {
  weft.kernel{ ps = weft.array(Particle), dt = weft.float32, g = weft.vec3, e = weft.array(weft.float64),
    function(ps, dt, g, e)
      local i = weft.tid()
      local p = ps[i]
      p.vel = p.vel + g * dt
      p.pos = p.pos + p.vel * dt
      p.id = p.id * 10 + i
      p.tag = p.tag + weft.uint8(1)
      ps[i] = p
      ps[i].mass = ps[i].mass * 2.0
      e[i] = weft.float64(0.5 * p.mass * weft.dot(p.vel, p.vel))
    end },
  5,
  function()
    local ps = seq(5, function(i)
      return Particle{ pos = weft.vec3(i, 2 * i, 0), vel = weft.vec3(1, -1, 0.5), mass = i * 0.5, id = i,
                       tag = 250 + i }
    end)
    return { A(ps, Particle), 0.125, weft.vec3(0, -9.8, 0), weft.zeros(5, weft.float64) }
  end,
  { tol = 1e-6 },
}

K.half = {
  weft.kernel{ x = weft.array(weft.float16), o = weft.array(weft.float16), s = weft.array(weft.float16),
    function(x, o, s)
      local i = weft.tid()
      local h = x[i]
      o[i * 3] = h * h + weft.float16(0.5)
      o[i * 3 + 1] = weft.sqrt(weft.abs(h)) - h / weft.float16(3)
      o[i * 3 + 2] = weft.float16(weft.float32(h) * 1.5)
      weft.atomic_add(s, 0, h)
      weft.atomic_max(s, 1, h)
    end },
  6,
  function()
    return { A({ 0.5, -1.25, 3, 100, -0.1, 7.5 }, weft.float16), weft.zeros(18, weft.float16),
             A({ 0, -1000 }, weft.float16) }
  end,
  { tol = 2e-3 },
}

K.grid3d = {
  weft.kernel{ o = weft.array(weft.int32, 3), f = weft.array(weft.float32, 2),
    function(o, f)
      local i, j, l = weft.tid()
      o[i][j][l] = i * 100 + j * 10 + l
      if l == 0 then
        local row = f[i]
        row[j] = weft.float32(i - j) * 0.5 + weft.float32(row.shape[0])
      end
    end },
  { 3, 4, 5 },
  function() return { weft.zeros({ 3, 4, 5 }, weft.int32), weft.zeros({ 3, 4 }) } end,
}

K.intatomics = {
  weft.kernel{ x = weft.array(weft.int32), a = weft.array(weft.int32), b = weft.array(weft.int8),
               c = weft.array(weft.uint16), d = weft.array(weft.int64), v = weft.array(weft.vec3),
    function(x, a, b, c, d, v)
      local i = weft.tid()
      local xi = x[i]
      weft.atomic_add(a, 0, xi)
      weft.atomic_min(a, 1, xi)
      weft.atomic_max(a, 2, xi)
      weft.atomic_add(b, i % 3, weft.int8(xi))
      weft.atomic_max(b, 3, weft.int8(xi))
      weft.atomic_add(c, 1, weft.uint16(i * 1000))
      weft.atomic_min(d, 0, weft.int64(xi) * 1000000000)
      weft.atomic_add(v, i % 2, weft.vec3(1.0, weft.float32(xi), 0.5))
    end },
  40,
  function()
    local x = seq(40, function(i) return (i * 37) % 41 - 20 end)
    return { A(x, weft.int32), A({ 0, 1000, -1000 }, weft.int32), weft.zeros(4, weft.int8),
             A({ 7, 65000, 9 }, weft.uint16), weft.zeros(1, weft.int64), weft.zeros(2, weft.vec3) }
  end,
}

K.bits = {
  weft.kernel{ x = weft.array(weft.int32), o = weft.array(weft.int64), f = weft.array(weft.float64),
    function(x, o, f)
      local i = weft.tid()
      local v = x[i]
      o[i * 4] = weft.int64(bit.band(v, 0xff) + bit.bxor(v, 0x0f0f))
      o[i * 4 + 1] = weft.int64(bit.lshift(v, 3)) + weft.int64(bit.rshift(v, 2))
      o[i * 4 + 2] = weft.int64(weft.select(v > 0, v * v, -v)) + weft.int64(weft.uint8(v))
      o[i * 4 + 3] = weft.int64(weft.float32(v) * 0.37) + weft.int64(weft.int16(v * 1000))
      local y = weft.float64(v)
      f[i * 3] = weft.exp(y * 0.01) + weft.log(weft.abs(y) + 1.0) + weft.atan2(y, 3.0)
      f[i * 3 + 1] = weft.pow(weft.abs(y), 0.5) + weft.tanh(y * 0.1) + weft.sign(y)
      f[i * 3 + 2] = weft.clamp(y, -3.0, 4.0) + weft.round(y * 0.3) + weft.ceil(y * 0.3) + y % 3.5
    end },
  12,
  function()
    return { A({ 0, 1, -1, 7, -7, 255, 256, 1000, -1000, 123456, -99999, 2147483647 }, weft.int32),
             weft.zeros(48, weft.int64), weft.zeros(36, weft.float64) }
  end,
  { tol = 1e-14 },
}

K.rand2 = {
  weft.kernel{ o = weft.array(weft.float32, 2), r = weft.array(weft.int32), seed = weft.int32,
    function(o, r, seed)
      local i, j = weft.tid()
      local st = weft.rand_init(seed, i * 7 + j)
      o[i][j] = weft.randf(st, -1.0, 1.0)
      if j == 0 then r[i] = weft.randi(st) end
    end },
  { 5, 7 },
  function() return { weft.zeros({ 5, 7 }), weft.zeros(5, weft.int32), 1234 } end,
}

-- Adjoint kernels: { kernel, dim, make() -> args, adjoint arrays per arg }.
local ADJ = {}

ADJ.saxpy = { K.saxpy[1], 100, K.saxpy[3] }

ADJ.math = {
  weft.kernel{ x = weft.array(weft.float64), v = weft.array(weft.vec3d), o = weft.array(weft.float64),
    function(x, v, o)
      local i = weft.tid()
      local a = x[i]
      local s = 0.0
      for k = 1, 3 do s = s + weft.sin(a * weft.float64(k)) * a end
      if a > 0.5 then s = s + weft.sqrt(a) else s = s - a * a end
      o[i] = s + weft.length(v[i] * a) + weft.dot(v[i], weft.cross(v[i], weft.vec3d(0.0, a, 1.0)))
    end },
  9,
  function()
    return { A(seq(9, function(i) return i * 0.2 - 0.3 end), weft.float64),
             A(seq(9, function(i) return { i * 0.1, 1, -0.5 * i } end), weft.vec3d), weft.zeros(9, weft.float64) }
  end,
}

ADJ.mat = {
  weft.kernel{ a = weft.array(weft.mat22d), v = weft.array(weft.vec2d), o = weft.array(weft.vec2d),
    function(a, v, o)
      local i = weft.tid()
      o[i] = weft.inverse(a[i]) * v[i] + weft.transpose(a[i]) * v[i] * weft.determinant(a[i])
    end },
  4,
  function()
    return { A(seq(4, function(i) return { { 2 + i, 1 }, { -0.5, 3 } } end), weft.mat22d),
             A(seq(4, function(i) return { i, -i * 0.5 } end), weft.vec2d), weft.zeros(4, weft.vec2d) }
  end,
}

-- stores that overwrite (the adjoint clears the element's adjoint) and
-- component stores; atomic_min/max route the adjoint to the winner
ADJ.overwrite = {
  weft.kernel{ x = weft.array(weft.float64), y = weft.array(weft.vec3d),
    function(x, y)
      local i = weft.tid()
      y[i][0] = x[i]
      y[i].y = y[i].y + 2.0 * x[i]
      y[i] = y[i] * 3.0
      y[i].z = y[i].x * y[i].x
    end },
  6,
  function()
    return { A(seq(6, function(i) return i * 0.3 - 0.5 end), weft.float64),
             A(seq(6, function(i) return { i, -i, 0.5 } end), weft.vec3d) }
  end,
}

ADJ.minmax = {
  weft.kernel{ x = weft.array(weft.float64), lo = weft.array(weft.vec3d),
    function(x, lo)
      local i = weft.tid()
      weft.atomic_min(lo, i % 2, weft.vec3d(x[i], -x[i], x[i] * x[i]))
      weft.atomic_max(lo, 2, weft.vec3d(x[i], -x[i], x[i] * x[i]))
    end },
  7,
  function()
    return { A(seq(7, function(i) return i * 0.7 - 2 end), weft.float64),
             A({ { 9, 9, 9 }, { 9, 9, 9 }, { -9, -9, -9 } }, weft.vec3d) }
  end,
}

local SHIM = { "saxpy", "loops", "intmath", "vec3", "atomics", "rng", "mat33", "quat", "structs", "half",
               "grid3d", "intatomics", "bits", "rand2" }

-- Compile what the front end accepts; a kernel it rejects is reported
-- (pending) rather than failing this spec: it belongs to the front end's.
local function module_of(k)
  local ok, m = pcall(function() return k:_module() end)
  return ok and m or nil, m
end

-- The error a call raises (it must raise).
local function msg(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok)
  return e
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
    assert.matches("weft.set_device: device 'cuda:0': " .. NODRIVER, msg(weft.set_device, "cuda:0"), 1, true)
    assert.matches("weft.capture_begin: device 'cuda:0': " .. NODRIVER, msg(weft.capture_begin, "cuda:0"), 1, true)
    assert.matches("weft.cuda_device_info: device 'cuda:0': " .. NODRIVER, msg(weft.cuda_device_info, "cuda:0"), 1, true)
    local k = K.saxpy[1]
    assert.matches("weft.launch: device 'cuda:0': " .. NODRIVER, msg(weft.launch, k, 4, K.saxpy[3](), { device = "cuda:0" }), 1, true)
    assert.matches("cuda:0", msg(weft.zeros, 4, weft.float32, { device = "cuda:0" }), 1, true)
    assert.matches("unknown device", msg(weft.set_device, "gpu7"), 1, true)
  end)
  it("streams, events and pinned memory: clear errors, and pinned falls back to ordinary memory", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local e = msg(function() local s = weft.Stream("cuda:0"); return s end)
    assert.are.equal("spec/cuda_spec.lua:" .. line .. ": weft.Stream: device 'cuda:0': " .. NODRIVER, e)
    assert.matches("weft.Event: device 'cuda:0': " .. NODRIVER, msg(weft.Event, "cuda:0", { enable_timing = true }), 1, true)
    assert.matches("weft.get_stream: device 'cuda:0': " .. NODRIVER, msg(weft.get_stream, "cuda:0"), 1, true)
    assert.matches("weft.Stream: streams and events are for CUDA devices, got 'cpu'", msg(weft.Stream, "cpu"), 1, true)
    assert.matches("weft.Stream: streams and events are for CUDA devices, got 'cpu'", msg(weft.Stream), 1, true)
    assert.matches("weft.Event: streams and events are for CUDA devices, got 'cpu'", msg(weft.Event, "cpu"), 1, true)
    assert.matches("weft.set_stream: expected a weft.Stream, got number", msg(weft.set_stream, 5), 1, true)
    assert.matches("weft.synchronize_event: expected a weft.Event, got table", msg(weft.synchronize_event, {}), 1, true)
    assert.matches("weft.get_event_elapsed_time: expected a weft.Event, got nil", msg(weft.get_event_elapsed_time), 1, true)
    assert.matches("weft.ScopedStream: expected a weft.Stream, got string", msg(weft.ScopedStream, "s", print), 1, true)
    local k = K.saxpy[1]
    line = debug.getinfo(1, "l").currentline + 1
    e = msg(function() weft.launch(k, 4, K.saxpy[3](), { stream = 3 }); return 1 end)
    assert.are.equal("spec/cuda_spec.lua:" .. line .. ": weft.launch: kernel '" .. k.name .. "': opts.stream must be a weft.Stream, got number", e)
    -- pinned: host memory, usable as any cpu array; page-locked only with a driver
    local p = weft.full(5, 2.5, weft.float32, { pinned = true })
    assert.is_false(p.pinned)
    assert.are.equal("cpu", p.device)
    assert.are.same({ 2.5, 2.5, 2.5, 2.5, 2.5 }, p:totable())
    assert.is_false(weft.zeros(3).pinned)
    assert.matches("weft.zeros: device 'cuda:0'", msg(weft.zeros, 4, weft.float32, { pinned = true, device = "cuda:0" }), 1, true)
    assert.matches("weft.array: copy = false wraps the memory as it is; pinned needs a copy",
                   msg(weft.array, require("ffi").new("float[4]"), weft.float32, { copy = false, pinned = true }), 1, true)
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
  for _, name in ipairs { "saxpy", "loops", "intmath", "vec3", "atomics", "rng", "half", "intatomics" } do
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

-- Equal within a relative tolerance (exactly when tol is nil).
local function close(x, y, tol, path)
  path = path or ""
  if type(x) == "table" then
    assert.are.equal(#x, #y, "length at " .. path)
    for j = 1, #x do close(x[j], y[j], tol, path .. "[" .. j .. "]") end
    for key, v in pairs(x) do
      if type(key) == "string" then close(v, y[key], tol, path .. "." .. key) end
    end
    return
  end
  if type(x) ~= "number" or not tol or x == y then
    assert.are.equal(x, y, "at " .. path)
    return
  end
  assert.is_true(math.abs(x - y) <= tol * math.max(1, math.abs(x)),
                 string.format("at %s: cpu %.17g, cuda C %.17g", path, x, y))
end

-- The elements of an array as Lua values (structs field by field).
local function values(a)
  local t = a:totable()
  for i, v in ipairs(t) do
    if type(v) == "cdata" then
      local r = {}
      for _, f in ipairs(a.dtype.fields) do
        local x = v[f.name]
        r[f.name] = type(x) == "cdata" and f.type.totable and f.type.totable(x) or tonumber(x)
      end
      t[i] = r
    end
  end
  return t
end

describe("cuda C on the host matches the cpu backend", function()
  if not shim.available() then
    pending("no g++")
    return
  end
  for _, name in ipairs(SHIM) do
    it(name, function()
      local k, dim, make, opts = K[name][1], K[name][2], K[name][3], K[name][4] or {}
      if not module_of(k) then
        pending("front end does not compile " .. name)
        return
      end
      local a_cpu, a_gpu, a_init = make(), make(), make()
      weft.launch(k, dim, a_cpu)
      shim.run(weft, k, dim, a_gpu)
      local changed = false
      for i, v in ipairs(a_cpu) do
        if weft.is_array(v) then
          local x, y = values(v), values(a_gpu[i])
          close(x, y, opts.tol, name .. " arg " .. i)
          if not changed then changed = not pcall(close, values(a_init[i]), y) end
        end
      end
      assert.is_true(changed, "the kernel changed no array")
    end)
  end
end)

describe("cuda C adjoint kernels on the host match the cpu backend", function()
  if not shim.available() then
    pending("no g++")
    return
  end
  for _, name in ipairs { "saxpy", "math", "mat", "overwrite", "minmax" } do
    it(name, function()
      local k, dim, make = ADJ[name][1], ADJ[name][2], ADJ[name][3]
      -- adjoints: ones for the last array (the output), zeros elsewhere
      local function adjs(args)
        local out, last = {}, 0
        for i, v in ipairs(args) do if weft.is_array(v) then last = i end end
        for i, v in ipairs(args) do
          if weft.is_array(v) then
            out[i] = i == last and weft.ones(v.shape, v.dtype) or weft.zeros_like(v)
          else
            out[i] = false
          end
        end
        return out
      end
      local a_cpu, a_gpu = make(), make()
      local g_cpu, g_gpu = adjs(a_cpu), adjs(a_gpu)
      local adj_in = {}
      for i = 1, #a_cpu do adj_in[i] = g_cpu[i] or nil end
      weft.launch(k, dim, a_cpu, { adjoint = true, adj_inputs = adj_in })
      local args = {}
      for _, v in ipairs(a_gpu) do args[#args + 1] = v end
      for _, g in ipairs(g_gpu) do if g then args[#args + 1] = g end end
      shim.run(weft, k, dim, args, { adjoint = true })
      local some = false
      for i, g in ipairs(g_cpu) do
        if g then
          local x, y = values(g), values(g_gpu[i])
          close(x, y, 1e-6, name .. " adjoint of arg " .. i)
          some = some or not pcall(close, x, values(weft.zeros_like(g)))
        end
      end
      assert.is_true(some, "every adjoint stayed zero")
    end)
  end
  it("passes a missing adjoint as the null header", function()
    local k, make = ADJ.math[1], ADJ.math[3]
    local a_cpu, a_gpu = make(), make()
    local gx_cpu, go_cpu = weft.zeros(9, weft.float64), weft.ones(9, weft.float64)
    weft.launch(k, 9, a_cpu, { adjoint = true, adj_inputs = { gx_cpu, nil, go_cpu } })
    local gx, go = weft.zeros(9, weft.float64), weft.ones(9, weft.float64)
    shim.run(weft, k, 9, { a_gpu[1], a_gpu[2], a_gpu[3], gx, false, go }, { adjoint = true })
    close(gx_cpu:totable(), gx:totable(), 1e-12, "adjoint of x")
    assert.are_not.equal(0, gx:totable()[1])
  end)
end)

describe("cuda C derived kernels on the host: custom gradients and forward mode", function()
  if not shim.available() then
    pending("no g++")
    return
  end
  local f64 = weft.float64
  -- deliberately not the derivative of the body: the result shows which is used
  local sq = weft.func(function(v) return v * v end)
  sq:grad(function(v, adj) return 4321.0 * adj end)
  local k = weft.kernel{ x = weft.array(f64), y = weft.array(f64),
    function(x, y)
      local i = weft.tid()
      y[i] = sq(x[i]) + weft.sin(x[i])
    end }
  local xs = { 0.5, -1, 2, 0.25 }

  it("the adjoint entry applies f:grad, as the cpu adjoint does", function()
    local gx_cpu = weft.zeros(4, f64)
    weft.launch(k, 4, { weft.array(xs, f64) }, { adjoint = true, outputs = { weft.zeros(4, f64) },
      adj_inputs = { gx_cpu }, adj_outputs = { weft.array({ 1, 2, 3, 4 }, f64) } })
    local gx = weft.zeros(4, f64)
    shim.run(weft, k, 4, { weft.array(xs, f64), weft.zeros(4, f64), gx, weft.array({ 1, 2, 3, 4 }, f64) },
      { adjoint = true })
    close(gx_cpu:totable(), gx:totable(), 1e-12, "adjoint of x")
    for i, x in ipairs(xs) do
      close(i * (4321 + math.cos(x)), gx:totable()[i], 1e-12, "custom gradient " .. i)
    end
  end)

  it("k:ptx's adjoint entry holds the custom gradient", function()
    if not have_nvrtc then
      pending("NVRTC not found")
      return
    end
    -- 4321.0 as a PTX double immediate
    assert.matches("0d40B0E10000000000", k:ptx("sm_80"), 1, true)
    assert.is_nil(k:ptx("sm_80", nil, { adjoint = false }):find("0d40B0E10000000000", 1, true))
  end)

  it("the tangent entry (weft.jvp) matches the cpu", function()
    local g = weft.kernel{ x = weft.array(f64), v = weft.array(weft.vec3d), o = weft.array(f64),
      function(x, v, o)
        local i = weft.tid()
        local acc = 0.0
        for j = 0, 2 do acc = acc + weft.exp(x[i] * weft.float64(j + 1)) * v[i][j] end
        o[i] = acc / (1.0 + weft.length(v[i]))
      end }
    local function make()
      return weft.array({ 0.1, -0.4, 0.7 }, f64),
             weft.array({ { 1, 2, 3 }, { -1, 0.5, 2 }, { 0, 0, 1 } }, weft.vec3d)
    end
    local x, v = make()
    local tx, tv = weft.array({ 1, 0.5, -2 }, f64), weft.array({ { 0, 1, 0 }, { 1, 1, 1 }, { -1, 0, 2 } }, weft.vec3d)
    local o, to = weft.zeros(3, f64), weft.zeros(3, f64)
    weft.jvp(g, 3, { x, v }, { tx, tv }, { o }, { to })
    local x2, v2 = make()
    local o2, to2 = weft.zeros(3, f64), weft.zeros(3, f64)
    shim.run(weft, g, 3, { x2, v2, o2, weft.clone(tx), weft.clone(tv), to2 }, { jvp = true })
    close(o:totable(), o2:totable(), 1e-12, "primal")
    close(to:totable(), to2:totable(), 1e-12, "tangent")
    assert.are_not.equal(0, to2:totable()[1])
  end)
end)

describe("cuda debug mode", function()
  local oob_line = debug.getinfo(1, "l").currentline + 5 -- the line of row[1] = x[i + 1]
  local oob = weft.kernel{ x = weft.array(weft.float32), o = weft.array(weft.float32, 2),
    function(x, o)
      local i = weft.tid()
      local row = o[i]
      row[1] = x[i + 1]
    end }
  local div = weft.kernel{ x = weft.array(weft.int32), d = weft.int32,
    function(x, d)
      local i = weft.tid()
      x[i] = weft.floordiv(x[i], d) + x[i] % d
    end }

  it("emits no checks and no error slot in fast mode", function()
    weft.config.mode = "fast"
    local src = oob:source("cuda")
    weft.config.mode = "release"
    assert.is_nil(src:find("wf_oob", 1, true))
    assert.is_nil(src:find("wf_err", 1, true))
  end)

  it("release mode checks tid ranges per launch and the rest per access", function()
    local src = oob:source("cuda") -- the default mode
    assert.matches("wf_err *wf_e)", src, 1, true)
    local n, r = 0, 0
    for _ in src:gmatch("if %(wf_oob%(") do n = n + 1 end
    for _ in src:gmatch("if %(wf_range%(wf_e, ") do r = r + 1 end
    assert.are.equal(1, n) -- row[1]
    assert.are.equal(2, r) -- o[i] and x[i + 1]: tid + 0 and tid + 1 against the launch dim
    assert.matches("wf_range(wf_e, 1LL, wf_d.dim[0] - 1 + 1LL, 0, 1, v0.shape[0]", src, 1, true)
    assert.is_nil(src:find("wf_e->flag) return", 1, true)) -- no polling in release mode
  end)

  it("adds the error slot and a check per access", function()
    local names = { "x", "o" }
    local src = internal.core.cuda_source(oob:_module(), { debug = true, names = names })
    assert.matches("wf_err *wf_e)", src, 1, true)
    local n = 0
    for _ in src:gmatch("if %(wf_oob%(") do n = n + 1 end
    assert.are.equal(3, n) -- the view o[i], row[1], x[i + 1]
  end)

  if not shim.available() then
    pending("no g++")
    return
  end

  local function cpu_error(k, dim, args)
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, k, dim, args)
    weft.config.mode = "release"
    assert.is_false(ok)
    return tostring(err)
  end

  it("reports an out-of-bounds read with the Lua line, as the cpu does", function()
    local x, o = weft.zeros(4), weft.zeros({ 4, 3 })
    local _, msg = shim.run(weft, oob, 4, { x, o }, { debug = true })
    assert.are.equal("spec/cuda_spec.lua:" .. oob_line .. ": index 4 out of bounds for axis 0 with size 4 in array 'x' of kernel 'oob'", msg)
    assert.matches(msg, cpu_error(oob, 4, { weft.zeros(4), weft.zeros({ 4, 3 }) }), 1, true)
  end)

  it("reports the axis and the array through views", function()
    local x, o = weft.zeros(5), weft.zeros({ 4, 1 })
    local _, msg = shim.run(weft, oob, 4, { x, o }, { debug = true })
    assert.matches("index 1 out of bounds for axis 1 with size 1 in array 'o'", msg, 1, true)
    assert.matches(msg, cpu_error(oob, 4, { weft.zeros(5), weft.zeros({ 4, 1 }) }), 1, true)
  end)

  it("runs in-bounds kernels unchanged", function()
    local x, o = weft.array({ 1, 2, 3, 4, 5 }, weft.float32), weft.zeros({ 4, 2 })
    local _, msg = shim.run(weft, oob, 4, { x, o }, { debug = true })
    assert.is_nil(msg)
    assert.are.same({ { 0, 2 }, { 0, 3 }, { 0, 4 }, { 0, 5 } }, o:totable())
    x, o = weft.array({ 1, 2, 3, 4, 5 }, weft.float32), weft.zeros({ 4, 2 })
    _, msg = shim.run(weft, oob, 4, { x, o }, { checks = true })
    assert.is_nil(msg)
    assert.are.same({ { 0, 2 }, { 0, 3 }, { 0, 4 }, { 0, 5 } }, o:totable())
  end)

  it("reports release mode's errors as the cpu does, before any thread writes", function()
    local function cpu_release(dim, x, o)
      local ok, err = pcall(weft.launch, oob, dim, { x, o })
      assert.is_false(ok)
      return tostring(err)
    end
    -- the launch dim is too large for x[i + 1]: checked once, nothing written
    local x, o = weft.full(4, 7.0), weft.zeros({ 4, 3 })
    local _, msg = shim.run(weft, oob, 4, { x, o }, { checks = true })
    assert.are.equal("spec/cuda_spec.lua:" .. oob_line .. ": index 4 out of bounds for axis 0 with size 4 in array 'x' of kernel 'oob'", msg)
    assert.are.same({ 0, 0, 0 }, o:totable()[1])
    assert.matches(msg, cpu_release(4, weft.full(4, 7.0), weft.zeros({ 4, 3 })), 1, true)
    -- row[1] on rows of one element: the per-access check
    _, msg = shim.run(weft, oob, 4, { weft.zeros(5), weft.zeros({ 4, 1 }) }, { checks = true })
    assert.matches("index 1 out of bounds for axis 1 with size 1 in array 'o' of kernel 'oob'", msg, 1, true)
    assert.matches(msg, cpu_release(4, weft.zeros(5), weft.zeros({ 4, 1 })), 1, true)
  end)

  it("checks loop ranges in release mode as the cpu does", function()
    local sum = weft.kernel{ x = weft.array(weft.float32), s = weft.array(weft.float32),
      n = weft.int32, function(x, s, n)
        local i = weft.tid()
        local acc = 0.0
        for j = n - 1, 0, -1 do acc = acc + x[j + 1] end
        s[i] = acc
      end }
    local s = weft.zeros(2)
    local _, msg = shim.run(weft, sum, 2, { weft.array({ 1, 2, 3 }, weft.float32), s, 2 },
                            { checks = true })
    assert.is_nil(msg)
    assert.same({ 5, 5 }, s:totable())
    _, msg = shim.run(weft, sum, 2, { weft.array({ 1, 2, 3 }, weft.float32), s, 3 }, { checks = true })
    assert.matches("index 3 out of bounds for axis 0 with size 3 in array 'x' of kernel 'sum'", msg, 1, true)
    local ok, err = pcall(weft.launch, sum, 2, { weft.array({ 1, 2, 3 }, weft.float32), s, 3 })
    assert.is_false(ok)
    assert.equal(msg, tostring(err))
  end)

  it("reports integer division by zero", function()
    local x = weft.array({ 7, -7, 9 }, weft.int32)
    local _, msg = shim.run(weft, div, 3, { x, 0 }, { debug = true })
    assert.matches("^spec/cuda_spec%.lua:%d+: integer division by zero$", msg)
    assert.matches(msg, cpu_error(div, 3, { weft.array({ 7, -7, 9 }, weft.int32), 0 }), 1, true)
    local y = weft.array({ 7, -7, 9 }, weft.int32)
    local _, ok = shim.run(weft, div, 3, { y, 2 }, { debug = true })
    assert.is_nil(ok)
    assert.are.same({ 4, -3, 5 }, y:totable())
  end)
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
  it("runs every representative kernel as the cpu does", function()
    for _, name in ipairs(SHIM) do
      local k, dim, make, opts = K[name][1], K[name][2], K[name][3], K[name][4] or {}
      if module_of(k) then
        local a_cpu, a_dev = make(), make()
        for i, v in ipairs(a_dev) do if weft.is_array(v) then a_dev[i] = v:to("cuda:0") end end
        weft.launch(k, dim, a_cpu)
        weft.launch(k, dim, a_dev, { device = "cuda:0" })
        weft.synchronize()
        for i, v in ipairs(a_cpu) do
          if weft.is_array(v) then close(values(v), values(a_dev[i]:to("cpu")), opts.tol, name .. " arg " .. i) end
        end
      end
    end
  end)
  it("reports out-of-bounds accesses in debug mode with the Lua line", function()
    local k = weft.kernel{ x = weft.array(weft.float32), function(x)
      local i = weft.tid()
      x[i + 1] = 1.0
    end }
    local x = weft.zeros(8, weft.float32, { device = "cuda:0" })
    weft.config.mode = "debug"
    local ok, err = pcall(weft.launch, k, 8, { x }, { device = "cuda:0" })
    weft.config.mode = "release"
    assert.is_false(ok)
    assert.matches("spec/cuda_spec.lua:%d+: index 8 out of bounds for axis 0 with size 8 in array 'x'", err)
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
    -- a capture records without running: the launch before it and the replay
    local xs, ys = a[1]:totable(), y:totable()
    for i = 1, 100 do assert.are.equal(a[2]:totable()[i] + 2 * xs[i], ys[i]) end
  end)
  it("streams: launches on a named stream, events order two streams and time them", function()
    local k, make = K.saxpy[1], K.saxpy[3]
    local a = make()
    local x, y = a[1]:to("cuda:0"), a[2]:to("cuda:0")
    local s1, s2 = weft.Stream("cuda:0"), weft.Stream("cuda:0")
    assert.is_true(weft.is_stream(s1))
    local t0, t1 = weft.Event("cuda:0", { enable_timing = true }), weft.Event("cuda:0", { enable_timing = true })
    s1:record_event(t0)
    for _ = 1, 10 do weft.launch(k, 100, { x, y, 1.0 }, { stream = s1 }) end
    s1:record_event(t1)
    s2:wait_event(t1) -- s2's launch runs after the ten on s1
    weft.launch(k, 100, { x, y, 1.0 }, { stream = s2 })
    s2:synchronize()
    local xs, y0, ys = a[1]:totable(), a[2]:totable(), y:totable()
    for i = 1, 100 do assert.are.equal(y0[i] + 11 * xs[i], ys[i]) end
    weft.synchronize_event(t1)
    assert.is_true(weft.get_event_elapsed_time(t0, t1) >= 0)
    -- the current stream: set, scoped, restored
    assert.is_nil(weft.get_stream("cuda:0").handle)
    weft.ScopedStream(s2, function()
      assert.are.equal(s2, weft.get_stream("cuda:0"))
      weft.launch(k, 100, { x, y, 1.0 }, { device = "cuda:0" })
    end)
    assert.is_nil(weft.get_stream("cuda:0").handle)
    weft.synchronize_stream(s2)
    assert.are.equal(y0[1] + 12 * xs[1], y:totable()[1])
    -- a stream of another device is refused
    local ok, err = pcall(weft.launch, k, 100, { x, y, 1.0 }, { device = "cpu", stream = s1 })
    assert.is_false(ok)
    assert.matches("opts.stream is on cuda:0, but the launch runs on cpu", err, 1, true)
  end)
  it("pinned host arrays are page-locked and copy both ways", function()
    local p = weft.array({ 1, 2, 3, 4 }, weft.float32, { pinned = true })
    assert.is_true(p.pinned)
    local d = p:to("cuda:0")
    local back = weft.zeros(4, weft.float32, { pinned = true })
    weft.copy(back, d)
    assert.are.same({ 1, 2, 3, 4 }, back:totable())
    assert.is_true(weft.clone(back).pinned)
    assert.is_false(weft.clone(back, { pinned = false }).pinned)
  end)
  it("runs adjoints on the device: the tape, explicit adjoint launches, custom gradients", function()
    for _, name in ipairs { "saxpy", "math", "mat", "overwrite", "minmax" } do
      local k, dim, make = ADJ[name][1], ADJ[name][2], ADJ[name][3]
      local function grads(args, dev)
        local ai, last = {}, 0
        for i, v in ipairs(args) do if weft.is_array(v) then last = i end end
        for i, v in ipairs(args) do
          ai[i] = weft.is_array(v) and (i == last and weft.ones(v.shape, v.dtype, { device = dev })
                                        or weft.zeros(v.shape, v.dtype, { device = dev })) or false
        end
        return ai
      end
      local a_cpu, a_dev = make(), make()
      for i, v in ipairs(a_dev) do if weft.is_array(v) then a_dev[i] = v:to("cuda:0") end end
      local g_cpu, g_dev = grads(a_cpu, "cpu"), grads(a_dev, "cuda:0")
      weft.launch(k, dim, a_cpu, { adjoint = true, adj_inputs = g_cpu })
      weft.launch(k, dim, a_dev, { adjoint = true, adj_inputs = g_dev, device = "cuda:0" })
      weft.synchronize()
      for i, g in ipairs(g_cpu) do
        if g then close(values(g), values(g_dev[i]:to("cpu")), 1e-6, name .. " adjoint " .. i) end
      end
    end
    -- the tape with .grad on the device, through a custom gradient
    local sq = weft.func(function(v) return v * v end)
    sq:grad(function(v, adj) return 4321.0 * adj end)
    local k = weft.kernel{ x = weft.array(weft.float64), y = weft.array(weft.float64),
      function(x, y) local i = weft.tid(); y[i] = sq(x[i]) end }
    local x = weft.array({ 1, 2, 3 }, weft.float64, { device = "cuda:0", requires_grad = true })
    local y = weft.zeros(3, weft.float64, { device = "cuda:0", requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { x }, { outputs = { y }, device = "cuda:0" }) end)
    tape:backward{ grads = { [y] = weft.array({ 1, 2, 3 }, weft.float64, { device = "cuda:0" }) } }
    weft.synchronize()
    assert.are.same({ 1, 4, 9 }, y:totable())
    assert.are.same({ 4321, 8642, 12963 }, x.grad:totable())
  end)
end)
