-- The user errors of weft.launch (raised by lua/weft/launch.lua): wrong
-- argument count, dtype, ndim, scalar and composite parameter types,
-- generic parameters, devices, dims and options. Each message names the
-- kernel and the parameter and points at the caller's line.
local weft = require "weft"

describe("weft.launch user errors", function()
  local k = weft.kernel{ x = weft.array(weft.float32), n = weft.int32, v = weft.vec3, b = weft.bool,
                         function(x, n, v, b) end }
  local g = weft.kernel{ function(x, y) end }
  local x = weft.zeros(4)
  local V = weft.vec3()

  local function err_of(...)
    local ok, e = pcall(weft.launch, ...)
    assert.is_false(ok, "the launch should fail")
    return tostring(e)
  end
  local function expect(msg, ...)
    local e = err_of(...)
    local head = "spec/kernel_launch_errors_spec.lua:15: weft.launch: "
    assert.are.equal(head .. msg, e)
  end

  it("argument count (inputs then outputs)", function()
    expect("kernel 'k' takes 4 arguments (inputs then outputs), got 3", k, 4, { x, 1, V })
    expect("kernel 'k' takes 4 arguments (inputs then outputs), got 5", k, 4, { x, 1, V, true, 5 })
    expect("kernel 'k' takes 4 arguments (inputs then outputs), got 5", k, 4, { x, 1 }, { outputs = { V, true, x } })
    expect("kernel 'g' takes 2 arguments (inputs then outputs), got 1", g, 4, { x })
  end)

  it("array dtype and ndim", function()
    expect("kernel 'k': parameter 'x' expects array(float32), got array(float64)",
           k, 4, { weft.zeros(4, weft.float64), 1, V, true })
    expect("kernel 'k': parameter 'x' expects array(float32), got array(float32,2)",
           k, 4, { weft.zeros({ 2, 2 }), 1, V, true })
    expect("kernel 'k': parameter 'x' expects array(float32), got a number", k, 4, { 1, 1, V, true })
  end)

  it("scalar and composite parameters", function()
    expect("kernel 'k': parameter 'n' expects int32, got a string", k, 4, { x, "1", V, true })
    expect("kernel 'k': parameter 'v' expects vec3f, got a number", k, 4, { x, 1, 3, true })
    expect("kernel 'k': parameter 'v' expects vec3f, got vec3d", k, 4, { x, 1, weft.vec3d(), true })
    expect("kernel 'k': parameter 'b' expects bool, got a number", k, 4, { x, 1, V, 1 })
  end)

  it("generic parameters take the type of their argument, or say why not", function()
    expect("kernel 'g': generic parameter 'y' cannot take a string", g, 4, { x, "s" })
    expect("kernel 'g': generic parameter 'y' cannot take a table", g, 4, { x, {} })
  end)

  it("dims", function()
    expect("kernel 'k': dim must be a non-negative integer, got -1", k, -1, { x, 1, V, true })
    expect("kernel 'k': dim must be a non-negative integer, got 2.5", k, 2.5, { x, 1, V, true })
    expect("kernel 'k': dim must have 1 to 4 entries, got 5", k, { 1, 2, 3, 4, 5 }, { x, 1, V, true })
    expect("kernel 'k': dim must have 1 to 4 entries, got 0", k, {}, { x, 1, V, true })
    expect("kernel 'k': dim[2] must be a non-negative integer, got -3", k, { 1, -3 }, { x, 1, V, true })
    expect("kernel 'k': dim must be an integer or a table of 1 to 4 integers, got nil", k, nil, { x, 1, V, true })
  end)

  it("kernels, inputs and options", function()
    expect("expected a kernel (made by weft.kernel), got a table", {}, 4, {})
    expect("kernel 'k': inputs must be a table, got a string", k, 4, "x")
    expect("kernel 'k': opts.outputs must be a table, got a number", k, 4, { x, 1, V, true }, { outputs = 3 })
    expect("kernel 'k': opts must be a table, got a string", k, 4, { x, 1, V, true }, "fast")
  end)

  it("devices: an unknown device, and CUDA without a driver", function()
    expect([[unknown device 'gpu' (expected "cpu" or "cuda:N")]], k, 4, { x, 1, V, true }, { device = "gpu" })
    if not weft.is_cuda_available() then
      local e = err_of(k, 4, { x, 1, V, true }, { device = "cuda:0" })
      assert.truthy(e:find("CUDA is not available", 1, true), e)
    end
  end)

  it("integer parameters name the value: not an integer, or out of range", function()
    expect("kernel 'k': parameter 'n' expects int32, got 1.5 (not an integer)", k, 4, { x, 1.5, V, true })
    expect("kernel 'k': parameter 'n' expects int32, got 1099511627776 (out of range for int32)",
           k, 4, { x, 2 ^ 40, V, true })
    expect("kernel 'k': parameter 'n' expects int32, got -2147483649 (out of range for int32)",
           k, 4, { x, -2 ^ 31 - 1, V, true })
    local u = weft.kernel{ n = weft.uint8, function(n) end }
    expect("kernel 'u': parameter 'n' expects uint8, got -1 (out of range for uint8)", u, 1, { -1 })
    expect("kernel 'u': parameter 'n' expects uint8, got 256 (out of range for uint8)", u, 1, { 256 })
    weft.launch(u, 1, { 255 })
    weft.launch(k, 1, { x, -2 ^ 31, V, true })
  end)

  -- A cpu array whose header claims cuda:0: enough to reach the device
  -- checks, which must refuse it before touching its memory. The header's
  -- device is put back before the array can be collected (its buffer
  -- knows where it lives).
  local function on_cuda0(a, fn)
    a.h.device = 0
    local ok, e = pcall(fn, a)
    a.h.device = -1
    assert.is_false(ok, "the launch should fail")
    return tostring(e)
  end

  it("an array on another device names the device", function()
    local e = on_cuda0(weft.zeros(4), function(a) weft.launch(k, 4, { a, 1, V, true }) end)
    assert.are.equal("spec/kernel_launch_errors_spec.lua:" .. (debug.getinfo(1, "l").currentline - 1)
      .. ": weft.launch: kernel 'k': input 'x' is on device cuda:0, but the launch runs on the cpu", e)
  end)

  it("adjoint and tangent launches follow their arrays' device, and refuse a mix", function()
    local sq = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
      function(x, y) local i = weft.tid(); y[i] = x[i] * x[i] end }
    local x, y, gy = weft.ones(4), weft.zeros(4), weft.ones(4)
    -- all on cuda:0: the CUDA path, which needs the driver (with a device,
    -- as under scripts/cuda-emu, there is nothing to refuse)
    local e
    if not weft.is_cuda_available() then
      e = on_cuda0(x, function(a)
        y.h.device, gy.h.device = 0, 0
        local ok, err = pcall(weft.launch, sq, 4, { a }, { adjoint = true, outputs = { y }, adj_outputs = { gy } })
        y.h.device, gy.h.device = -1, -1
        error(err, 0)
      end)
      assert.matches("device 'cuda:0': CUDA is not available", e, 1, true)
    end
    -- a mix: named, nothing runs
    e = on_cuda0(gy, function(a)
      weft.launch(sq, 4, { x }, { adjoint = true, outputs = { y }, adj_outputs = { a } })
    end)
    assert.matches("weft: adjoint launch of 'sq': 'adjoint of y' is on cuda:0, but 'x' is on cpu", e, 1, true)
    e = on_cuda0(x, function(a) weft.jvp(sq, 4, { a }, { weft.ones(4) }, { y }, { weft.zeros(4) }) end)
    assert.matches("weft: tangent launch of 'sq': 'tangent of x' is on cpu, but 'x' is on cuda:0", e, 1, true)
    -- opts.device = "cpu" with an array on cuda:0
    e = on_cuda0(x, function(a)
      weft.launch(sq, 4, { a }, { adjoint = true, device = "cpu", outputs = { y }, adj_outputs = { gy } })
    end)
    assert.matches("weft: adjoint launch of 'sq': 'x' is on cuda:0, but the launch runs on cpu", e, 1, true)
    -- a number for an array parameter is named, not indexed
    local ok, err = pcall(weft.launch, sq, 4, { 3 }, { adjoint = true, outputs = { y } })
    assert.is_false(ok)
    assert.matches("weft: adjoint launch of 'sq': 'x' expects " .. weft.array(weft.float32).name .. ", got number", err, 1, true)
    -- dims are checked as a forward launch checks them
    ok, err = pcall(weft.launch, sq, 1e300, { x }, { adjoint = true, outputs = { y } })
    assert.is_false(ok)
    assert.matches("weft.launch: kernel 'sq': dim must be a non-negative integer, got 1e+300", err, 1, true)
    ok, err = pcall(weft.jvp, sq, 1e300, { x }, { x }, { y }, { y })
    assert.is_false(ok)
    assert.matches("weft: tangent launch of 'sq': dim must be an integer in 0 .. 2^31-1, got 1e+300", err, 1, true)
    ok, err = pcall(weft.jvp, sq, { 2, 1.5 }, { x }, { x }, { y }, { y })
    assert.is_false(ok)
    assert.matches("weft: tangent launch of 'sq': dim[2] must be an integer in 0 .. 2^31-1, got 1.5", err, 1, true)
    -- an index far out of range (1e300 once wrapped around in the int64 compare)
    ok, err = pcall(function() return weft.zeros({ 2, 2 })[1e300] end)
    assert.is_false(ok)
    assert.matches("index 1e+300 out of bounds for dimension 0", err, 1, true)
    ok, err = pcall(weft.zeros, 1e300)
    assert.is_false(ok)
    assert.matches("weft.zeros: shape dimension 1 is 1e+300, too large", err, 1, true)
    -- and the cpu adjoint still runs afterwards
    local gx = weft.zeros(4)
    weft.launch(sq, 4, { weft.full(4, 3.0) }, { adjoint = true, outputs = { y }, adj_inputs = { gx },
                                               adj_outputs = { gy } })
    assert.are.same({ 6, 6, 6, 6 }, gx:totable())
  end)
end)

describe("dynamic component indices", function()
  local get = weft.kernel{ v = weft.array(weft.vec3d), o = weft.array(weft.float64), j = weft.int32,
    function(v, o, j)
      local i = weft.tid()
      o[i] = v[i][j] -- MARK-get
    end }
  local set = weft.kernel{ m = weft.array(weft.mat22), j = weft.int32, function(m, j)
    local i = weft.tid()
    local a = m[i]
    a[j] = weft.vec2(5, 6) -- MARK-set
    m[i] = a
  end }
  local line_of = dofile("spec/helpers/front.lua").line_finder("spec/kernel_launch_errors_spec.lua")
  after_each(function() weft.config.mode = "release" end)

  it("read and write the component in range in both modes", function()
    for _, mode in ipairs { "release", "debug" } do
      weft.config.mode = mode
      local o = weft.zeros(1, weft.float64)
      weft.launch(get, 1, { weft.array({ { 1, 2, 3 } }, weft.vec3d), o, 2 })
      assert.are.equal(3, o[0])
      local m = weft.zeros(1, weft.mat22)
      weft.launch(set, 1, { m, 1 })
      assert.are.same({ { { 0, 0 }, { 5, 6 } } }, m:totable())
    end
  end)

  it("out of range: debug mode stops at the Lua line, release mode reads component 0", function()
    weft.config.mode = "debug"
    for _, j in ipairs { 3, -1 } do
      local ok, err = pcall(weft.launch, get, 1,
        { weft.array({ { 1, 2, 3 } }, weft.vec3d), weft.zeros(1, weft.float64), j })
      assert.is_false(ok)
      assert.matches("spec/kernel_launch_errors_spec.lua:" .. line_of("MARK-get")
        .. ": component index out of range for vec3d (0..2)", err, 1, true)
    end
    local ok, err = pcall(weft.launch, set, 1, { weft.zeros(1, weft.mat22), 2 })
    assert.is_false(ok)
    assert.matches("spec/kernel_launch_errors_spec.lua:" .. line_of("MARK-set")
      .. ": index out of range for local 'a' of type mat22f (0..1)", err, 1, true)
    weft.config.mode = "release"
    local o = weft.zeros(1, weft.float64)
    weft.launch(get, 1, { weft.array({ { 1, 2, 3 } }, weft.vec3d), o, 7 })
    assert.are.equal(1, o[0])
  end)

  it("the check is a debug-only trap in the IR and in the CUDA source of a debug build", function()
    assert.matches('trap "component index out of range for vec3d (0..2)" debug', get:ir(), 1, true)
    assert.is_nil(get:source("cuda"):find("component index out of range", 1, true))
    local names = { "v", "o", "j" }
    local src = require("weft.internal").core.cuda_source(get:_module(), { debug = true, names = names })
    assert.matches("component index out of range for vec3d (0..2)", src, 1, true)
  end)
end)
