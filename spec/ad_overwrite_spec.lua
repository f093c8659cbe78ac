-- Reverse mode for kernels that write an array element more than once, by
-- component, in loops and branches, through atomic_min/max, and for
-- weft.func replays (weft issue 10). A store hands the element's adjoint
-- to the stored value and clears it (the old value is gone), as in Warp;
-- a component store is a load, an insert and a store, so the untouched
-- components keep their adjoint. Where the adjoint would have to replay a
-- value the kernel overwrote, building it is an error in every mode.
-- The expected numbers come from the formulas (checked against Warp 1.19
-- on the CPU and against central differences).
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table

local f64, i32 = weft.float64, weft.int32
local A = weft.array

local function arr(t, dt) return weft.array(t, dt or f64, { requires_grad = true }) end

local function near(a, b) return math.abs(a - b) <= 1e-9 * math.max(1, math.abs(b)) end

local flat = require "helpers.flat"

local function assert_near(want, got)
  local w, g = flat(want), flat(got)
  assert.are.equal(#w, #g)
  for i = 1, #w do
    assert(near(g[i], w[i]), string.format("item %d: got %.12g, want %.12g", i, g[i], w[i]))
  end
end

-- Records k(ins -> outs) on a tape and runs backward with seeds for outs.
local function backward(k, dim, ins, outs, seeds)
  local tape = weft.Tape()
  tape:record(function() weft.launch(k, dim, ins, { outputs = outs }) end)
  local g = {}
  for j, o in ipairs(outs) do g[o] = seeds[j] end
  tape:backward{ grads = g }
  return tape
end

-- The line of this file where a piece of code first appears (messages
-- name kernel lines).
local src = {}
for l in io.lines("spec/ad_overwrite_spec.lua") do src[#src + 1] = l end
local function line_of(code, after)
  for i = after or 1, #src do
    if src[i]:find(code, 1, true) then return i end
  end
  error("no line holds " .. code)
end

local function err_of(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok)
  return tostring(err)
end

describe("autodiff of overwritten elements", function()
  it("a second store replaces the first (gx 3, not 4)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = x[i]
      y[i] = 3.0 * x[i]
    end }
    local x, y = arr { 1, 2 }, arr { 0, 0 }
    backward(k, 2, { x }, { y }, { weft.ones(2, f64) })
    assert_near({ 3, 3 }, x.grad:totable())
    assert_near({ 0, 0 }, y.grad:totable()) -- y's old values do not matter
  end)

  it("read-modify-write twice (gx 6, not 9)", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = y[i] + 3.0 * x[i]
      y[i] = y[i] * 2.0
    end }
    local x, y = arr { 1, 2 }, arr { 5, 7 }
    backward(k, 2, { x }, { y }, { weft.ones(2, f64) })
    assert_near({ 6, 6 }, x.grad:totable())
    assert_near({ 2, 2 }, y.grad:totable())
  end)

  it("vector component stores (gx 7, not 46)", function()
    local k = weft.kernel{ x = A(f64), y = A(weft.vec3d), function(x, y)
      local i = weft.tid()
      y[i][0] = x[i]
      y[i].y = 2.0 * x[i]
      y[i][2] = y[i][2] + 3.0 * x[i]
      y[i].x = y[i].x + x[i]
      y[i] = y[i] - weft.vec3d(0.5, 0.5, 0.5)
    end }
    local x, y = arr { 1, 2 }, arr({ { 1, 1, 1 }, { 2, 2, 2 } }, weft.vec3d)
    backward(k, 2, { x }, { y }, { weft.full(2, weft.vec3d(1, 1, 1), weft.vec3d) })
    assert_near({ 7, 7 }, x.grad:totable())
    assert_near({ { 0, 0, 1 }, { 0, 0, 1 } }, y.grad:totable())
    assert_near({ { 1.5, 1.5, 3.5 }, { 3.5, 3.5, 7.5 } }, y:totable())
  end)

  it("matrix component stores (gx 12 + 4x: 16 and 20)", function()
    local k = weft.kernel{ x = A(f64), m = A(weft.mat22d), function(x, m)
      local i = weft.tid()
      m[i][0][0] = x[i]
      m[i][0][1] = 2.0 * x[i]
      m[i][1][0] = m[i][1][0] + 3.0 * x[i]
      m[i][1][1] = m[i][1][1] + x[i] * x[i]
      m[i] = m[i] * 2.0
    end }
    local x = arr { 1, 2 }
    local m = arr({ { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } }, weft.mat22d)
    local ones = weft.array({ { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } }, weft.mat22d)
    backward(k, 2, { x }, { m }, { ones })
    assert_near({ 16, 20 }, x.grad:totable())
    assert_near({ { { 0, 0 }, { 2, 2 } }, { { 0, 0 }, { 2, 2 } } }, m.grad:totable())
  end)

  it("struct field stores", function()
    local P = weft.struct{ { "pos", weft.vec3d }, { "mass", f64 } }
    local k = weft.kernel{ x = A(f64), p = A(P), y = A(f64), function(x, p, y)
      local i = weft.tid()
      p[i].mass = x[i]
      p[i].pos.y = p[i].pos.y + 2.0 * x[i]
      p[i].mass = p[i].mass * 3.0
      y[i] = p[i].mass + p[i].pos.y
    end }
    local x, y = arr { 1, 2 }, arr { 0, 0 }
    local p = weft.zeros(2, P, { requires_grad = true }) -- the gradient goes through p
    backward(k, 2, { x, p }, { y }, { weft.ones(2, f64) })
    assert_near({ 5, 5 }, x.grad:totable())
  end)

  it("2-D arrays, indexed and through row views", function()
    local k = weft.kernel{ x = A(f64), y = A(f64, 2), function(x, y)
      local i = weft.tid()
      y[i][0] = x[i]
      y[i][0] = 3.0 * x[i]
      local row = y[i]
      row[1] = x[i]
      row[1] = row[1] * 5.0
    end }
    local x, y = arr { 1, 2 }, arr({ { 0, 0 }, { 0, 0 } })
    backward(k, 2, { x }, { y }, { weft.array({ { 1, 10 }, { 1, 10 } }, f64) })
    assert_near({ 53, 53 }, x.grad:totable())
    assert_near({ { 0, 0 }, { 0, 0 } }, y.grad:totable())
  end)

  it("stores in a loop and in branches", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for _ = 1, 3 do y[i] = y[i] * 2.0 + x[i] end
      if x[i] > 1.5 then
        y[i] = 4.0 * x[i]
      end
    end }
    local x, y = arr { 1, 2 }, arr { 1, 1 }
    backward(k, 2, { x }, { y }, { weft.ones(2, f64) })
    assert_near({ 7, 4 }, x.grad:totable()) -- y3 = 8 y0 + 7 x; or 4 x
    assert_near({ 8, 0 }, y.grad:totable())
  end)

  it("a read after a store replays the stored value", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local s = weft.float64(0)
      for j = 1, 2 do
        y[i] = x[i] * weft.float64(j)
        s = s + y[i] * y[i]
      end
      z[i] = s
      y[i] = 0.0
    end }
    local x, y, z = arr { 1, 3 }, arr { 0, 0 }, arr { 0, 0 }
    backward(k, 2, { x }, { y, z }, { weft.ones(2, f64), weft.ones(2, f64) })
    assert_near({ 10, 30 }, x.grad:totable()) -- s = 5 x^2
    -- the read takes the stored value's adjoint directly, so the gradient
    -- also reaches x when y has no gradient array (weft.jacobian gives y none)
    local ok, worst, where = weft.check_grad(k, 2, { weft.array({ 1, 3 }, f64) },
                                             { weft.zeros(2, f64), weft.zeros(2, f64) })
    assert(ok, where)
    assert(worst < 1e-6)
  end)

  it("a read forwarded inside a branch from a store before it (IR stays valid)", function()
    local ffi = require "ffi"
    pcall(ffi.cdef, "int setenv(const char *, const char *, int); int unsetenv(const char *);")
    ffi.C.setenv("WEFT_VERIFY", "1", 1)
    local ok, err = pcall(function()
      -- fuzz_gen's finding: the read's adjoint went to the stored value from
      -- inside the branch, out of scope (tests/fuzz/front/open)
      local k0 = weft.kernel{ x = A(f64), function(x)
        local i = weft.tid()
        x[i] = 32.0
        x[i] = (x[i] < 1.0) and weft.abs(x[i]) or 2.0
      end }
      local x0 = arr { 1, -3 }
      backward(k0, 2, {}, { x0 }, { weft.ones(2, f64) })
      assert_near({ 0, 0 }, x0.grad:totable())
      local k = weft.kernel{ y = A(f64), x = A(f64), z = A(f64), function(y, x, z)
        local i = weft.tid()
        x[i] = y[i] * 2.0
        if y[i] > 0.0 then z[i] = x[i] * x[i] else z[i] = x[i] end
      end }
      local y = arr { 1, -1 }
      backward(k, 2, { y }, { arr { 0, 0 }, arr { 0, 0 } }, { weft.zeros(2, f64), weft.ones(2, f64) })
      assert_near({ 8, 2 }, y.grad:totable()) -- z = 4 y^2 or 2 y
    end)
    ffi.C.unsetenv("WEFT_VERIFY")
    assert(ok, err)
  end)

  it("intermediate gradients of a tape chain end at 0; repeated backward adds once", function()
    local k1 = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = 2.0 * x[i]
    end }
    local k2 = weft.kernel{ y = A(f64), z = A(f64), function(y, z)
      local i = weft.tid()
      z[i] = y[i] * y[i]
    end }
    local k3 = weft.kernel{ z = A(f64), loss = A(f64), function(z, loss)
      local i = weft.tid()
      weft.atomic_add(loss, 0, z[i])
    end }
    local x, y, z, loss = arr { 1, 2 }, arr { 0, 0 }, arr { 0, 0 }, arr { 0 }
    local tape = weft.Tape()
    tape:record(function()
      weft.launch(k1, 2, { x }, { outputs = { y } })
      weft.launch(k2, 2, { y }, { outputs = { z } })
      weft.launch(k3, 2, { z }, { outputs = { loss } })
    end)
    tape:backward(loss)
    assert_near({ 8, 16 }, x.grad:totable()) -- loss = sum 4 x^2
    assert_near({ 0, 0 }, y.grad:totable())
    assert_near({ 0, 0 }, z.grad:totable())
    assert_near({ 1 }, loss.grad:totable())
    tape:backward(loss)
    assert_near({ 16, 32 }, x.grad:totable())
    assert_near({ 0, 0 }, y.grad:totable())
  end)

  it("a later launch overwriting what an earlier adjoint needs stops backward", function()
    local sq = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = x[i] * x[i]
    end }
    local scale = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = x[i] * 3.0
    end }
    local reset = weft.kernel{ x = A(f64), function(x)
      local i = weft.tid()
      x[i] = 0.0
    end }
    -- the gradient of scale needs no values of x: fine
    local x, y = arr { 1, 2 }, arr { 0, 0 }
    local tape = weft.Tape()
    tape:record(function()
      weft.launch(scale, 2, { x }, { outputs = { y } })
      weft.launch(reset, 2, {}, { outputs = { x } })
    end)
    tape:backward{ grads = { [y] = weft.ones(2, f64) } }
    assert_near({ 3, 3 }, x.grad:totable())
    -- that of sq needs x, which reset zeroed: refused before any adjoint runs
    x, y = arr { 1, 2 }, arr { 0, 0 }
    tape = weft.Tape()
    tape:record(function()
      weft.launch(sq, 2, { x }, { outputs = { y } })
      weft.launch(reset, 2, {}, { outputs = { x } })
    end)
    local line = debug.getinfo(1, "l").currentline + 1
    local e = err_of(function() tape:backward{ grads = { [y] = weft.ones(2, f64) } } end)
    assert.are.equal("spec/ad_overwrite_spec.lua:" .. line .. ": tape:backward: launch 1 ('sq') "
                     .. "needs the values of 'x' for its gradient, but launch 2 ('reset') "
                     .. "overwrote that array afterwards (write the later result to another array)",
                     e)
    assert_near({ 0, 0 }, x.grad:totable())
  end)

  it("replaying an overwritten value is an error in release mode too", function()
    assert.are.equal("release", weft.config.mode)
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local v = y[i]
      y[i] = v * x[i]
    end }
    local x, y = arr { 1, 2 }, arr { 3, 4 }
    local e = err_of(function() backward(k, 2, { x }, { y }, { weft.ones(2, f64) }) end)
    assert.are.equal("spec/ad_overwrite_spec.lua:" .. line_of("y[i] = v * x[i]")
                     .. ": autodiff: kernel 'k' overwrites an element of "
                     .. "array 'y' that it read earlier at line " .. line_of("local v = y[i]")
                     .. "; the adjoint would replay the "
                     .. "new value, so gradients would be wrong (write the result to another array)",
                     e)
  end)

  it("and in a loop, where the next iteration reads the element", function()
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for _ = 1, 2 do
        y[i] = y[i] * x[i]
      end
    end }
    local x, y = arr { 1, 2 }, arr { 3, 4 }
    local e = err_of(function() backward(k, 2, { x }, { y }, { weft.ones(2, f64) }) end)
    local l = line_of("y[i] = y[i] * x[i]")
    assert.matches("spec/ad_overwrite_spec.lua:" .. l .. ": autodiff: kernel 'k' overwrites an "
                   .. "element of array 'y' that it read earlier at line " .. l .. ";", e, 1, true)
  end)

  it("a component kept through a nonlinear update is an error", function()
    local k = weft.kernel{ x = A(f64), m = A(weft.mat22d), function(x, m)
      local i = weft.tid()
      m[i][1][1] = m[i][1][1] * x[i]
    end }
    local x = arr { 1, 2 }
    local m = arr({ { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } }, weft.mat22d)
    local ones = weft.array({ { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } }, weft.mat22d)
    local e = err_of(function() backward(k, 2, { x }, { m }, { ones }) end)
    local l = line_of("m[i][1][1] = m[i][1][1] * x[i]")
    assert.matches("spec/ad_overwrite_spec.lua:" .. l .. ": autodiff: kernel 'k' overwrites an "
                   .. "element of array 'm' that it read earlier at line " .. l .. ";", e, 1, true)
  end)
end)

describe("stores and reads back in loops and branches agree with central differences", function()
  local function agrees(k, n, ins, outs)
    local ok, worst, where = weft.check_grad(k, n, ins, outs)
    assert(ok, where)
    assert(worst < 1e-6, where)
  end

  it("while loops, break and early return", function()
    agrees(weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      local j = 0
      while j < 3 do
        y[i] = y[i] * 1.5 + x[i] * x[i]
        j = j + 1
      end
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.array({ 1, 3 }, f64) })
    agrees(weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      for j = 1, 5 do
        y[i] = y[i] + x[i] * weft.float64(j)
        if j == 3 then break end
      end
      y[i] = y[i] * 3.0
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.array({ 1, 3 }, f64) })
    agrees(weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = x[i] * 2.0
      if x[i] > 1.5 then return end
      y[i] = x[i] * x[i] * 5.0
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.array({ 1, 3 }, f64) })
  end)

  it("a store in a branch or a loop, read back after it", function()
    agrees(weft.kernel{ x = A(f64), y = A(f64), z = A(f64), function(x, y, z)
      local i = weft.tid()
      if x[i] > 1.5 then y[i] = x[i] * 3.0 end
      z[i] = y[i] * y[i]
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.array({ 1, 3 }, f64), weft.zeros(2, f64) })
    agrees(weft.kernel{ x = A(f64), y = A(f64, 2), z = A(f64), function(x, y, z)
      local i = weft.tid()
      local s = weft.float64(0)
      for j = 0, 2 do
        if j > 0 then y[i][j] = x[i] * weft.float64(j) end
        s = s + y[i][j] * y[i][j]
      end
      z[i] = s
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.ones({ 2, 3 }, f64), weft.zeros(2, f64) })
    agrees(weft.kernel{ x = A(f64), y = A(f64, 2), function(x, y)
      local i = weft.tid()
      for j = 0, 2 do y[i][j] = x[i] * weft.float64(j) end
      for j = 0, 2 do y[i][j] = y[i][j] * 2.0 + x[i] end
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.zeros({ 2, 3 }, f64) })
  end)

  it("a component stored, read back squared, then the element overwritten", function()
    agrees(weft.kernel{ x = A(f64), y = A(weft.vec3d), z = A(f64), function(x, y, z)
      local i = weft.tid()
      y[i].x = x[i]
      z[i] = y[i].x * y[i].x + y[i].y
      y[i] = weft.vec3d(0.0, 0.0, 0.0)
    end }, 2, { weft.array({ 1, 2 }, f64) }, { weft.zeros(2, weft.vec3d), weft.zeros(2, f64) })
  end)
end)

describe("autodiff of atomic_min and atomic_max", function()
  it("sends the gradient to the winning thread (scalars)", function()
    local k = weft.kernel{ x = A(f64), lo = A(f64), hi = A(f64), function(x, lo, hi)
      local i = weft.tid()
      weft.atomic_min(lo, 0, x[i] * 2.0)
      weft.atomic_max(hi, 0, x[i] * x[i])
    end }
    local x, lo, hi = arr { 3, -1, 2 }, arr { 10 }, arr { -10 }
    backward(k, 3, { x }, { lo, hi }, { weft.ones(1, f64), weft.ones(1, f64) })
    assert_near({ -2 }, lo:totable())
    assert_near({ 9 }, hi:totable())
    assert_near({ 6, 2, 0 }, x.grad:totable())
  end)

  it("componentwise for vectors and matrices", function()
    local k = weft.kernel{ x = A(weft.vec3d), m = A(weft.vec3d), function(x, m)
      local i = weft.tid()
      weft.atomic_max(m, 0, x[i] * 3.0)
    end }
    local x, m = arr({ { 1, 5, 0 }, { 2, -1, -3 } }, weft.vec3d), arr({ { 0, 0, 0 } }, weft.vec3d)
    backward(k, 2, { x }, { m }, { weft.array({ { 1, 2, 4 } }, weft.vec3d) })
    assert_near({ { 6, 15, 0 } }, m:totable())
    -- component 2: thread 0's 0 ties with the initial 0, and ties take it
    assert_near({ { 0, 6, 12 }, { 3, 0, 0 } }, x.grad:totable())
    local km = weft.kernel{ x = A(weft.mat22d), m = A(weft.mat22d), function(x, m)
      local i = weft.tid()
      weft.atomic_min(m, 0, x[i])
    end }
    local xm = arr({ { { 1, 5 }, { 0, 7 } }, { { 2, -1 }, { 3, 4 } } }, weft.mat22d)
    local mm = arr({ { { 9, 9 }, { 9, 9 } } }, weft.mat22d)
    backward(km, 2, { xm }, { mm }, { weft.array({ { { 1, 2 }, { 3, 4 } } }, weft.mat22d) })
    assert_near({ { { 1, -1 }, { 0, 4 } } }, mm:totable())
    assert_near({ { { 1, 0 }, { 3, 0 } }, { { 0, 2 }, { 0, 4 } } }, xm.grad:totable())
  end)

  it("forward mode says it cannot differentiate them", function()
    local k = weft.kernel{ x = A(f64), m = A(f64), function(x, m)
      local i = weft.tid()
      weft.atomic_min(m, 0, x[i])
    end }
    local e = err_of(function()
      weft.jvp(k, 2, { weft.array({ 1, 2 }, f64) }, { weft.ones(2, f64) }, { weft.zeros(1, f64) },
               { weft.zeros(1, f64) })
    end)
    assert.matches("spec/ad_overwrite_spec.lua:" .. line_of("weft.atomic_min(m, 0, x[i])", line_of("forward mode says"))
                   .. ": autodiff: forward mode (weft.jvp) does not "
                   .. "support atomic_min of float values", e, 1, true)
  end)
end)

describe("weft.func replay without a custom gradient", function()
  it("replays an atomic counter through the replay function (Warp's reversible_increment)",
     function()
    local inc = weft.func(function(counter, ci, value, thread_values, tid)
      local nxt = weft.atomic_add(counter, ci, value)
      thread_values[tid] = nxt
      return nxt
    end)
    inc:replay(function(counter, ci, value, thread_values, tid) return thread_values[tid] end)
    local k = weft.kernel{ input = A(f64), counter = A(i32), tv = A(i32), output = A(f64),
                           function(input, counter, tv, output)
      local tid = weft.tid()
      local idx = inc(counter, 0, 1, tv, tid)
      output[idx] = input[idx] ^ 2.0
    end }
    local n = 64
    local vals = {}
    for j = 1, n do vals[j] = j - 1 end
    local input = arr(vals)
    local output = arr(vals)
    backward(k, n, { input, weft.zeros(1, i32), weft.zeros(n, i32) }, { output },
             { weft.ones(n, f64) })
    local want = {}
    for j = 1, n do want[j] = 2 * (j - 1) end
    assert_near(want, input.grad:totable())
  end)

  it("without it, the re-read counter is an error, not zero gradients", function()
    local k = weft.kernel{ input = A(f64), counter = A(i32), output = A(f64),
                           function(input, counter, output)
      local idx = weft.atomic_add(counter, 0, 1)
      output[idx] = input[idx] * 3.0
    end }
    local e = err_of(function()
      backward(k, 4, { arr { 1, 2, 3, 4 }, weft.zeros(1, i32) }, { arr { 0, 0, 0, 0 } },
               { weft.ones(4, f64) })
    end)
    assert.matches("spec/ad_overwrite_spec.lua:" .. line_of("local idx = weft.atomic_add(counter, 0, 1)")
                   .. ": autodiff: the adjoint needs the value "
                   .. "atomic_add returned here, which it cannot replay", e, 1, true)
  end)

  it("k:ptx leaves the adjoint entry out for such a kernel, unless asked for it", function()
    local core = internal.core
    if not (core.cuda_nvrtc_version and core.cuda_nvrtc_version()) then return end
    local k = weft.kernel{ input = A(f64), counter = A(i32), output = A(f64),
                           function(input, counter, output)
      local idx = weft.atomic_add(counter, 0, 1)
      output[idx] = input[weft.tid()] * 3.0
    end }
    local ptx = k:ptx("sm_80")
    assert.truthy(ptx:find(".entry weft_k", 1, true))
    assert.falsy(ptx:find("adj_k", 1, true))
    local e = err_of(function() k:ptx("sm_80", nil, { adjoint = true }) end)
    assert.matches("spec/ad_overwrite_spec.lua:%d+: autodiff: the adjoint needs the value atomic_add", e)
  end)

  it("with a replay function alone, f's own body gives the gradient", function()
    local sq = weft.func(function(v) return v * v end)
    sq:replay(function(v) return v * v end)
    local k = weft.kernel{ x = A(f64), y = A(f64), function(x, y)
      local i = weft.tid()
      y[i] = sq(x[i]) * 3.0
    end }
    local x = arr { 2, -1 }
    backward(k, 2, { x }, { arr { 0, 0 } }, { weft.ones(2, f64) })
    assert_near({ 12, -6 }, x.grad:totable())
    -- the counter pattern with a float result through f: the replay gives
    -- the index, f's body the derivative (its re-read counter is not needed)
    local inc = weft.func(function(counter, tv, tid, v)
      local nxt = weft.atomic_add(counter, 0, 1)
      tv[tid] = nxt
      return nxt, v * v
    end)
    inc:replay(function(counter, tv, tid, v) return tv[tid], v * v end)
    local k2 = weft.kernel{ input = A(f64), counter = A(i32), tv = A(i32), output = A(f64),
                            function(input, counter, tv, output)
      local tid = weft.tid()
      local idx, s = inc(counter, tv, tid, input[tid])
      output[idx] = s * 3.0
    end }
    local n = 16
    local vals, want = {}, {}
    for j = 1, n do vals[j], want[j] = j * 0.5, 6 * j * 0.5 end
    local input = arr(vals)
    backward(k2, n, { input, weft.zeros(1, i32), weft.zeros(n, i32) }, { arr(vals) },
             { weft.ones(n, f64) })
    assert_near(want, input.grad:totable())
    -- where f's body would need the counter it cannot replay, that is an error
    local bad = weft.func(function(counter, v)
      local c = weft.atomic_add(counter, 0, 1)
      return v * weft.float64(c), c
    end)
    bad:replay(function(counter, v) return v, 0 end)
    local k3 = weft.kernel{ x = A(f64), counter = A(i32), y = A(f64), function(x, counter, y)
      local i = weft.tid()
      local r, c = bad(counter, x[i])
      y[i] = r * r
    end }
    local e = err_of(function()
      backward(k3, 2, { arr { 1, 2 }, weft.zeros(1, i32) }, { arr { 0, 0 } }, { weft.ones(2, f64) })
    end)
    assert.matches("spec/ad_overwrite_spec.lua:" .. line_of("local c = weft.atomic_add(counter, 0, 1)")
                   .. ": autodiff: the adjoint needs the value atomic_add returned here", e, 1, true)
  end)
end)
