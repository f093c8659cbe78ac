-- tape:backward refuses a recorded launch whose adjoint needs the values
-- of an array that a later recorded launch overwrote, also when either
-- launch reaches the array through a struct argument (a wrong gradient
-- otherwise), and lets struct arguments through that nothing overwrote.
local weft = require "weft"

local f32 = weft.float32
local S = weft.struct{ { "x", weft.array(f32) }, { "y", weft.array(f32) }, { "s", f32 } }
local Outer = weft.struct{ { "inner", S }, { "k", f32 } }

local sq_s = weft.kernel{ p = S, out = weft.array(f32), function(p, out)
  local i = weft.tid()
  out[i] = p.x[i] * p.x[i]
end }
local sq_nested = weft.kernel{ o = Outer, out = weft.array(f32), function(o, out)
  local i = weft.tid()
  out[i] = o.inner.x[i] * o.inner.x[i]
end }
local sq = weft.kernel{ x = weft.array(f32), out = weft.array(f32), function(x, out)
  local i = weft.tid()
  out[i] = x[i] * x[i]
end }
local set = weft.kernel{ x = weft.array(f32), function(x)
  x[weft.tid()] = 7.0
end }
local set_x = weft.kernel{ p = S, function(p)
  p.x[weft.tid()] = 7.0
end }
local set_y = weft.kernel{ p = S, function(p)
  p.y[weft.tid()] = 7.0
end }
local read_s = weft.kernel{ p = S, out = weft.array(f32), function(p, out)
  local i = weft.tid()
  out[i] = p.x[i] + p.s
end }

local function arrays()
  return weft.array({ 1, 2, 3 }, f32, { requires_grad = true }), weft.zeros(3, f32, { requires_grad = true }),
         weft.zeros(3, f32, { requires_grad = true })
end

-- Records f(x, y, out), then runs backward from out; returns pcall's results.
local function backward(f)
  local x, y, out = arrays()
  local tape = weft.Tape()
  tape:record(function() f(x, y, out) end)
  local ok, err = pcall(tape.backward, tape, { grads = { [out] = weft.ones(3) } })
  return ok, tostring(err), x
end

describe("tape:backward and arrays inside struct arguments", function()
  it("refuses a struct-held read that a later launch overwrote", function()
    local ok, err = backward(function(x, y, out)
      weft.launch(sq_s, 3, { S{ x = x, y = y, s = 1 } }, { outputs = { out } })
      weft.launch(set, 3, {}, { outputs = { x } })
    end)
    assert.is_false(ok)
    assert.matches("tape_struct_overwrite_spec.lua:%d+: tape:backward: launch 1 %('sq_s'%) needs the values of "
                   .. "'p.x' for its gradient, but launch 2 %('set'%) overwrote that array afterwards", err)
  end)

  it("refuses a read that a later launch overwrote through a struct", function()
    local ok, err = backward(function(x, y, out)
      weft.launch(sq, 3, { x }, { outputs = { out } })
      weft.launch(set_x, 3, {}, { outputs = { S{ x = x, y = y, s = 1 } } })
    end)
    assert.is_false(ok)
    assert.matches("launch 1 %('sq'%) needs the values of 'x' for its gradient, but launch 2 %('set_x'%)", err)
  end)

  it("follows nested structs", function()
    local ok, err = backward(function(x, y, out)
      weft.launch(sq_nested, 3, { Outer{ inner = S{ x = x, y = y, s = 1 }, k = 2 } }, { outputs = { out } })
      weft.launch(set_x, 3, {}, { outputs = { S{ x = x, y = y, s = 1 } } })
    end)
    assert.is_false(ok)
    assert.matches("needs the values of 'o.inner.x' for its gradient, but launch 2 %('set_x'%)", err)
  end)

  it("lets through structs whose read arrays nothing overwrote", function()
    -- the later launch writes the other field's array
    local ok, err, x = backward(function(x, y, out)
      weft.launch(sq_s, 3, { S{ x = x, y = y, s = 1 } }, { outputs = { out } })
      weft.launch(set_y, 3, {}, { outputs = { S{ x = x, y = y, s = 1 } } })
    end)
    assert.is_true(ok, err)
    assert.same({ 2, 4, 6 }, x.grad:totable())
    -- a gradient that needs no value of x (out = x + s) may see x overwritten
    ok, err, x = backward(function(x2, y2, out)
      weft.launch(read_s, 3, { S{ x = x2, y = y2, s = 1 } }, { outputs = { out } })
      weft.launch(set, 3, {}, { outputs = { x2 } })
    end)
    assert.is_true(ok, err)
    assert.same({ 1, 1, 1 }, x.grad:totable())
  end)
end)
