-- weft.Tape, adjoint launches, Jacobians and the gradient check helper.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local f32, f64 = weft.float32, weft.float64
local A = weft.array

local function arr(t, dt) return weft.array(t, dt or f64, { requires_grad = true }) end

local function near(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-9) * math.max(1, math.abs(b))
end

local function assert_list(got, want, tol)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(near(got[i], want[i], tol), string.format("item %d: got %.12g, want %.12g", i, got[i], want[i]))
  end
end

-- y[i] = x[i]^2 * s[i]
local square = weft.kernel{ x = A(f64), s = A(f64), y = A(f64), function(x, s, y)
  local i = weft.tid()
  y[i] = x[i] * x[i] * s[i]
end }

-- loss += y[i] (every thread adds into element 0)
local sum = weft.kernel{ y = A(f64), loss = A(f64), function(y, loss)
  local i = weft.tid()
  weft.atomic_add(loss, 0, y[i])
end }

describe("weft.Tape", function()
  it("backward(loss) through chained kernels", function()
    local x, s = arr { 1, 2, 3 }, weft.array({ 0.5, 1, 2 }, f64)
    local y, loss = arr { 0, 0, 0 }, arr { 0 }
    local tape = weft.Tape()
    tape:record(function()
      weft.launch(square, 3, { x, s }, { outputs = { y } })
      weft.launch(sum, 3, { y }, { outputs = { loss } })
    end)
    assert_list(loss:totable(), { 1 * 0.5 + 4 + 18 })
    tape:backward(loss)
    assert_list(x.grad:totable(), { 2 * 1 * 0.5, 2 * 2 * 1, 2 * 3 * 2 })
    -- square overwrote y: the gradient of y's old values is 0 (as in Warp)
    assert_list(y.grad:totable(), { 0, 0, 0 })
    assert_list(loss.grad:totable(), { 1 })
    assert.is_nil(s.grad) -- no requires_grad: no gradient
    assert.are.equal(x.grad, tape.gradients[x])
    -- gradients accumulate until zeroed (each backward adds its gradient once)
    tape:backward(loss)
    assert_list(x.grad:totable(), { 2, 8, 24 })
    tape:zero()
    assert_list(x.grad:totable(), { 0, 0, 0 })
    assert_list(loss.grad:totable(), { 0 })
    tape:backward(loss)
    assert_list(x.grad:totable(), { 1, 4, 12 })
    tape:reset()
    assert.are.equal(0, #tape.launches)
    assert_list(x.grad:totable(), { 0, 0, 0 })
  end)

  it("backward{grads = ...} seeds outputs (Jacobian rows)", function()
    local x, s = arr { 1, 2, 3 }, weft.array({ 1, 1, 1 }, f64)
    local y = arr { 0, 0, 0 }
    local tape = weft.Tape()
    tape:record(function() weft.launch(square, 3, { x, s }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.array({ 0, 1, 0 }, f64) } }
    assert_list(x.grad:totable(), { 0, 4, 0 })
  end)

  it("records only inside record(); errors propagate and stop recording", function()
    local x, s, y = arr { 1 }, weft.array({ 1 }, f64), arr { 0 }
    local tape = weft.Tape()
    weft.launch(square, 1, { x, s }, { outputs = { y } })
    assert.are.equal(0, #tape.launches)
    local ok, err = pcall(tape.record, tape, function()
      weft.launch(square, 1, { x, s }, { outputs = { y } })
      error("boom")
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("boom", 1, true))
    assert.are.equal(1, #tape.launches)
    assert.is_nil(internal.tape_active)
    weft.launch(square, 1, { x, s }, { outputs = { y } })
    assert.are.equal(1, #tape.launches)
  end)

  it("float32 arrays", function()
    local k = weft.kernel{ x = A(f32), y = A(f32), function(x, y)
      local i = weft.tid()
      y[i] = weft.sin(x[i]) * 2.0
    end }
    local x, y = arr({ 0.5, 1.0 }, f32), arr({ 0, 0 }, f32)
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.array({ 1, 1 }, f32) } }
    assert_list(x.grad:totable(), { 2 * math.cos(0.5), 2 * math.cos(1.0) }, 1e-6)
  end)
end)

describe("adjoint launches", function()
  it("internal.launch_adjoint with explicit adjoint arrays", function()
    local x, s, y = weft.array({ 1, 2 }, f64), weft.array({ 3, 4 }, f64), weft.zeros(2, f64)
    local gx, gs, gy = weft.zeros(2, f64), weft.zeros(2, f64), weft.array({ 1, 10 }, f64)
    weft.launch(square, 2, { x, s }, { outputs = { y } })
    internal.launch_adjoint(square, 2, { x, s }, { y }, { gx, gs }, { gy })
    assert_list(gx:totable(), { 2 * 1 * 3, 10 * 2 * 2 * 4 })
    assert_list(gs:totable(), { 1, 10 * 4 })
    -- the kernel overwrote y: its adjoint now holds the gradient of y's old
    -- values, 0 (Warp keeps such buffers when they are not the tape's)
    assert_list(gy:totable(), { 0, 0 })
    -- a missing adjoint is skipped
    gx:zero_()
    weft.copy(gy, weft.array({ 1, 10 }, f64))
    internal.launch_adjoint(square, 2, { x, s }, { y }, { gx, false }, { gy })
    assert_list(gx:totable(), { 6, 160 })
    assert.has_error(function() internal.launch_adjoint(square, 2, { x, s }, { y }, { weft.zeros(3, f64) }, {}) end)
  end)

  it("the adjoint kernel sits in the kernel's module", function()
    local m = square:_module()
    local name = internal.core.adjoint(m)
    assert.are.equal("adj_square", name)
    local ir = internal.core.ir(m)
    assert.truthy(ir:find("kernel @adj_square", 1, true))
    assert.truthy(ir:find("atomic_add", 1, true))
  end)
end)

describe("Jacobians and gradient checks", function()
  -- y = A x for a fixed 2x3 matrix: the Jacobian is A
  local mat = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
    local i = weft.tid()
    local r = weft.float64(0)
    for j = 0, 2 do r = r + weft.float64(i * 3 + j + 1) * x[j] end
    y[i] = r
  end }

  it("weft.jacobian and weft.jacobian_fd", function()
    local x, y = weft.array({ 0.5, -1, 2 }, f64), weft.zeros(2, f64)
    local J = weft.jacobian(mat, 2, { x }, { y }):totable()
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, J)
    local F = weft.jacobian_fd(mat, 2, { x }, { y }):totable()
    for i = 1, 2 do assert_list(F[i], J[i], 1e-7) end
    assert_list(x:totable(), { 0.5, -1, 2 }) -- inputs restored
    assert_list(y:totable(), { 0, 0 })       -- outputs restored
  end)

  it("check_grad agrees on a correct kernel and flags a wrong gradient", function()
    local ok, err = weft.check_grad(square, 3, { weft.array({ 1, 2, 3 }, f64), weft.array({ 1, 2, 3 }, f64) },
                                    { weft.zeros(3, f64) })
    assert.is_true(ok)
    assert(err < 1e-6)
    -- overwriting an input after reading it would break the replay (Warp
    -- gives a wrong gradient): building the adjoint is an error
    local bad = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = x[i]
      x[i] = v * 2.0
      y[i] = x[i] * v
    end }
    local ok2, err2 = pcall(weft.check_grad, bad, 2, { weft.array({ 1, 2 }, f64) },
                            { weft.zeros(2, f64) })
    assert.is_false(ok2)
    assert.matches("ad_tape_spec.lua:%d+: autodiff: kernel 'bad' overwrites an element of array "
                   .. "'x' that it read earlier", err2)
  end)
end)
