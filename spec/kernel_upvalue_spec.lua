-- Kernels see the current values of the names they capture (weft issue 10,
-- item 7: after `scale = 5.0` a kernel kept using 3). Each launch checks a
-- guard over the captured values and compiles again when one changed.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local A = weft.array(weft.float32)

-- Compiles plus disk cache hits of kernel k so far.
local function builds(k)
  local s = weft.stats(k)
  return s.compiles + s.disk_hits
end

describe("captured values", function()
  it("a number upvalue: the launch after an assignment uses the new value", function()
    local scale = 3.0
    local k = weft.kernel{ x = A, function(x)
      local i = weft.tid()
      x[i] = x[i] * 0.0 + scale
    end }
    local x = weft.zeros(4)
    weft.launch(k, 4, { x })
    assert.are.equal(3, x[2])
    assert.are.equal(0, weft.stats(k).respecialized)
    scale = 5.0
    weft.launch(k, 4, { x })
    assert.are.equal(5, x[2])
    assert.are.equal(1, weft.stats(k).respecialized)
    -- going back to an earlier value reuses its code
    local n = builds(k)
    scale = 3.0
    weft.launch(k, 4, { x })
    assert.are.equal(3, x[2])
    assert.are.equal(n, builds(k))
    -- and an unchanged value compiles nothing
    for _ = 1, 3 do weft.launch(k, 4, { x }) end
    assert.are.equal(n, builds(k))
  end)

  it("a change inside a hot (JIT-compiled) launch loop is seen at once", function()
    local step = 1.0
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = x[weft.tid()] + step end }
    local x = weft.zeros(1)
    for i = 1, 2000 do
      if i == 1001 then step = 2.0 end
      weft.launch(k, 1, { x })
    end
    assert.are.equal(3000, x[0])
  end)

  it("booleans, globals and fields of captured tables", function()
    local flip = false
    local cfg = { gain = 2.0, inner = { bias = 1.0 } }
    WEFT_SPEC_OFFSET = 10.0 -- a global, read through the function's environment
    local k = weft.kernel{ x = A, function(x)
      local i = weft.tid()
      local v = cfg.gain * 2.0 + cfg.inner.bias + WEFT_SPEC_OFFSET
      if flip then v = -v end
      x[i] = v
    end }
    local x = weft.zeros(2)
    weft.launch(k, 2, { x })
    assert.are.equal(15, x[0])
    flip = true
    weft.launch(k, 2, { x })
    assert.are.equal(-15, x[0])
    cfg.gain = 3.0
    weft.launch(k, 2, { x })
    assert.are.equal(-17, x[0])
    cfg.inner.bias = 2.0
    weft.launch(k, 2, { x })
    assert.are.equal(-18, x[0])
    cfg = { gain = 0.5, inner = { bias = 0.0 } } -- a new table under the name
    weft.launch(k, 2, { x })
    assert.are.equal(-11, x[0])
    WEFT_SPEC_OFFSET = 20.0
    weft.launch(k, 2, { x })
    assert.are.equal(-21, x[0])
    WEFT_SPEC_OFFSET = nil
  end)

  it("weft.constant values, typed ones included, replaced under a name", function()
    local c = weft.constant(weft.vec3(1, 2, 3))
    local s = weft.constant(2.0)
    local k = weft.kernel{ x = weft.array(weft.vec3), function(x)
      x[weft.tid()] = c * s
    end }
    local x = weft.zeros(1, weft.vec3)
    weft.launch(k, 1, { x })
    assert.are.same({ 2, 4, 6 }, x:totable()[1])
    c = weft.constant(weft.vec3(0, 0, 1))
    weft.launch(k, 1, { x })
    assert.are.same({ 0, 0, 2 }, x:totable()[1])
    s = weft.constant(-1.0)
    weft.launch(k, 1, { x })
    assert.are.same({ 0, 0, -1 }, x:totable()[1])
  end)

  it("vectors, structs and int64 values captured directly, changed in place", function()
    local v = weft.vec3(1, 2, 3)
    local P = weft.struct{ { "pos", weft.vec3 }, { "mass", weft.float32 } }
    local p = P{ pos = weft.vec3(1, 0, 0), mass = 2.0 }
    local n = weft.int64(7)
    local k = weft.kernel{ x = weft.array(weft.vec3), function(x)
      x[weft.tid()] = v + p.pos * p.mass + weft.vec3(weft.float32(n), 0.0, 0.0)
    end }
    local x = weft.zeros(1, weft.vec3)
    local function got()
      weft.launch(k, 1, { x })
      return x:totable()[1]
    end
    assert.are.same({ 10, 2, 3 }, got())
    v.y = 20 -- in place: the same cdata object
    assert.are.same({ 10, 20, 3 }, got())
    p.mass = 0.0
    assert.are.same({ 8, 20, 3 }, got())
    n = weft.int64(-1)
    assert.are.same({ 0, 20, 3 }, got())
    v = weft.vec3(0, 0, 0) -- a new value under the name
    assert.are.same({ -1, 0, 0 }, got())
    local n0 = builds(k)
    assert.are.same({ -1, 0, 0 }, got())
    assert.are.equal(n0, builds(k))
    -- a cdata that is not of a weft type is still refused
    local ffi = require "ffi"
    local raw = ffi.new("int[2]")
    local kr = weft.kernel{ x = A, function(x) x[weft.tid()] = raw end }
    assert.has_error(function() weft.launch(kr, 1, { weft.zeros(1) }) end)
    local ok, err = pcall(weft.launch, kr, 1, { weft.zeros(1) })
    assert.matches("'raw' (a cdata) cannot be used in a kernel", err, 1, true)
  end)

  it("a weft.func replaced under a name, and the upvalues of a weft.func", function()
    local k_a = 2.0
    local double = weft.func(function(v) return v * k_a end)
    local f = double
    local k = weft.kernel{ x = A, function(x)
      local i = weft.tid()
      x[i] = f(1.5)
    end }
    local x = weft.zeros(1)
    weft.launch(k, 1, { x })
    assert.are.equal(3, x[0])
    k_a = 4.0 -- an upvalue of the func, not of the kernel
    weft.launch(k, 1, { x })
    assert.are.equal(6, x[0])
    f = weft.func(function(v) return v + 1.0 end)
    weft.launch(k, 1, { x })
    assert.are.equal(2.5, x[0])
    -- an overload added later takes part in the next launch's choice
    local g = weft.func{ v = weft.float64, function(v) return v end }
    f = g
    local k2 = weft.kernel{ x = A, function(x) x[weft.tid()] = f(weft.float32(1.5)) end }
    assert.has_error(function() weft.launch(k2, 1, { x }) end)
    g:overload{ v = weft.float32, function(v) return v * 10.0 end }
    weft.launch(k2, 1, { x })
    assert.are.equal(15, x[0])
  end)

  it("generic kernels: every signature sees the change", function()
    local bias = 1
    local k = weft.kernel{ function(x) x[weft.tid()] = x[weft.tid()] + bias end }
    local xf, xd = weft.zeros(2), weft.zeros(2, weft.float64)
    weft.launch(k, 2, { xf })
    weft.launch(k, 2, { xd })
    bias = 10
    weft.launch(k, 2, { xf })
    weft.launch(k, 2, { xd })
    assert.are.equal(11, xf[1])
    assert.are.equal(11, xd[1])
  end)

  it("NaN and signed zero: no compile at every launch, and -0.0 is kept", function()
    local v = 0 / 0
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = 1.0 / (v + 0.0 * x[weft.tid()]) end }
    local x = weft.zeros(1)
    weft.launch(k, 1, { x })
    local n = builds(k)
    for _ = 1, 5 do weft.launch(k, 1, { x }) end
    assert.are.equal(n, builds(k))
    assert.is_true(x[0] ~= x[0])
    local z = 0.0
    local kz = weft.kernel{ x = A, function(x) x[weft.tid()] = 1.0 / z end }
    weft.launch(kz, 1, { x })
    assert.are.equal(math.huge, x[0])
    z = -0.0
    weft.launch(kz, 1, { x })
    assert.are.equal(-math.huge, x[0])
  end)

  it("a value that becomes unusable is an error at the kernel's line", function()
    local scale = 2.0
    local k = weft.kernel{ x = A, function(x)
      local i = weft.tid()
      x[i] = scale -- line A
    end }
    local line = debug.getinfo(1, "l").currentline - 2
    local x = weft.zeros(1)
    weft.launch(k, 1, { x })
    scale = "big"
    local ok, err = pcall(weft.launch, k, 1, { x })
    assert.is_false(ok)
    assert.matches("kernel_upvalue_spec.lua:" .. line .. ": 'scale' is a string; strings cannot "
                   .. "be used in kernels", err, 1, true)
    scale = 4.0
    weft.launch(k, 1, { x })
    assert.are.equal(4, x[0])
  end)

  it("k:ir of a generic kernel without argument types names the caller's line", function()
    local k = weft.kernel{ function(x) x[weft.tid()] = 1.0 end }
    local ok, err = pcall(function() return k:ir() end)
    assert.is_false(ok)
    assert.matches("^spec/kernel_upvalue_spec.lua:%d+: weft: kernel 'k': parameter 'x' is generic", err)
  end)

  it("k:ir, k:source and the llvm code follow the current values", function()
    local c = 1.25
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = c end }
    assert.matches("1.25", k:ir(), 1, true)
    c = 7.5
    assert.matches("7.5", k:ir(), 1, true)
    assert.not_matches("1.25", k:ir(), 1, true)
    assert.matches(string.format("%a", 7.5), k:source("cuda"), 1, true) -- hex floats
    c = 0.5
    assert.matches(string.format("%a", 0.5), k:source("cuda"), 1, true)
  end)

  it("tapes differentiate the code that ran; later launches see new values", function()
    local w = 3.0
    local k = weft.kernel{ x = A, y = A, function(x, y)
      local i = weft.tid()
      y[i] = x[i] * x[i] * w
    end }
    local x = weft.array({ 1, 2 }, weft.float32, { requires_grad = true })
    local y = weft.zeros(2, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x, y }) end)
    w = 100.0 -- after the forward launch, before backward
    tape:backward{ grads = { [y] = weft.ones(2) } }
    assert.are.same({ 6, 12 }, x.grad:totable()) -- d(3 x^2)/dx
    -- an adjoint launch of its own uses the current value
    local gx = weft.zeros(2)
    weft.launch(k, 2, { x }, { outputs = { y }, adjoint = true, adj_inputs = { gx },
                               adj_outputs = { weft.ones(2) } })
    assert.are.same({ 200, 400 }, gx:totable())
  end)

  it("custom gradients on a tape use the values of the forward launch", function()
    local w = 2.0
    local f = weft.func(function(v) return v * w end)
    f:grad(function(v, adj) return adj * w end)
    local k = weft.kernel{ x = A, y = A, function(x, y)
      local i = weft.tid()
      y[i] = f(x[i])
    end }
    local x = weft.array({ 1, 2 }, weft.float32, { requires_grad = true })
    local y = weft.zeros(2, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x }, { outputs = { y } }) end)
    w = 50.0
    tape:backward{ grads = { [y] = weft.ones(2) } }
    assert.are.same({ 2, 2 }, x.grad:totable())
    -- a new forward launch takes the new value
    x.grad:zero_()
    tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.ones(2) } }
    assert.are.same({ 50, 50 }, x.grad:totable())
  end)

  it("cpu graphs replay with the values current at the replay", function()
    local add = 1.0
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = x[weft.tid()] + add end }
    local x = weft.zeros(2)
    weft.capture_begin("cpu")
    weft.launch(k, 2, { x })
    local g = weft.capture_end()
    weft.capture_launch(g)
    add = 10.0
    weft.capture_launch(g)
    assert.are.equal(11, x[0])
  end)

  it("a func's custom gradient set after the first launch is used", function()
    local sq = weft.func(function(v) return v * v end)
    local k = weft.kernel{ x = A, y = A, function(x, y)
      local i = weft.tid()
      y[i] = sq(x[i])
    end }
    local x = weft.array({ 3 }, weft.float32)
    local y = weft.zeros(1)
    local gx = weft.zeros(1)
    internal.launch_adjoint(k, 1, { x, y }, {}, { gx, weft.ones(1) }, {})
    assert.are.equal(6, gx[0])
    sq:grad(function(v, adj) return 100.0 * adj end)
    gx:zero_()
    internal.launch_adjoint(k, 1, { x, y }, {}, { gx, weft.ones(1) }, {})
    assert.are.equal(100, gx[0])
  end)
end)

describe("captured values on the CUDA path", function()
  local core = internal.core
  it("k:ptx follows the current values", function()
    if not (core.cuda_nvrtc_version and core.cuda_nvrtc_version()) then
      pending("NVRTC not found")
      return
    end
    local c = 0.5
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = c end }
    local p1 = k:ptx("sm_80")
    c = 0.25
    local p2 = k:ptx("sm_80")
    assert.are_not.equal(p1, p2)
    c = 0.5
    assert.are.equal(p1, k:ptx("sm_80"))
  end)

  it("device launches see the change", function() -- make test: under scripts/cuda-emu
    if require("helpers.cuda").missing() then return end
    local add = 1.0
    local k = weft.kernel{ x = A, function(x) x[weft.tid()] = x[weft.tid()] + add end }
    local x = weft.zeros(4, weft.float32, { device = "cuda:0" })
    weft.launch(k, 4, { x }, { device = "cuda:0" })
    add = 10.0
    weft.launch(k, 4, { x }, { device = "cuda:0" })
    assert.are.equal(11, x:to("cpu")[3])
    -- a CUDA graph holds the code of the values it captured: replaying it
    -- after a change is an error, not a silent replay of the old code
    weft.capture_begin("cuda:0")
    weft.launch(k, 4, { x }, { device = "cuda:0" })
    local g = weft.capture_end()
    weft.capture_launch(g)
    weft.synchronize()
    assert.are.equal(21, x:to("cpu")[3])
    add = 1.0
    local ok, err = pcall(weft.capture_launch, g)
    assert.is_false(ok)
    assert.matches("values changed since the graph was captured", err, 1, true)
    add = 10.0
    weft.capture_launch(g)
    weft.synchronize()
    assert.are.equal(31, x:to("cpu")[3])
  end)
end)
