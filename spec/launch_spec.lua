-- Launches on the CPU: values against plain Lua, multi-dimensional tids,
-- atomics under contention, debug-mode bounds errors, argument errors,
-- generic specialization, and a warm launch that allocates nothing.
local weft = require "weft"

local function approx(a, b, tol)
  return math.abs(a - b) <= (tol or 1e-5) * math.max(1, math.abs(b))
end

describe("weft.launch", function()
  after_each(function()
    weft.config.mode = "release"
    weft.config.num_threads = nil
  end)

  local saxpy = weft.kernel{
    x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
    function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end,
  }

  it("computes saxpy like plain Lua, on the pool and inline", function()
    for _, n in ipairs { 1, 7, 1000, 300001 } do
      local x, y = weft.zeros(n), weft.zeros(n)
      local rx, ry = {}, {}
      for i = 0, n - 1 do
        rx[i] = (i % 97) * 0.25
        ry[i] = 1 - (i % 13)
        x[i], y[i] = rx[i], ry[i]
      end
      weft.launch(saxpy, n, { x, y, 1.5 })
      local bad = 0
      for i = 0, n - 1 do
        if not approx(y[i], 1.5 * rx[i] + ry[i]) then bad = bad + 1 end
      end
      assert.equal(0, bad)
    end
  end)

  it("gives the same results with any thread count", function()
    local n = 100000
    for _, nt in ipairs { 1, 2, 3 } do
      weft.config.num_threads = nt
      local x, y = weft.full(n, 2.0), weft.ones(n)
      weft.launch(saxpy, n, { x, y, 3.0 })
      assert.equal(7, y[0])
      assert.equal(7, y[n - 1])
    end
  end)

  it("handles the same array passed twice (aliasing)", function()
    local n = 5000
    local x = weft.zeros(n)
    for i = 0, n - 1 do x[i] = i end
    weft.launch(saxpy, n, { x, x, 2.0 })
    assert.equal(3 * 4999, x[4999])
    assert.equal(3 * 17, x[17])
  end)

  it("passes inputs and outputs in parameter order", function()
    local x, y = weft.full(10, 1.0), weft.full(10, 1.0)
    weft.launch(saxpy, 10, { x }, { outputs = { y, 4.0 } })
    assert.equal(5, y[9])
  end)

  it("does nothing for an empty grid", function()
    local x, y = weft.zeros(4), weft.ones(4)
    weft.launch(saxpy, 0, { x, y, 1.0 })
    weft.launch(saxpy, { 3, 0 }, { x, y, 1.0 })
    assert.equal(1, y[0])
  end)

  it("maps 2-D and 3-D grids row-major to tids", function()
    local k2 = weft.kernel{
      out = weft.array(weft.int32, 2),
      function(out)
        local i, j = weft.tid()
        out[i][j] = i * 1000 + j
      end,
    }
    local a = weft.zeros({ 37, 53 }, weft.int32)
    weft.launch(k2, { 37, 53 }, { a })
    local bad = 0
    for i = 0, 36 do
      for j = 0, 52 do
        if a[i][j] ~= i * 1000 + j then bad = bad + 1 end
      end
    end
    assert.equal(0, bad)
    local k3 = weft.kernel{
      out = weft.array(weft.int32, 3),
      function(out)
        local i, j, l = weft.tid()
        out[i][j][l] = i * 10000 + j * 100 + l
      end,
    }
    local b = weft.zeros({ 5, 7, 9 }, weft.int32)
    weft.launch(k3, { 5, 7, 9 }, { b })
    bad = 0
    for i = 0, 4 do
      for j = 0, 6 do
        for l = 0, 8 do
          if b[i][j][l] ~= i * 10000 + j * 100 + l then bad = bad + 1 end
        end
      end
    end
    assert.equal(0, bad)
  end)

  it("runs a 1-D kernel on a 2-D grid with the linear index split", function()
    local k = weft.kernel{
      out = weft.array(weft.int32),
      function(out)
        local i = weft.tid()
        weft.atomic_add(out, i, 1)
      end,
    }
    local a = weft.zeros(4, weft.int32)
    weft.launch(k, { 4, 6 }, { a })
    assert.same({ 6, 6, 6, 6 }, a:totable())
  end)

  it("makes atomics exact under contention", function()
    local k = weft.kernel{
      cnt = weft.array(weft.int32), fsum = weft.array(weft.float32), dsum = weft.array(weft.float64),
      mx = weft.array(weft.int32), mn = weft.array(weft.float32),
      function(cnt, fsum, dsum, mx, mn)
        local i = weft.tid()
        weft.atomic_add(cnt, 0, 1)
        weft.atomic_add(cnt, 1, i)
        weft.atomic_add(fsum, 0, 1.0)
        weft.atomic_add(dsum, 0, 0.5)
        weft.atomic_max(mx, 0, i)
        weft.atomic_min(mn, 0, weft.float32(-i))
      end,
    }
    weft.config.num_threads = 4
    local n = 200000
    local cnt, fsum, dsum = weft.zeros(2, weft.int32), weft.zeros(1), weft.zeros(1, weft.float64)
    local mx, mn = weft.zeros(1, weft.int32), weft.zeros(1)
    weft.launch(k, n, { cnt, fsum, dsum, mx, mn })
    assert.equal(n, cnt[0])
    assert.equal(n * (n - 1) / 2 % 2 ^ 32 - (n * (n - 1) / 2 % 2 ^ 32 >= 2 ^ 31 and 2 ^ 32 or 0), cnt[1])
    assert.equal(n, fsum[0])
    assert.equal(n / 2, dsum[0])
    assert.equal(n - 1, mx[0])
    assert.equal(-(n - 1), mn[0])
  end)

  describe("arrays updated only by atomic_add (private accumulation)", function()
    -- every thread adds into every element: the CPU backend gives each chunk
    -- of threads private zeroed copies and folds them in once. Integer-valued
    -- floats make the sums exact in any order, so they are compared exactly.
    local scatter = weft.kernel{
      h = weft.array(weft.vec3), s = weft.array(weft.float64), m = weft.int32,
      function(h, s, m)
        local i = weft.tid()
        for j = 0, m - 1 do
          weft.atomic_add(h, j, weft.vec3(1.0, weft.float32(i % 3), 2.0))
          weft.atomic_add(s, (i + j) % m, weft.float64(i % 5))
        end
        weft.atomic_add(s, 0, 0.5)
      end,
    }

    local function expected(n, m)
      local c = { 0, 0, 0 }
      for i = 0, n - 1 do c[i % 3 + 1] = c[i % 3 + 1] + 1 end
      local s5 = 0
      for i = 0, n - 1 do s5 = s5 + i % 5 end
      -- h[j] = (n, sum_i i%3, 2n); sum_j s[j] = m * s5 + n/2
      return { n, c[2] + 2 * c[3], 2 * n }, m * s5 + n / 2
    end

    it("gives the exact sums on one thread, on the pool and inline", function()
      for _, case in ipairs { { 1, 7, 5 }, { 2, 3000, 64 }, { 3, 2000, 300 }, { 1, 2000, 300 } } do
        local nt, n, m = case[1], case[2], case[3]
        weft.config.num_threads = nt
        local h, s = weft.zeros(m, weft.vec3), weft.zeros(m, weft.float64)
        h[0] = weft.vec3(10, 20, 30)
        weft.launch(scatter, n, { h, s, m })
        local eh, es = expected(n, m)
        local hv = h:totable()
        assert.same({ eh[1] + 10, eh[2] + 20, eh[3] + 30 }, hv[1])
        for j = 2, m do assert.same(eh, hv[j]) end
        local total = 0
        for _, v in ipairs(s:totable()) do total = total + v end
        assert.equal(es, total)
      end
    end)

    it("keeps atomics when the array is also read, or passed twice", function()
      local k = weft.kernel{
        a = weft.array(weft.float32), b = weft.array(weft.float32), m = weft.int32,
        function(a, b, m)
          local i = weft.tid()
          for j = 0, m - 1 do
            weft.atomic_add(a, j, 1.0)
            weft.atomic_add(b, j, 2.0)
          end
        end,
      }
      weft.config.num_threads = 2
      local a = weft.zeros(50)
      weft.launch(k, 4000, { a, a, 50 })
      for j = 0, 49 do assert.equal(12000, a[j]) end
      -- an atomic whose old value is used is a real atomic: a ticket counter
      local tk = weft.kernel{
        c = weft.array(weft.float32), out = weft.array(weft.int32),
        function(c, out)
          local i = weft.tid()
          local old = weft.atomic_add(c, 0, 1.0)
          weft.atomic_add(out, weft.int32(old), 1)
        end,
      }
      local c, out = weft.zeros(1), weft.zeros(20000, weft.int32)
      weft.launch(tk, 20000, { c, out })
      local ones = 0
      for _, v in ipairs(out:totable()) do if v == 1 then ones = ones + 1 end end
      assert.equal(20000, ones)
    end)

    it("gives adjoints equal to the atomic version (n-body energy)", function()
      local ffi = require "ffi"
      pcall(ffi.cdef, "int setenv(const char *, const char *, int); int unsetenv(const char *);")
      local src = function(pos, mass, e)
        local i = weft.tid()
        local pi = pos[i]
        local acc = 0.0
        for j = 0, #pos - 1 do
          if j ~= i then
            local d = pos[j] - pi
            acc = acc + mass[j] / weft.sqrt(weft.dot(d, d) + 0.01)
          end
        end
        weft.atomic_add(e, 0, -0.5 * mass[i] * acc)
      end
      local function grads(privatize, nt)
        if privatize then ffi.C.unsetenv("WEFT_PRIVATIZE") else ffi.C.setenv("WEFT_PRIVATIZE", "off", 1) end
        weft.config.num_threads = nt
        local k = weft.kernel{ pos = weft.array(weft.vec3), mass = weft.array(weft.float32),
                               e = weft.array(weft.float32), src }
        local n = 300
        local ps, ms = {}, {}
        for i = 1, n do
          ps[i] = { (i * 7) % 11 * 0.5, (i * 3) % 13 * 0.25, i % 17 * 0.125 }
          ms[i] = 0.5 + i % 4 * 0.25
        end
        local pos = weft.array(ps, weft.vec3, { requires_grad = true })
        local mass = weft.array(ms, weft.float32, { requires_grad = true })
        local e = weft.zeros(1, weft.float32, { requires_grad = true })
        local tape = weft.Tape()
        tape:record(function() weft.launch(k, n, { pos, mass }, { outputs = { e } }) end)
        tape:backward(e)
        ffi.C.unsetenv("WEFT_PRIVATIZE")
        return pos.grad:totable(), mass.grad:totable()
      end
      local pa, ma = grads(false, 2)
      for _, nt in ipairs { 1, 2 } do
        local pp, mp = grads(true, nt)
        for i = 1, #pa do
          assert.is_true(approx(mp[i], ma[i], 1e-5), "mass grad " .. i)
          for c = 1, 3 do assert.is_true(approx(pp[i][c], pa[i][c], 1e-4), "pos grad " .. i) end
        end
      end
    end)
  end)

  it("runs loops, math and vectors like plain Lua", function()
    local k = weft.kernel{
      out = weft.array(weft.float64), v = weft.array(weft.vec3), s = weft.vec3,
      function(out, v, s)
        local i = weft.tid()
        local acc = weft.float64(0.0)
        for q = 1, i do
          acc = acc + weft.float64(q % 3) + weft.sqrt(weft.float64(q))
        end
        out[i] = acc
        v[i] = v[i] * 2.0 + s
      end,
    }
    local n = 50
    local out, v = weft.zeros(n, weft.float64), weft.zeros(n, weft.vec3)
    for i = 0, n - 1 do v[i] = weft.vec3(i, -i, 0.5) end
    weft.launch(k, n, { out, v, weft.vec3(1, 2, 3) })
    for i = 0, n - 1 do
      local acc = 0
      for q = 1, i do acc = acc + q % 3 + math.sqrt(q) end
      assert.is_true(approx(out[i], acc, 1e-12))
      local e = v[i]
      assert.same({ 2 * i + 1, -2 * i + 2, 4 }, { e.x, e.y, e.z })
    end
  end)

  it("runs while, repeat, break and if/else like plain Lua", function()
    local k = weft.kernel{
      out = weft.array(weft.int32, 2),
      function(out)
        local i = weft.tid()
        local x = i + 1
        local steps = 0
        while x < 1000 do
          x = x * 3
          steps = steps + 1
        end
        out[i][0] = x
        out[i][1] = steps
        local r = 0
        repeat
          r = r + 2
          if r > i then break end
        until r >= 20
        out[i][2] = r
        local v = 0
        if i % 3 == 0 then v = -i elseif i % 3 == 1 then v = i * 10 else v = 7 end
        out[i][3] = v
      end,
    }
    local n = 40
    local a = weft.zeros({ n, 4 }, weft.int32)
    weft.launch(k, n, { a })
    for i = 0, n - 1 do
      local x, steps = i + 1, 0
      while x < 1000 do x, steps = x * 3, steps + 1 end
      local r = 0
      repeat
        r = r + 2
        if r > i then break end
      until r >= 20
      local v = i % 3 == 0 and -i or i % 3 == 1 and i * 10 or 7
      assert.same({ x, steps, r, v }, { a[i][0], a[i][1], a[i][2], a[i][3] })
    end
  end)

  it("draws reproducible random numbers in [0, 1)", function()
    local k = weft.kernel{
      out = weft.array(weft.float32), ints = weft.array(weft.int32), seed = weft.int32,
      function(out, ints, seed)
        local i = weft.tid()
        local st = weft.rand_init(seed, i)
        out[i] = weft.randf(st)
        ints[i] = weft.randi(st)
      end,
    }
    local n = 10000
    local a, b, ia = weft.zeros(n), weft.zeros(n), weft.zeros(n, weft.int32)
    weft.launch(k, n, { a, ia, 42 })
    weft.launch(k, n, { b, ia, 42 })
    local sum, lo, hi, same = 0, 1, 0, 0
    for i = 0, n - 1 do
      sum = sum + a[i]
      lo, hi = math.min(lo, a[i]), math.max(hi, a[i])
      if a[i] == b[i] then same = same + 1 end
    end
    assert.equal(n, same)
    assert.is_true(lo >= 0 and hi < 1)
    assert.is_true(math.abs(sum / n - 0.5) < 0.02)
  end)

  it("specializes generic kernels per argument type", function()
    local k = weft.kernel{
      function(x, y)
        local i = weft.tid()
        y[i] = x[i] + x[i]
      end,
    }
    local xf, yf = weft.full(5, 1.25), weft.zeros(5)
    local xd, yd = weft.full(5, 1.25, weft.float64), weft.zeros(5, weft.float64)
    weft.launch(k, 5, { xf, yf })
    weft.launch(k, 5, { xd, yd })
    assert.equal(2.5, yf[4])
    assert.equal(2.5, yd[4])
    assert.equal(2, weft.stats(k).compiles + weft.stats(k).disk_hits)
  end)

  it("allocates nothing on a warm launch", function()
    local x, y = weft.zeros(16), weft.zeros(16)
    local inputs = { x, y, 1.0 }
    -- warm up: the first batches record and compile traces
    for _ = 1, 30000 do weft.launch(saxpy, 16, inputs) end
    -- the smallest of a few batches (trace compilation allocates once)
    local least = math.huge
    for _ = 1, 3 do
      collectgarbage("collect")
      collectgarbage("stop")
      local before = collectgarbage("count")
      for _ = 1, 20000 do weft.launch(saxpy, 16, inputs) end
      least = math.min(least, collectgarbage("count") - before)
      collectgarbage("restart")
    end
    assert.is_true(least < 0.5, ("allocated %.1f KB in 20000 launches"):format(least))
  end)

  describe("in debug mode", function()
    it("raises bounds errors with the kernel's line, index and shape", function()
      weft.config.mode = "debug"
      local k = weft.kernel{
        x = weft.array(weft.float32),
        function(x)
          local i = weft.tid()
          x[i + 1] = 1.0
        end,
      }
      local x = weft.zeros(5)
      local ok, err = pcall(weft.launch, k, 5, { x })
      assert.is_false(ok)
      assert.matches("launch_spec%.lua:%d+: index 5 out of bounds for axis 0 with size 5 in array 'x'", err)
      local line = tonumber(err:match("launch_spec%.lua:(%d+):"))
      local src = {}
      for l in io.lines("spec/launch_spec.lua") do src[#src + 1] = l end
      assert.matches("x%[i %+ 1%] = 1%.0", src[line])
      -- many threads: one clean error, and the runtime still works
      local big = weft.zeros(5)
      ok, err = pcall(weft.launch, k, 1000000, { big })
      assert.is_false(ok)
      assert.matches("out of bounds", err)
      weft.launch(saxpy, 5, { x, x, 1.0 })
    end)

    it("names the axis of a 2-D access", function()
      weft.config.mode = "debug"
      local k = weft.kernel{
        a = weft.array(weft.float32, 2),
        function(a)
          local i, j = weft.tid()
          a[i][j + 2] = 0.0
        end,
      }
      local ok, err = pcall(weft.launch, k, { 2, 3 }, { weft.zeros({ 2, 3 }) })
      assert.is_false(ok)
      assert.matches("index 3 out of bounds for axis 1 with size 3 in array 'a'", err)
    end)

    it("runs correct kernels unchanged", function()
      weft.config.mode = "debug"
      local x, y = weft.full(100, 2.0), weft.ones(100)
      weft.launch(saxpy, 100, { x, y, 0.5 })
      assert.equal(2, y[99])
    end)
  end)

  describe("argument errors", function()
    local x, y = weft.zeros(4), weft.zeros(4)
    local function err_of(...)
      local ok, e = pcall(weft.launch, ...)
      assert.is_false(ok)
      return e
    end

    it("checks the argument count", function()
      assert.matches("kernel 'saxpy' takes 3 arguments %(inputs then outputs%), got 2",
                     err_of(saxpy, 4, { x, y }))
    end)

    it("checks dtypes and ndim, naming kernel, parameter and types", function()
      assert.matches("kernel 'saxpy': parameter 'x' expects array%(float32%), got array%(float64%)",
                     err_of(saxpy, 4, { weft.zeros(4, weft.float64), y, 1.0 }))
      assert.matches("parameter 'y' expects array%(float32%), got array%(float32,2%)",
                     err_of(saxpy, 4, { x, weft.zeros({ 2, 2 }), 1.0 }))
      assert.matches("parameter 'a' expects float32, got a string",
                     err_of(saxpy, 4, { x, y, "2" }))
      assert.matches("parameter 'x' expects array%(float32%), got a number",
                     err_of(saxpy, 4, { 1.0, y, 1.0 }))
    end)

    it("points at the caller's line", function()
      assert.matches("^spec/launch_spec%.lua:%d+: weft%.launch", err_of(saxpy, 4, { x, y }))
    end)

    it("checks dims", function()
      assert.matches("dim must be a non%-negative integer, got %-1", err_of(saxpy, -1, { x, y, 1.0 }))
      assert.matches("dim must be a non%-negative integer, got 1%.5", err_of(saxpy, 1.5, { x, y, 1.0 }))
      assert.matches("dim must have 1 to 4 entries, got 5", err_of(saxpy, { 1, 1, 1, 1, 1 }, { x, y, 1.0 }))
      assert.matches("dim%[2%] must be a non%-negative integer", err_of(saxpy, { 1, "a" }, { x, y, 1.0 }))
      assert.matches("dim must be an integer or a table", err_of(saxpy, "4", { x, y, 1.0 }))
    end)

    it("runs explicit adjoint launches with adj_inputs", function()
      local ax, ay = weft.zeros(4), weft.ones(4)
      weft.launch(saxpy, 4, { x, y, 2.5 }, { adjoint = true, adj_inputs = { ax, ay, 0.0 } })
      assert.same({ 2.5, 2.5, 2.5, 2.5 }, ax:totable())
    end)

    it("records launches on an active tape only", function()
      local tape = weft.Tape()
      weft.launch(saxpy, 4, { x, y, 1.0 })
      assert.equals(0, #tape.launches)
      tape:record(function() weft.launch(saxpy, 4, { x, y, 1.0 }) end)
      assert.equals(1, #tape.launches)
      assert.equals(saxpy, tape.launches[1].k)
    end)

    it("rejects non-kernels", function()
      assert.matches("expected a kernel", err_of(function() end, 4, {}))
    end)
  end)
end)

-- SIMD across threads (src/cpu/emit.c, jit.c): a 1-D thread loop holding an
-- inner loop runs several threads in vector lanes. Each lane keeps the
-- scalar order of operations, so the results are bit-identical to the
-- scalar code (WEFT_SIMD=off), the partial last vector (n not a multiple of
-- the lane count) included.
describe("weft.launch across SIMD lanes", function()
  local ffi = require "ffi"
  pcall(ffi.cdef, [[
    int setenv(const char *name, const char *value, int overwrite);
    int unsetenv(const char *name);
    int memcmp(const void *a, const void *b, size_t n);
  ]])
  after_each(function() ffi.C.unsetenv("WEFT_SIMD") end)

  local function nbody_kernel()
    return weft.kernel{
      pos = weft.array(weft.vec3), acc = weft.array(weft.vec3), n = weft.int32,
      function(pos, acc, n)
        local i = weft.tid()
        local p = pos[i]
        local a = weft.vec3(0.0, 0.0, 0.0)
        for j = 0, n - 1 do
          local d = pos[j] - p
          local r2 = weft.dot(d, d) + 0.01
          local inv = 1.0 / (r2 * weft.sqrt(r2))
          a = a + d * inv
        end
        acc[i] = a
      end,
    }
  end

  it("gives n-body results bit-identical to the scalar code", function()
    local n = 203
    local pos = weft.zeros(n, weft.vec3)
    local s = 12345
    local function rnd()
      s = (s * 1103515245 + 12345) % 2147483648
      return s / 2147483648 * 10 - 5
    end
    for i = 0, n - 1 do pos[i] = weft.vec3(rnd(), rnd(), rnd()) end
    local k_simd, k_scalar = nbody_kernel(), nbody_kernel()
    local a1, a2 = weft.zeros(n, weft.vec3), weft.zeros(n, weft.vec3)
    weft.launch(k_simd, n, { pos, a1, n })
    -- vector lanes: the square root of several threads at once
    assert.matches("llvm%.sqrt%.v%d+f32", k_simd:source("llvm"))
    ffi.C.setenv("WEFT_SIMD", "off", 1)
    assert.not_matches("llvm%.sqrt%.v%d+f32", k_scalar:source("llvm"))
    weft.launch(k_scalar, n, { pos, a2, n })
    assert.equals(0, ffi.C.memcmp(a1.h.data, a2.h.data, 12 * n))
    -- and against plain Lua in double precision, loosely
    for _, i in ipairs { 0, 1, 100, 199, 202 } do
      local p, ax = pos[i], 0
      for j = 0, n - 1 do
        local q = pos[j]
        local dx, dy, dz = q.x - p.x, q.y - p.y, q.z - p.z
        local r2 = dx * dx + dy * dy + dz * dz + 0.01
        ax = ax + dx / (r2 * math.sqrt(r2))
      end
      assert.is_true(approx(a1[i].x, ax, 1e-3), string.format("acc[%d].x %g vs %g", i, a1[i].x, ax))
    end
  end)

  it("keeps per-thread results for launches shorter than a vector and odd chunks", function()
    local k = weft.kernel{
      x = weft.array(weft.float32), y = weft.array(weft.float32), m = weft.int32,
      function(x, y, m)
        local i = weft.tid()
        local s = 0.0
        for j = 1, m do
          s = s + x[i] / weft.float32(j)
        end
        y[i] = s
      end,
    }
    for _, n in ipairs { 1, 5, 8, 9, 17, 1000 } do
      local x, y = weft.zeros(n), weft.zeros(n)
      for i = 0, n - 1 do x[i] = i + 0.5 end
      weft.launch(k, n, { x, y, 7 })
      for i = 0, n - 1 do
        local s = 0
        for j = 1, 7 do s = s + (i + 0.5) / j end
        assert.is_true(approx(y[i], s), string.format("n %d y[%d] %g vs %g", n, i, y[i], s))
      end
    end
  end)

  it("leaves kernels with atomics in the inner loop correct", function()
    local k = weft.kernel{
      h = weft.array(weft.int32), m = weft.int32,
      function(h, m)
        local i = weft.tid()
        for j = 0, m - 1 do
          weft.atomic_add(h, (i + j) % 4, 1)
        end
      end,
    }
    local h = weft.zeros(4, weft.int32)
    weft.launch(k, 1001, { h, 9 })
    local total = 0
    for b = 0, 3 do total = total + h[b] end
    assert.equals(1001 * 9, total)
  end)
end)
