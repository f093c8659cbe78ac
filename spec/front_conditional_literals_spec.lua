-- Front end: conditionals of literals (c and 1 or 0) take the type of their context.
local weft = require "weft"

local A = weft.array
local i32, f32, f64 = weft.int32, weft.float32, weft.float64

local H = dofile("spec/helpers/front.lua")
local f32of, compile_error = H.f32of, H.compile_error
local line_of = H.line_finder("spec/front_conditional_literals_spec.lua") -- the line holding a marker

describe("conditional literals (c and x or y)", function()
  local xs = { 3, -1.5, 0, 0.7 }

  it("store exactly into a float64 array", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = (x[i] > 0) and 1 or 0
    end }
    local y = weft.full(#xs, -7, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    assert.are.same({ 1, 0, 0, 1 }, y:totable())
    -- no int32 select and no conversion: float64 constants
    local ir = k:ir()
    assert.is_nil(ir:find("i32 = select", 1, true))
    assert.is_nil(ir:find("cast", 1, true))
    assert.truthy(ir:find("f64 = select", 1, true))
  end)

  it("keep float64 precision through a local and arithmetic", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.1 or 0.2
      y[i] = s * x[i]
      z[i] = x[i] * ((x[i] > 0) and 0.1 or 0.2) + 1
    end }
    local y, z = weft.zeros(#xs, f64), weft.zeros(#xs, f64)
    weft.launch(k, #xs, { A(xs, f64), y, z })
    for j, x in ipairs(xs) do
      local s = (x > 0) and 0.1 or 0.2
      assert.are.equal(s * x, y[j - 1]) -- exact: 0.1 as a double
      assert.are.equal(x * s + 1, z[j - 1])
    end
  end)

  it("adapt to float32, int32 and uint8 stores", function()
    local k = weft.kernel{ x = A(f64), a = A(f32), b = A(i32), c = A(weft.uint8),
                           function(x, a, b, c)
      local i = weft.tid()
      local w = (x[i] > 0) and 3 or -2
      a[i] = (x[i] > 0) and 0.1 or 0.2
      b[i] = w
      c[i] = (x[i] > 0) and 200 or 7
    end }
    local a, b, c = weft.zeros(#xs, f32), weft.zeros(#xs, i32), weft.zeros(#xs, weft.uint8)
    weft.launch(k, #xs, { A(xs, f64), a, b, c })
    for j, x in ipairs(xs) do
      assert.are.equal(f32of((x > 0) and 0.1 or 0.2), a[j - 1])
      assert.are.equal((x > 0) and 3 or -2, b[j - 1])
      assert.are.equal((x > 0) and 200 or 7, c[j - 1])
    end
  end)

  it("fold arithmetic, negation and comparisons with literals leaf by leaf", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local c = x[i] > 0
      local w = (c and 1 or 2) * 0.1
      y[i * 4] = w
      y[i * 4 + 1] = -(c and 0.3 or 0.7) + 0.05
      local v = c and 0.1 or 0.2
      y[i * 4 + 2] = (v == 0.1) and 1 or 0
      y[i * 4 + 3] = 1 / (c and 3 or 7)
    end }
    local y = weft.zeros(#xs * 4, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local c = x > 0
      local b = (j - 1) * 4
      assert.are.equal((c and 1 or 2) * 0.1, y[b])
      assert.are.equal(-(c and 0.3 or 0.7) + 0.05, y[b + 1])
      assert.are.equal(c and 1 or 0, y[b + 2])
      assert.are.equal(1 / (c and 3 or 7), y[b + 3])
    end
  end)

  it("nest, and work through weft.select, casts and typed weft.func parameters", function()
    local half = weft.func{ v = f64, function(v) return v * 0.5 end }
    local k = weft.kernel{ x = A(f64), y = A(f64), n = i32, function(x, y, n)
      local i = weft.tid()
      local c1, c2 = x[i] > 0, x[i] > 1
      y[i * 5] = c1 and (c2 and 0.1 or 0.2) or 0.3
      y[i * 5 + 1] = weft.select(c1, 0.2, 0.1) -- Warp order: if_false, if_true
      y[i * 5 + 2] = weft.float64(c1 and 0.1 or 0.2)
      y[i * 5 + 3] = weft.float64(weft.int32(c1 and 2.7 or -1.5))
      y[i * 5 + 4] = half(c2 and 0.1 or 0.7)
    end }
    local y = weft.zeros(#xs * 5, f64)
    weft.launch(k, #xs, { A(xs, f64), y, 0 })
    for j, x in ipairs(xs) do
      local c1, c2 = x > 0, x > 1
      local b = (j - 1) * 5
      assert.are.equal(c1 and (c2 and 0.1 or 0.2) or 0.3, y[b])
      assert.are.equal(c1 and 0.1 or 0.2, y[b + 1])
      assert.are.equal(c1 and 0.1 or 0.2, y[b + 2])
      assert.are.equal(c1 and 2 or -1, y[b + 3])
      assert.are.equal((c2 and 0.1 or 0.7) * 0.5, y[b + 4])
    end
  end)

  it("adapt when the branches must be evaluated lazily", function()
    -- a branch that reads memory is evaluated only when chosen (an if)
    local k = weft.kernel{ x = A(f64), y = A(f64), a = A(f32), b = A(i32), n = i32,
                           function(x, y, a, b, n)
      local i = weft.tid()
      local j = i + 1
      local v = (j < n) and (x[j] > 0 and 0.1 or 0.2) or 0.3
      y[i * 4] = v
      a[i * 3] = v
      b[i * 3] = (j < n) and (x[j] > 0 and 4 or 5) or 6
      y[i * 4 + 1] = (j < n) and (10 % 4) or 0.25 -- '%' is evaluated lazily too
      -- arithmetic and comparisons with literals keep adapting
      y[i * 4 + 2] = -v * 3
      a[i * 3 + 1] = -v * 3
      y[i * 4 + 3] = (v == 0.3) and 1 or 0
      b[i * 3 + 1] = (v < 0.15) and 1 or 0
      a[i * 3 + 2] = weft.float32(v)
      b[i * 3 + 2] = weft.int32(v * 20)
    end }
    local n = #xs
    local y, a, b = weft.zeros(n * 4, f64), weft.zeros(n * 3, f32), weft.zeros(n * 3, i32)
    weft.launch(k, n, { A(xs, f64), y, a, b, n })
    for i = 0, n - 1 do
      local j = i + 1
      local v = (j < n) and (xs[j + 1] > 0 and 0.1 or 0.2) or 0.3
      assert.are.equal(v, y[i * 4])
      assert.are.equal(f32of(v), a[i * 3])
      assert.are.equal((j < n) and (xs[j + 1] > 0 and 4 or 5) or 6, b[i * 3])
      assert.are.equal((j < n) and (10 % 4) or 0.25, y[i * 4 + 1])
      assert.are.equal(-v * 3, y[i * 4 + 2])
      assert.are.equal(f32of(-f32of(v) * 3), a[i * 3 + 1]) -- done in float32
      assert.are.equal((v == 0.3) and 1 or 0, y[i * 4 + 3])
      assert.are.equal((v < 0.15) and 1 or 0, b[i * 3 + 1])
      assert.are.equal(f32of(v), a[i * 3 + 2])
      assert.are.equal(math.floor(v * 20), b[i * 3 + 2])
    end
  end)

  it("are carried through loops and branches at the type they meet", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.1 or 1
      for j = 1, 3 do
        s = s + x[i] * weft.float64(j)
      end
      local t = (x[i] > 0) and 0.5 or 0.25
      if x[i] > 1 then t = x[i] end
      y[i * 2], y[i * 2 + 1] = s, t
    end }
    local y = weft.zeros(#xs * 2, f64)
    weft.launch(k, #xs, { A(xs, f64), y })
    for j, x in ipairs(xs) do
      local s = (x > 0) and 0.1 or 1
      for m = 1, 3 do s = s + x * m end
      local t = (x > 0) and 0.5 or 0.25
      if x > 1 then t = x end
      assert.are.equal(s, y[(j - 1) * 2])
      assert.are.equal(t, y[(j - 1) * 2 + 1])
    end
  end)

  it("are differentiated as constants", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local s = (x[i] > 0) and 0.5 or 3
      y[i] = x[i] * s + ((x[i] > 1) and 1 or 0)
    end }
    local x = A({ 2, -1 }, f64, { requires_grad = true })
    local y = weft.zeros(2, f64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 2, { x }, { outputs = { y } }) end)
    tape:backward{ grads = { [y] = weft.ones(2, f64) } }
    assert.are.same({ 2, -3 }, y:totable())
    assert.are.same({ 0.5, 3 }, x.grad:totable())
  end)

  it("keep their default types (int32, float32) where nothing asks for one", function()
    local k = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      local a = (x[i] > 0) and 1 or 0
      local b = (x[i] > 0) and 0.5 or 1
      print(a, b)
    end }
    local ir = k:ir()
    assert.truthy(ir:find("i32 = select", 1, true))
    assert.truthy(ir:find("f32 = select", 1, true))
  end)

  it("give clear errors at the line of the use", function()
    local k1 = weft.kernel{ x = A(f64), b = A(i32), function(x, b)
      local i = weft.tid()
      b[i] = (x[i] > 0) and 0.5 or 1 -- MARK-int-store
    end }
    local err = compile_error(k1)
    assert.truthy(err)
    assert.truthy(err:find("front_conditional_literals_spec.lua:" .. line_of("MARK-int-store") ..
      ": cannot use the number 0.5 as int32", 1, true), err)

    local k2 = weft.kernel{ x = A(f64), b = A(weft.bool), function(x, b)
      local i = weft.tid()
      b[i] = (x[i] > 0) and 1 or 0 -- MARK-bool-store
    end }
    err = compile_error(k2)
    assert.truthy(err:find("front_conditional_literals_spec.lua:" .. line_of("MARK-bool-store") ..
      ": cannot use a number as bool", 1, true), err)

    local k3 = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      if (x[i] > 0) and 1 or 0 then -- MARK-cond
        x[i] = 1
      end
    end }
    err = compile_error(k3)
    assert.truthy(err:find("front_conditional_literals_spec.lua:" .. line_of("MARK-cond") ..
      ": if condition must be a bool, got a number", 1, true), err)

    local k4 = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      x[(x[i] > 0) and 1.5 or 0] = 1 -- MARK-index
    end }
    err = compile_error(k4)
    assert.truthy(err:find("front_conditional_literals_spec.lua:" .. line_of("MARK-index") ..
      ": index must be an integer", 1, true), err)

    local k5 = weft.kernel{ x = A(f64), b = A(i32), n = i32, function(x, b, n)
      local i = weft.tid()
      b[i] = (i + 1 < n) and (x[i + 1] > 0 and 0.5 or 1) or 2 -- MARK-lazy-int
    end }
    err = compile_error(k5)
    assert.truthy(err:find("front_conditional_literals_spec.lua:" .. line_of("MARK-lazy-int") ..
      ": cannot use a number that is not always an integer as int32", 1, true), err)
  end)
end)
