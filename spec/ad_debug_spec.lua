-- A kernel that writes an array element it read earlier, when the adjoint
-- needs the value read (the replay would see the new one), cannot be
-- differentiated: building its adjoint is an error naming the write's line,
-- the array and the line of the read, in debug and release mode alike.
-- Reads whose value the adjoint does not need (linear updates) are fine:
-- the store clears the element's adjoint (see spec/ad_overwrite_spec.lua).
local weft = require "weft"

local f64, i32 = weft.float64, weft.int32
local A = weft.array

local function arr(t, opts) return weft.array(t, f64, opts) end

-- Forward launch on a tape, then backward from y (seed ones), in `mode`;
-- more outputs may follow y.
local function backward(mode, k, ins, y, ...)
  local prev = weft.config.mode
  weft.config.mode = mode
  local outs = { y, ... }
  local ok, err = pcall(function()
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, #y, ins, { outputs = outs }) end)
    tape:backward{ grads = { [y] = weft.ones(#y, f64) } }
  end)
  weft.config.mode = prev
  return ok, err
end

describe("autodiff: overwriting what was read", function()
  it("x[i] = f(x[i]) is an error with both lines", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = x[i]
      y[i] = v * v
      x[i] = v * 2.0
    end }
    local ok, err = backward("debug", k, { arr({ 1, 2, 3 }, { requires_grad = true }) },
                             weft.zeros(3, f64, { requires_grad = true }))
    assert.is_false(ok)
    assert.are.equal("spec/ad_debug_spec.lua:35: autodiff: kernel 'k' overwrites an element of array "
                     .. "'x' that it read earlier at line 33; the adjoint would replay the new value, "
                     .. "so gradients would be wrong (write the result to another array)", err)
  end)

  it("release mode checks too (Warp gives a wrong gradient here)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = x[i]
      y[i] = v * v
      x[i] = v * 2.0
    end }
    local x = arr({ 1, 2, 3 }, { requires_grad = true })
    local ok, err = backward("release", k, { x }, weft.zeros(3, f64, { requires_grad = true }))
    assert.is_false(ok)
    assert.matches("spec/ad_debug_spec.lua:50: autodiff: kernel 'k' overwrites an element of "
                   .. "array 'x' that it read earlier at line 48;", err, 1, true)
  end)

  it("a 2-D element read through views and written back", function()
    local k = weft.kernel{ m = A(f64, 2), y = A(f64), function(m, y)
      local i = weft.tid()
      local row = m[i]
      local s = row[1] * row[1]
      y[i] = s
      m[i][1] = s
    end }
    local m = weft.array({ { 1, 2 }, { 3, 4 } }, f64, { requires_grad = true })
    local ok, err = backward("debug", k, { m }, weft.zeros(2, f64, { requires_grad = true }))
    assert.is_false(ok)
    assert.matches("spec/ad_debug_spec.lua:65: autodiff: kernel 'k' overwrites an element of array "
                   .. "'m' that it read earlier at line 63;", err, 1, true)
  end)

  it("a linear update of an element read before is differentiated", function()
    local k = weft.kernel{ m = A(f64, 2), y = A(f64), function(m, y)
      local i = weft.tid()
      local row = m[i]
      local s = row[1] * 3.0
      y[i] = s
      m[i][1] = s
    end }
    local m = weft.array({ { 1, 2 }, { 3, 4 } }, f64, { requires_grad = true })
    local ok, err = backward("debug", k, { m }, weft.zeros(2, f64, { requires_grad = true }))
    assert(ok, err)
    -- y = 3 m[i][1] (the old value); m's new values were given no gradient
    assert.are.same({ { 0, 3 }, { 0, 3 } }, m.grad:totable())
  end)

  it("atomic_add to an element read before, in a loop", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for j = 0, 1 do
        local v = x[i]
        weft.atomic_add(x, i, v * v)
        y[i] = v
      end
    end }
    local ok, err = backward("debug", k, { arr({ 1, 2 }, { requires_grad = true }) },
                             weft.zeros(2, f64, { requires_grad = true }))
    assert.is_false(ok)
    assert.matches("spec/ad_debug_spec.lua:94: autodiff: kernel 'k' atomically updates an element "
                   .. "of array 'x' that it read earlier at line 93;", err, 1, true)
    -- linear in what was read: x1 = 1.5 x0, y = x1
    local k2 = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for j = 0, 1 do
        local v = x[i]
        weft.atomic_add(x, i, v * 0.5)
        y[i] = v
      end
    end }
    local x = arr({ 1, 2 }, { requires_grad = true })
    ok, err = backward("debug", k2, { x }, weft.zeros(2, f64, { requires_grad = true }))
    assert(ok, err)
    assert.are.same({ 1.5, 1.5 }, x.grad:totable())
  end)

  it("accepts writes to other arrays, writes before reads, integer counters",
     function()
    local k = weft.kernel{ x = A(f64), c = A(i32), y = A(f64), z = A(f64), function(x, c, y, z)
      local i = weft.tid()
      z[i] = 2.0
      local w = z[i]              -- read after the write: the replay sees the same value
      y[i] = x[i] * x[i] * w
      c[i] = c[i] + 1             -- integers carry no gradient
    end }
    local x = arr({ 1.5, 2.5 }, { requires_grad = true })
    local ok, err = backward("debug", k, { x, weft.zeros(2, i32) },
                             weft.zeros(2, f64, { requires_grad = true }), weft.zeros(2, f64))
    assert(ok, err)
    assert.are.same({ 2 * 1.5 * 2, 2 * 2.5 * 2 }, x.grad:totable())
  end)
end)
