-- Custom gradients and replay functions of weft.func (f:grad, f:replay).
-- The reverse-mode side is tested on IR text in tests/c/test_ad.c; these
-- specs run end to end when the kernel compiler supports them
-- (core.front_custom_grad), and otherwise check the clear error.
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local f64 = weft.float64
local A = weft.array

local function arr(t, opts) return weft.array(t, f64, opts) end

local supported = internal.core and internal.core.front_custom_grad

describe("weft.func custom gradients", function()
  if not supported then
    it("say clearly that the kernel compiler does not support them yet", function()
      local f = weft.func(function(v) return v * v end)
      assert.has_error(function() f:grad(function(v, adj) return 2.0 * v * adj end) end,
                       "weft.func:grad: custom gradients need the kernel compiler's support, "
                       .. "which this build lacks")
      assert.has_error(function() f:replay(function(v) return v * v end) end,
                       "weft.func:replay: custom gradients need the kernel compiler's support, "
                       .. "which this build lacks")
    end)
    return
  end

  it("f:grad replaces the derivative of f's body in reverse mode only", function()
    local sq = weft.func(function(v) return v * v end)
    -- deliberately not the derivative, so that the test sees which is used
    sq:grad(function(v, adj) return 10.0 * adj end)
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = sq(x[i]) + x[i]
    end }
    local x = arr({ 0.5, -1, 2 }, { requires_grad = true })
    local y = weft.zeros(3, f64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { x }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = arr { 1, 2, 3 } } }
    assert.are.same({ 0.75, 0, 6 }, y:totable())
    assert.are.same({ 11, 22, 33 }, x.grad:totable())
    -- forward mode differentiates the body: 2 x + 1
    local ty = weft.zeros(3, f64)
    weft.jvp(k, 3, { x }, { arr { 1, 1, 1 } }, { weft.zeros(3, f64) }, { ty })
    assert.are.same({ 2, -1, 5 }, ty:totable())
  end)

  it("a true custom gradient inside a loop matches central differences", function()
    local cube = weft.func(function(v) return v * v * v end)
    cube:grad(function(v, adj) return 3.0 * v * v * adj end)
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = x[i]
      for _ = 1, 3 do s = cube(s) * 0.9 + weft.sin(s) end
      y[i] = s
    end }
    local ok, err, where = weft.check_grad(k, 4, { arr { 0.1, 0.3, 0.5, 0.7 } }, { weft.zeros(4, f64) })
    assert(ok, tostring(where) .. " " .. tostring(err))
  end)

  it("f:replay replaces f in the adjoint's replay (side effects are not redone)", function()
    local put = weft.func(function(z, i, v)
      weft.atomic_add(z, i, 1.0)
      return v * v
    end)
    put:grad(function(z, i, v, adj) return 2.0 * v * adj end)
    put:replay(function(z, i, v) return v * v end)
    local k = weft.kernel{ x = A(f64), z = A(f64), y = A(f64), function(x, z, y)
      local i = weft.tid()
      local r = put(z, i, x[i])
      y[i] = r * r
    end }
    local x = arr({ 0.5, -1, 2 }, { requires_grad = true })
    local z = weft.zeros(3, f64)
    local y = weft.zeros(3, f64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 3, { x, z }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = arr { 1, 1, 1 } } }
    assert.are.same({ 1, 1, 1 }, z:totable())
    assert.are.same({ 0.5, -4, 32 }, x.grad:totable()) -- 4 x^3
  end)

  it("a side-effecting f with a custom gradient and no replay is an error", function()
    local put = weft.func(function(z, i, v)
      weft.atomic_add(z, i, 1.0)
      return v * v
    end)
    put:grad(function(z, i, v, adj) return 2.0 * v * adj end)
    local k = weft.kernel{ x = A(f64), z = A(f64), y = A(f64), function(x, z, y)
      local i = weft.tid()
      local r = put(z, i, x[i])
      y[i] = r * r
    end }
    local x = arr({ 0.5 }, { requires_grad = true })
    local y = weft.zeros(1, f64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 1, { x, weft.zeros(1, f64) }, { outputs = { y } }) end)
    assert.has_error(function() tape:backward{ grads = { [y] = arr { 1 } } } end)
    local ok, err = pcall(function() tape:backward{ grads = { [y] = arr { 1 } } } end)
    assert.is_false(ok)
    assert.matches("ad_custom_spec.lua:92: autodiff: weft.func 'put' has a custom gradient and "
                   .. "side effects", err, 1, true)
  end)
end)
