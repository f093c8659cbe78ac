-- Structs that hold arrays (weft issue 12, "Language"): Warp's Model/State
-- pattern. A struct field of an array type holds the array's kernel header
-- (data, shape, strides) by value; on the host the struct keeps the array
-- alive and gives it back; in kernels s.x[i], s.x.shape[0], #s.x and
-- nested m.state.x[i] read and write it; weft.func takes such structs; on
-- the tape, the arrays inside get their gradients.
local weft, internal = require "weft", require "weft.internal"

local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil

local State = weft.struct{
  { "x", weft.array(weft.vec3) }, { "v", weft.array(weft.vec3) }, { "n", weft.int32 },
  name = "State",
}
local Model = weft.struct{
  { "state", State }, { "dt", weft.float32 }, { "mass", weft.array(weft.float32) },
  name = "Model",
}

local step = weft.func(function(s, i, dt) s.x[i] = s.x[i] + s.v[i] * dt end)

local integrate = weft.kernel{ s = State, dt = weft.float32, function(s, dt)
  local i = weft.tid()
  step(s, i, dt)
end }

local gather = weft.kernel{ m = Model, out = weft.array(weft.float32), function(m, out)
  local i = weft.tid()
  out[i] = m.state.x[i].y * m.mass[i] + weft.float32(m.state.x.shape[0]) + weft.float32(#m.mass)
    + weft.float32(m.state.n)
end }

local function new_state(n)
  return State{ x = weft.zeros(n, weft.vec3), v = weft.full(n, weft.vec3(1, 2, 3)), n = n }
end

describe("structs holding arrays", function()
  it("hand their arrays to kernels and weft.func, which write through them", function()
    local s = new_state(4)
    weft.launch(integrate, 4, { s, 0.5 })
    for i = 0, 3 do
      assert.same({ 0.5, 1, 1.5 }, s.x[i]:totable())
    end
    assert.same({ 1, 2, 3 }, s.v[2]:totable())
  end)

  it("nest: m.state.x[i], shapes, #, and scalar fields beside them", function()
    local s = new_state(4)
    weft.launch(integrate, 4, { s, 1.0 })
    local m = Model{ state = s, dt = 0.25, mass = weft.full(4, 3.0) }
    local out = weft.zeros(4)
    weft.launch(gather, 4, { m, out })
    -- 2 * 3 + 4 + 4 + 4
    assert.same({ 18, 18, 18, 18 }, out:totable())
  end)

  it("build inside kernels from array parameters", function()
    local k = weft.kernel{ x = weft.array(weft.vec3), v = weft.array(weft.vec3), function(x, v)
      local i = weft.tid()
      local s = State{ x = x, v = v, n = 2 }
      step(s, i, 2.0)
    end }
    local x, v = weft.zeros(2, weft.vec3), weft.full(2, weft.vec3(1, 0, -1))
    weft.launch(k, 2, { x, v })
    assert.same({ { 2, 0, -2 }, { 2, 0, -2 } }, x:totable())
  end)

  it("alias parameters safely: the same array inside the struct and beside it", function()
    local S = weft.struct{ { "a", weft.array(weft.float32) }, { "b", weft.array(weft.float32) },
                           name = "SAlias" }
    local k = weft.kernel{ s = S, y = weft.array(weft.float32), function(s, y)
      local i = weft.tid()
      y[i] = s.a[i] + s.b[i] + y[i]
    end }
    local n = 1000
    local x = weft.full(n, 1.0)
    -- all three the same array: each element read before it is written
    weft.launch(k, n, { S{ a = x, b = x }, x })
    for _, v in ipairs(x:totable()) do assert.equal(3, v) end
    local a, b, y = weft.full(n, 1.0), weft.full(n, 2.0), weft.full(n, 4.0)
    weft.launch(k, n, { S{ a = a, b = b }, y })
    for _, v in ipairs(y:totable()) do assert.equal(7, v) end
  end)

  it("give their arrays back on the host and keep them alive", function()
    local s = new_state(3)
    local x = s.x
    assert.is_true(weft.is_array(x))
    assert.equal(3, x.size)
    local m = Model{ state = s }
    m.mass = weft.ones(3)
    assert.equal(x, m.state.x)
    s = nil -- luacheck: ignore
    x = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    -- the model holds copies of the state's slots and keeps their arrays
    local y = weft.zeros(3)
    assert.equal(3, m.state.x.size)
    assert.same({ 1, 2, 3 }, m.state.v[1]:totable())
    weft.launch(gather, 3, { m, y })
    assert.same({ 9, 9, 9 }, y:totable())
    -- a copy keeps them too, and clearing a field leaves nil
    local m2 = Model(m)
    m.state = State{ n = 1 }
    assert.is_nil(m.state.x)
    assert.equal(3, m2.state.x.size)
    m2.mass = nil
    assert.is_nil(m2.mass)
  end)

  it("refuse arrays of another type, and arrays of themselves", function()
    local s = new_state(2)
    assert.has_error(function() s.x = weft.zeros(3) end,
      "weft.State: field 'x' expects array(vec3f), got array(float32)")
    assert.has_error(function() s.x = 5 end, "weft.State: field 'x' expects array(vec3f), got a number")
    assert.has_error(function() weft.zeros(3, State) end,
      "weft.zeros: dtype State holds arrays; arrays of it are not supported")
    assert.has_error(function() weft.array(State) end,
      "weft.array: State holds arrays; arrays of it are not supported (pass the struct itself)")
  end)

  it("bounds-check their arrays in release mode, naming the field", function()
    assert.equal("release", weft.config.mode)
    local k = weft.kernel{ m = Model, function(m)
      local i = weft.tid()
      m.mass[i + 1] = 1.0
    end }
    local md = Model{ state = new_state(2), mass = weft.zeros(2) }
    local ok, err = pcall(weft.launch, k, 2, { md })
    assert.is_false(ok)
    assert.matches("struct_arrays_spec.lua:%d+: index 2 out of bounds for axis 0 with size 2 in "
      .. "array 'm.mass' of kernel 'k'", err)
    -- an unset field has no elements: indexing it fails the same way
    local k2 = weft.kernel{ m = Model, function(m) m.state.x[weft.tid()] = weft.vec3() end }
    ok, err = pcall(weft.launch, k2, 1, { Model{} })
    assert.is_false(ok)
    assert.matches("index 0 out of bounds for axis 0 with size 0 in array 'm.state.x'", err, 1, true)
  end)

  it("get gradients on the tape, matching finite differences", function()
    local S = weft.struct{ { "x", weft.array(weft.float32) }, { "w", weft.float32 }, name = "SG" }
    local M = weft.struct{ { "s", S }, { "y", weft.array(weft.float32) }, name = "MG" }
    local k = weft.kernel{ m = M, loss = weft.array(weft.float32), function(m, loss)
      local i = weft.tid()
      weft.atomic_add(loss, 0, weft.sin(m.s.x[i]) * m.y[i] * m.s.w)
    end }
    local xs, ys = { 0.3, -1.2, 2.0 }, { 1.5, 0.25, -2.0 }
    local x = weft.array(xs, weft.float32, { requires_grad = true })
    local y = weft.array(ys, weft.float32, { requires_grad = true })
    local m = M{ s = S{ x = x, w = 2 }, y = y }
    local loss = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { m }, { outputs = { loss } }) end)
    tape:backward(loss)
    local function f(xv, yv)
      local acc = 0
      for i = 1, 3 do acc = acc + math.sin(xv[i]) * yv[i] * 2 end
      return acc
    end
    local h = 1e-3
    for i = 1, 3 do
      local xp, xm = { unpack(xs) }, { unpack(xs) }
      xp[i], xm[i] = xs[i] + h, xs[i] - h
      assert.near((f(xp, ys) - f(xm, ys)) / (2 * h), x.grad[i - 1], 1e-3)
      local yp, ym = { unpack(ys) }, { unpack(ys) }
      yp[i], ym[i] = ys[i] + h, ys[i] - h
      assert.near((f(xs, yp) - f(xs, ym)) / (2 * h), y.grad[i - 1], 1e-3)
    end
    -- tape:zero reaches the arrays inside the struct
    tape:zero()
    assert.same({ 0, 0, 0 }, x.grad:totable())
    assert.same({ 0, 0, 0 }, y.grad:totable())
  end)

  it("leave arrays without gradients alone on the tape", function()
    local S = weft.struct{ { "a", weft.array(weft.float32) }, { "b", weft.array(weft.float32) },
                           name = "SG2" }
    local k = weft.kernel{ s = S, loss = weft.array(weft.float32), function(s, loss)
      local i = weft.tid()
      weft.atomic_add(loss, 0, s.a[i] * s.b[i])
    end }
    local a = weft.array({ 1, 2 }, weft.float32, { requires_grad = true })
    local b = weft.array({ 3, 4 }, weft.float32)
    local loss = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { S{ a = a, b = b } }, { outputs = { loss } }) end)
    tape:backward(loss)
    assert.same({ 3, 4 }, a.grad:totable())
    assert.is_nil(b.grad)
  end)

  it("compile to CUDA C (forward and adjoint) that NVRTC and ptxas accept", function()
    if not have_nvrtc then return pending("NVRTC not found") end
    for _, k in ipairs { integrate, gather } do
      local src = core.cuda_source(k:_module(), { checks = true, names = internal.param_names(k) })
      assert.matches("wf_arr f0;", src, 1, true)
      for _, checks in ipairs { true, false } do
        local ptx = core.cuda_ptx(k:_module(), "compute_80",
                                  { checks = checks, names = internal.param_names(k) })
        assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
      end
      assert.matches("weft_adj_", (k:ptx("sm_80")))
    end
  end)
end)

describe("structs holding arrays in forward mode", function()
  it("carry tangent arrays in a struct of the same type", function()
    local S = weft.struct{ { "x", weft.array(weft.float32) }, { "w", weft.float32 }, name = "SJ" }
    local k = weft.kernel{ s = S, y = weft.array(weft.float32), function(s, y)
      local i = weft.tid()
      y[i] = s.x[i] * s.x[i] * s.w
    end }
    local x, tx = weft.array({ 1, 2, 3 }, weft.float32), weft.array({ 1, 0, 2 }, weft.float32)
    local y, ty = weft.zeros(3), weft.zeros(3)
    weft.jvp(k, 3, { S{ x = x, w = 2 } }, { S{ x = tx } }, { y }, { ty })
    assert.same({ 2, 8, 18 }, y:totable())
    assert.same({ 4, 0, 24 }, ty:totable()) -- 2 x w tx
  end)
end)

-- On a CUDA device (the emulated one under scripts/cuda-emu): the struct
-- goes by value with its arrays' headers, adjoints too.
describe("structs holding arrays on cuda:0", function()
  if require("helpers.cuda").missing() then return end
  local S = weft.struct{ { "x", weft.array(weft.float32) }, { "w", weft.float32 }, name = "SC" }
  local M = weft.struct{ { "s", S }, { "y", weft.array(weft.float32) }, name = "MC" }
  local k = weft.kernel{ m = M, loss = weft.array(weft.float32), function(m, loss)
    local i = weft.tid()
    m.y[i] = m.s.x[i] * m.s.w
    weft.atomic_add(loss, 0, m.s.x[i] * m.s.x[i] * m.s.w)
  end }

  it("launch, take gradients, and refuse arrays on another device", function()
    local dev = { device = "cuda:0", requires_grad = true }
    local x = weft.array({ 1, 2, 3 }, weft.float32, dev)
    local y = weft.zeros(3, weft.float32, dev)
    local loss = weft.zeros(1, weft.float32, dev)
    local m = M{ s = S{ x = x, w = 2 }, y = y }
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { m }, { outputs = { loss }, device = "cuda:0" }) end)
    assert.same({ 2, 4, 6 }, y:to("cpu"):totable())
    assert.same({ 28 }, loss:to("cpu"):totable())
    tape:backward(loss)
    assert.same({ 4, 8, 12 }, x.grad:to("cpu"):totable())
    local on_cpu = M{ s = S{ x = weft.zeros(3) }, y = weft.zeros(3, weft.float32, { device = "cuda:0" }) }
    local ok, err = pcall(weft.launch, k, 3, { on_cpu }, { outputs = { loss }, device = "cuda:0" })
    assert.is_false(ok)
    assert.matches("weft.launch: kernel 'k': input 'm': field 's.x' is on device cpu, but the "
      .. "launch runs on cuda:0", err, 1, true)
  end)
end)
