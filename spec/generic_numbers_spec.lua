-- A number given for a generic parameter (lua/weft/launch.lua,
-- number_type) is a float of the type the launch's other float arguments
-- share, as a number literal in a kernel takes the type of the other
-- operand; float32 when they have none or do not agree. Forward, adjoint
-- and tangent launches type it alike.
local ffi = require "ffi"
local weft = require "weft"

-- a * x[i] + y[i], every parameter generic
local axpy = weft.kernel{ function(x, a, y)
  local i = weft.tid()
  y[i] = a * x[i] + y[i]
end }
local AXPY_LINE = 12

local f32 = function(v) return tonumber(ffi.new("float", v)) end

describe("a number given for a generic parameter", function()
  it("is float64 beside float64 arrays: no float32 rounding", function()
    local x = weft.array({ 1, 3, -7 }, weft.float64)
    local y = weft.array({ 0.5, 0, 2 }, weft.float64)
    weft.launch(axpy, 3, { x, 0.1 }, { outputs = { y } })
    -- exactly the double results (0.1 as a float32 would differ by 1e-9)
    assert.are.same({ 0.1 * 1 + 0.5, 0.1 * 3, 0.1 * -7 + 2 }, y:totable())
  end)

  it("is float32 beside float32 arrays, and float16 beside float16", function()
    local x, y = weft.array({ 1, 3 }, weft.float32), weft.zeros(2, weft.float32)
    weft.launch(axpy, 2, { x, 0.1 }, { outputs = { y } })
    assert.are.same({ f32(0.1), f32(f32(0.1) * 3) }, y:totable())
    local xh, yh = weft.array({ 1, 3 }, weft.float16), weft.zeros(2, weft.float16)
    weft.launch(axpy, 2, { xh, 0.1 }, { outputs = { yh } })
    -- 0.1 as a float16 is 0.0999755859375; times 3 rounds (to even) in float16
    assert.are.same({ 0.0999755859375, 0.2998046875 }, yh:totable())
  end)

  it("takes the scalar type of vector arrays", function()
    local v = weft.array({ { 1, 2, 3 } }, weft.vec3d)
    local w = weft.zeros(1, weft.vec3d)
    weft.launch(axpy, 1, { v, 0.1 }, { outputs = { w } })
    assert.are.same({ { 0.1, 0.2, 0.1 * 3 } }, w:totable())
  end)

  it("keeps one compiled variant per argument types", function()
    local k = weft.kernel{ function(x, a, y)
      local i = weft.tid()
      y[i] = x[i] * a
    end }
    local xd, yd = weft.array({ 3 }, weft.float64), weft.zeros(1, weft.float64)
    local xf, yf = weft.array({ 3 }, weft.float32), weft.zeros(1, weft.float32)
    for _ = 1, 3 do
      weft.launch(k, 1, { xd, 0.1, yd })
      weft.launch(k, 1, { xf, 0.1, yf })
    end
    assert.are.equal(0.1 * 3, yd[0])
    assert.are.equal(f32(f32(0.1) * 3), yf[0])
    assert.equal(2, weft.stats(k).compiles + weft.stats(k).disk_hits)
  end)

  it("is float32 where the float arguments disagree, an error at the kernel's line", function()
    local x = weft.array({ 1 }, weft.float64)
    local y = weft.zeros(1, weft.float32)
    local ok, err = pcall(weft.launch, axpy, 1, { x, 2.5 }, { outputs = { y } })
    assert.is_false(ok)
    assert.matches("generic_numbers_spec.lua:" .. AXPY_LINE .. ": cannot multiply float32 and float64",
                   err, 1, true)
  end)

  it("has the same type in the tape's adjoint and in weft.jvp", function()
    local x = weft.array({ 1, 3 }, weft.float64, { requires_grad = true })
    local y = weft.zeros(2, weft.float64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(axpy, 2, { x, 0.1 }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.array({ 1, 2 }, weft.float64) } }
    assert.are.same({ 0.1, 0.2 }, x.grad:totable()) -- d y / d x = a, in float64
    local ty = weft.zeros(2, weft.float64)
    weft.jvp(axpy, 2, { x, 0.1 }, { weft.array({ 1, -3 }, weft.float64), false }, { weft.zeros(2, weft.float64) },
             { ty })
    assert.are.same({ 0.1, 0.1 * -3 }, ty:totable())
  end)
end)
