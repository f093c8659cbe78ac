-- weft.matmul / weft.batched_matmul: values (BLAS layouts, alpha, beta,
-- c == d), errors, the tape's gradients, and a process without a BLAS.
local ffi = require "ffi"
local weft = require "weft"
local run_child = require "spec.helpers.run_child"

local function rand_table(shape, seed)
  local s = seed
  local function gen(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then
        s = (s * 1103515245 + 12345) % 2147483648
        t[i] = (s / 2147483648) * 2 - 1
      else
        t[i] = gen(d + 1)
      end
    end
    return t
  end
  return gen(1)
end

-- alpha a @ b + beta c on Lua tables
local function ref(a, b, c, alpha, beta)
  local m, k, n = #a, #b, #b[1]
  local d = {}
  for i = 1, m do
    d[i] = {}
    for j = 1, n do
      local s = 0
      for l = 1, k do s = s + a[i][l] * b[l][j] end
      d[i][j] = alpha * s + beta * c[i][j]
    end
  end
  return d
end

local function close(want, got, tol, where)
  where = where or ""
  if type(want) == "table" then
    assert.are.equal(#want, #got, where)
    for i = 1, #want do close(want[i], got[i], tol, where .. "[" .. i .. "]") end
  else
    assert(math.abs(want - got) <= tol * math.max(1, math.abs(want)),
           string.format("%s: want %.9g, got %.9g", where, want, got))
  end
end

-- A transposed view of a compact 2-D array (strides swapped, no copy),
-- through a DLPack export whose shape and strides are rewritten.
if not weft.to_dlpack then require("weft.interop")(weft) end
local function transposed(a)
  local m = ffi.cast("struct { uint32_t major, minor; void *ctx; void *del; uint64_t flags;"
                     .. " void *data; int32_t dt, di; int32_t ndim; uint32_t dtype;"
                     .. " int64_t *shape; int64_t *strides; uint64_t off; } *",
                     weft.to_dlpack(a, true))
  local r, c = m.shape[0], m.shape[1]
  m.shape[0], m.shape[1] = c, r
  m.strides[0], m.strides[1] = 1, c
  return weft.from_dlpack(m, true)
end

describe("weft.matmul", function()
  for _, dt in ipairs { weft.float32, weft.float64 } do
    local tol = dt == weft.float32 and 1e-5 or 1e-12
    it("computes alpha a @ b + beta c in " .. dt.name, function()
      for _, sz in ipairs { { 1, 1, 1 }, { 3, 5, 2 }, { 17, 9, 33 }, { 64, 70, 5 } } do
        local m, k, n = sz[1], sz[2], sz[3]
        local ta, tb, tc = rand_table({ m, k }, 1), rand_table({ k, n }, 2), rand_table({ m, n }, 3)
        local a, b, c = weft.array(ta, dt), weft.array(tb, dt), weft.array(tc, dt)
        local d = weft.full({ m, n }, 7, dt)
        weft.matmul(a, b, c, d)
        close(ref(a:totable(), b:totable(), tc, 1, 0), d:totable(), tol, "alpha 1 beta 0")
        weft.matmul(a, b, c, d, -0.5, 2)
        close(ref(a:totable(), b:totable(), c:totable(), -0.5, 2), d:totable(), tol, "alpha -0.5 beta 2")
      end
    end)
  end

  it("accumulates into d when c is d", function()
    local a = weft.array(rand_table({ 4, 3 }, 5), weft.float64)
    local b = weft.array(rand_table({ 3, 6 }, 6), weft.float64)
    local d = weft.array(rand_table({ 4, 6 }, 7), weft.float64)
    local want = ref(a:totable(), b:totable(), d:totable(), 3, 0.25)
    weft.matmul(a, b, d, d, 3, 0.25)
    close(want, d:totable(), 1e-12)
  end)

  it("reads transposed views without copying them, and a k of 0", function()
    local a = weft.array(rand_table({ 5, 4 }, 8), weft.float64) -- a^T is 4 x 5
    local b = weft.array(rand_table({ 3, 5 }, 9), weft.float64) -- b^T is 5 x 3
    local at, bt = transposed(a), transposed(b)
    assert.are.same({ 4, 5 }, at.shape)
    local d = weft.zeros({ 4, 3 }, weft.float64)
    weft.matmul(at, bt, d, d)
    close(ref(at:totable(), bt:totable(), d:totable(), 1, 0), d:totable(), 1e-12)
    -- a transposed d is written through a compact copy
    local dt = transposed(weft.zeros({ 3, 4 }, weft.float64))
    weft.matmul(at, bt, dt, dt)
    close(d:totable(), dt:totable(), 1e-12)
    -- k = 0: d = beta c
    local c = weft.full({ 2, 3 }, 2, weft.float32)
    local e = weft.full({ 2, 3 }, 9, weft.float32)
    weft.matmul(weft.zeros({ 2, 0 }), weft.zeros({ 0, 3 }), c, e, 1, 1.5)
    close({ { 3, 3, 3 }, { 3, 3, 3 } }, e:totable(), 0)
  end)

  it("multiplies batches", function()
    local B, m, k, n = 3, 4, 5, 2
    local ta, tb, tc = rand_table({ B, m, k }, 11), rand_table({ B, k, n }, 12), rand_table({ B, m, n }, 13)
    local a, b, c = weft.array(ta, weft.float32), weft.array(tb, weft.float32), weft.array(tc, weft.float32)
    local d = weft.zeros({ B, m, n })
    weft.batched_matmul(a, b, c, d, 2, -1)
    local at, bt, ct, dt = a:totable(), b:totable(), c:totable(), d:totable()
    for i = 1, B do close(ref(at[i], bt[i], ct[i], 2, -1), dt[i], 1e-5, "batch " .. i) end
  end)

  it("names the library it uses", function()
    assert.are.equal("string", type(weft.blas_library()))
  end)
end)

describe("weft.matmul errors", function()
  local a, b, c, d = weft.zeros({ 2, 3 }), weft.zeros({ 3, 4 }), weft.zeros({ 2, 4 }), weft.zeros({ 2, 4 })
  local cases = {
    { function() weft.matmul(a, b, c) end, "weft.matmul: d must be an array, got nil" },
    { function() weft.matmul(a, weft.zeros({ 4, 4 }), c, d) end,
      "weft.matmul: a is {2, 3} and b is {4, 4}: the columns of a (3) must match the rows of b (4)" },
    { function() weft.matmul(a, b, c, weft.zeros({ 2, 5 })) end,
      "weft.matmul: d is {2, 5}; a {2, 3} @ b {3, 4} needs 2 x 4" },
    { function() weft.matmul(a, b, weft.zeros({ 4, 2 }), d) end,
      "weft.matmul: c is {4, 2} and d is {2, 4}: they must have the same shape" },
    { function() weft.matmul(a, weft.zeros({ 3, 4 }, weft.float64), c, d) end,
      "weft.matmul: dtypes differ (a float32, b float64)" },
    { function() weft.matmul(weft.zeros({ 2, 3 }, weft.int32), b, c, d) end,
      "weft.matmul: a is an array of int32; matmul takes float32 or float64" },
    { function() weft.matmul(weft.zeros(3), b, c, d) end,
      "weft.matmul: a must be a 2-D array, got 1-D {3}" },
    { function() weft.batched_matmul(a, b, c, d) end,
      "weft.batched_matmul: a must be a 3-D array, got 2-D {2, 3}" },
    { function() weft.batched_matmul(weft.zeros({ 2, 2, 3 }), weft.zeros({ 3, 3, 4 }),
                                     weft.zeros({ 2, 2, 4 }), weft.zeros({ 2, 2, 4 })) end,
      "weft.batched_matmul: batch sizes differ (a {2, 2, 3}, b {3, 3, 4})" },
    { function() weft.matmul(a, b, c, d, "2") end, "weft.matmul: alpha must be a number, got a string" },
    { function()
        local x = weft.zeros({ 3, 3 })
        weft.matmul(x, weft.zeros({ 3, 3 }), x, x)
      end, "weft.matmul: d shares memory with a (write the product to another array)" },
    { function()
        local x = weft.zeros({ 4, 4 })
        weft.matmul(weft.zeros({ 2, 4 }), weft.zeros({ 4, 4 }), x[0], x[1])
      end, "weft.matmul: c must be a 2-D array, got 1-D {4}" },
  }
  for i, case in ipairs(cases) do
    it("case " .. i .. ": " .. case[2], function()
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      -- positioned at this file's line
      assert.is_truthy(tostring(err):match("^spec/matmul_spec%.lua:%d+: "), tostring(err))
      assert.are.equal(case[2], tostring(err):gsub("^[^:]+:%d+: ", ""), tostring(err))
    end)
  end

  it("refuses to be captured in a cpu graph", function()
    weft.capture_begin("cpu")
    local ok, err = pcall(weft.matmul, a, b, c, d)
    weft.capture_end()
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("weft.matmul: cannot be recorded in a cpu graph capture "
                                        .. "(run it outside the capture)", 1, true), tostring(err))
  end)

  it("refuses a read-only d", function()
    local m = ffi.cast("struct { uint32_t major, minor; void *ctx; void *del; uint64_t flags; } *",
                       weft.to_dlpack(weft.zeros({ 2, 4 }), true))
    m.flags = 1
    local ro = weft.from_dlpack(m, true)
    assert.has_error(function() weft.matmul(a, b, c, ro) end, "weft.matmul: d is read-only")
  end)

  it("starts without a BLAS and says so at the first product", function()
    local out = run_child([[
      local ffi = require "ffi"
      ffi.cdef "int setenv(const char *, const char *, int);"
      ffi.C.setenv("WEFT_LIBBLAS", "/nonexistent/libblas.so", 1)
      local weft = require "weft"
      print("loaded", weft.version)
      local ok, err = pcall(weft.matmul, weft.zeros({2, 2}), weft.zeros({2, 2}), weft.zeros({2, 2}),
                            weft.zeros({2, 2}))
      print(ok, err)
      print(weft.blas_library())
    ]])
    assert.is_truthy(out:match("loaded"), out)
    assert.is_truthy(out:find(":7: weft.matmul: no CBLAS library for matrix products on the cpu (install "
                              .. "OpenBLAS, Debian's libopenblas0, or set WEFT_LIBBLAS): /nonexistent/libblas.so: "
                              .. "cannot open shared object file", 1, true), out)
    assert.is_truthy(out:find("nil\tweft: no CBLAS library", 1, true), out)
  end)
end)

describe("weft.matmul on a tape", function()
  -- loss = sum(w * d)
  local loss_k = weft.kernel{ d = weft.array(weft.float64, 2), w = weft.array(weft.float64, 2),
                              loss = weft.array(weft.float64),
    function(d, w, loss)
      local i, j = weft.tid()
      weft.atomic_add(loss, 0, d[i][j] * w[i][j])
    end }

  local function setup(m, k, n)
    local a = weft.array(rand_table({ m, k }, 21), weft.float64, { requires_grad = true })
    local b = weft.array(rand_table({ k, n }, 22), weft.float64, { requires_grad = true })
    local c = weft.array(rand_table({ m, n }, 23), weft.float64, { requires_grad = true })
    local w = weft.array(rand_table({ m, n }, 24), weft.float64)
    return a, b, c, w
  end

  local function transpose(t)
    local r = {}
    for j = 1, #t[1] do
      r[j] = {}
      for i = 1, #t do r[j][i] = t[i][j] end
    end
    return r
  end
  local function scale(t, s)
    local r = {}
    for i = 1, #t do
      r[i] = {}
      for j = 1, #t[i] do r[i][j] = s * t[i][j] end
    end
    return r
  end
  local function zero(m, n) return scale(rand_table({ m, n }, 1), 0) end

  it("gives a, b and c their gradients", function()
    local m, k, n, alpha, beta = 3, 4, 5, 1.5, -0.5
    local a, b, c, w = setup(m, k, n)
    local d = weft.zeros({ m, n }, weft.float64, { requires_grad = true })
    local loss = weft.zeros(1, weft.float64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function()
      weft.matmul(a, b, c, d, alpha, beta)
      weft.launch(loss_k, { m, n }, { d, w, loss })
    end)
    tape:backward(loss)
    local wt = w:totable()
    close(ref(wt, transpose(b:totable()), zero(m, k), alpha, 0), a.grad:totable(), 1e-12, "a.grad")
    close(ref(transpose(a:totable()), wt, zero(k, n), alpha, 0), b.grad:totable(), 1e-12, "b.grad")
    close(scale(wt, beta), c.grad:totable(), 1e-12, "c.grad")
    close(zero(m, n), d.grad:totable(), 0, "d.grad (overwritten)")
    -- gradients accumulate over backward calls, and tape:zero clears them
    tape:backward(loss)
    close(scale(wt, 2 * beta), c.grad:totable(), 1e-12, "c.grad twice")
    tape:zero()
    close(zero(m, n), c.grad:totable(), 0, "c.grad zeroed")
  end)

  it("matches central differences, with c == d and in float32 batches", function()
    local m, k, n = 2, 3, 2
    local a, b, c, w = setup(m, k, n)
    local function f()
      local d = weft.clone(c)
      weft.matmul(a, b, d, d, 0.5, 3)
      local s = 0
      local dt, wt = d:totable(), w:totable()
      for i = 1, m do for j = 1, n do s = s + dt[i][j] * wt[i][j] end end
      return s
    end
    local d = weft.clone(c, { requires_grad = true })
    local c0 = weft.clone(c)
    local loss = weft.zeros(1, weft.float64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function()
      weft.matmul(a, b, d, d, 0.5, 3)
      weft.launch(loss_k, { m, n }, { d, w, loss })
    end)
    tape:backward(loss)
    -- d's gradient is that of its old values, the c of the product
    close(scale(w:totable(), 3), d.grad:totable(), 1e-12, "d.grad = beta w")
    weft.copy(c, c0)
    for _, x in ipairs { a, b } do
      local t = x:totable()
      local g = x.grad:totable()
      for i = 1, #t do
        for j = 1, #t[1] do
          local v = t[i][j]
          t[i][j] = v + 1e-6
          weft.copy(x, weft.array(t, weft.float64))
          local fp = f()
          t[i][j] = v - 1e-6
          weft.copy(x, weft.array(t, weft.float64))
          local fm = f()
          t[i][j] = v
          weft.copy(x, weft.array(t, weft.float64))
          close((fp - fm) / 2e-6, g[i][j], 1e-6)
        end
      end
    end
    -- batched, float32
    local A = weft.array(rand_table({ 2, 2, 3 }, 31), weft.float32, { requires_grad = true })
    local Bm = weft.array(rand_table({ 2, 3, 2 }, 32), weft.float32, { requires_grad = true })
    local Cm = weft.zeros({ 2, 2, 2 }, weft.float32, { requires_grad = true })
    local D = weft.zeros({ 2, 2, 2 }, weft.float32)
    D.grad = weft.ones({ 2, 2, 2 })
    local t2 = weft.Tape()
    t2:record(function() weft.batched_matmul(A, Bm, Cm, D, 2, 1) end)
    t2:backward{ grads = { [D] = weft.ones({ 2, 2, 2 }) } }
    local bt = Bm:totable()
    for bi = 1, 2 do
      for i = 1, 2 do
        for l = 1, 3 do close(2 * (bt[bi][l][1] + bt[bi][l][2]), A.grad:totable()[bi][i][l], 1e-5) end
      end
    end
    close({ { { 1, 1 }, { 1, 1 } }, { { 1, 1 }, { 1, 1 } } }, Cm.grad:totable(), 0)
  end)

  it("refuses a backward whose inputs a later launch overwrote", function()
    local a, b, c, w = setup(2, 2, 2)
    local d = weft.zeros({ 2, 2 }, weft.float64, { requires_grad = true })
    local bump = weft.kernel{ x = weft.array(weft.float64, 2), function(x)
      local i, j = weft.tid()
      x[i][j] = 1.0
    end }
    local loss = weft.zeros(1, weft.float64, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function()
      weft.matmul(a, b, c, d)
      weft.launch(loss_k, { 2, 2 }, { d, w, loss })
      weft.launch(bump, { 2, 2 }, { a })
    end)
    assert.has_error(function() tape:backward(loss) end,
      "tape:backward: launch 1 ('matmul') needs the values of 'a' for its gradient, but launch 3 "
      .. "('bump') overwrote that array afterwards (write the later result to another array)")
  end)
end)

-- CUDA through cuBLAS: under scripts/cuda-emu, with the stand-in library
-- tests/cuda/emu/cublas_emu.c (the emulator has no cuBLAS of its own).
describe("weft.matmul on CUDA (scripts/cuda-emu)", function()
  local emu = os.getenv("WEFT_CUDA_EMU_LIB")
  if not emu or not os.getenv("WEFT_LIBCUDA") then
    pending("not under scripts/cuda-emu")
    return
  end
  local stub = emu:gsub("[^/]*$", "") .. "libweft_cublasemu.so"
  pcall(ffi.cdef, "int setenv(const char *, const char *, int);")
  ffi.C.setenv("WEFT_LIBCUBLAS", stub, 1)
  local dev = { device = "cuda:0" }

  it("says which cuBLAS it loaded", function()
    assert.are.equal(stub, weft.blas_library("cuda:0"))
  end)

  it("matches the cpu in float32 and float64, batched too", function()
    for _, dt in ipairs { weft.float32, weft.float64 } do
      local a = weft.array(rand_table({ 5, 3 }, 41), dt)
      local b = weft.array(rand_table({ 3, 4 }, 42), dt)
      local c = weft.array(rand_table({ 5, 4 }, 43), dt)
      local want = weft.zeros({ 5, 4 }, dt)
      weft.matmul(a, b, c, want, 1.5, -2)
      local d = weft.zeros({ 5, 4 }, dt, dev)
      weft.matmul(a:to("cuda:0"), b:to("cuda:0"), c:to("cuda:0"), d, 1.5, -2)
      close(want:totable(), d:to("cpu"):totable(), dt == weft.float32 and 1e-5 or 1e-12)
    end
    local x = weft.array(rand_table({ 3, 2, 4 }, 44), weft.float32)
    local y = weft.array(rand_table({ 3, 4, 2 }, 45), weft.float32)
    local want = weft.zeros({ 3, 2, 2 })
    weft.batched_matmul(x, y, want, want)
    local z = weft.zeros({ 3, 2, 2 }, weft.float32, dev)
    weft.batched_matmul(x:to("cuda:0"), y:to("cuda:0"), z, z)
    close(want:totable(), z:to("cpu"):totable(), 1e-5)
  end)

  it("gives gradients on the device", function()
    local a = weft.array(rand_table({ 2, 3 }, 51), weft.float64, { device = "cuda:0", requires_grad = true })
    local b = weft.array(rand_table({ 3, 2 }, 52), weft.float64, { device = "cuda:0", requires_grad = true })
    local c = weft.zeros({ 2, 2 }, weft.float64, { device = "cuda:0", requires_grad = true })
    local d = weft.zeros({ 2, 2 }, weft.float64, dev)
    local tape = weft.Tape()
    tape:record(function() weft.matmul(a, b, c, d, 2, 0.5) end)
    tape:backward{ grads = { [d] = weft.ones({ 2, 2 }, weft.float64, dev) } }
    local bt = b:to("cpu"):totable()
    local ga = a.grad:to("cpu"):totable()
    for i = 1, 2 do
      for l = 1, 3 do close(2 * (bt[l][1] + bt[l][2]), ga[i][l], 1e-12) end
    end
    close({ { 0.5, 0.5 }, { 0.5, 0.5 } }, c.grad:to("cpu"):totable(), 0)
  end)

  it("refuses arrays on different devices, and says when cuBLAS is missing", function()
    local a = weft.zeros({ 2, 2 })
    assert.has_error(function()
      weft.matmul(a, weft.zeros({ 2, 2 }, weft.float32, dev), a, weft.zeros({ 2, 2 }))
    end, "weft.matmul: arrays on different devices (a on cpu, b on cuda:0)")
    local out = run_child([[
      local ffi = require "ffi"
      ffi.cdef "int setenv(const char *, const char *, int);"
      ffi.C.setenv("WEFT_LIBCUBLAS", "/nonexistent/libcublas.so", 1)
      local weft = require "weft"
      local z = weft.zeros({2, 2}, weft.float32, { device = "cuda:0" })
      local d = weft.zeros({2, 2}, weft.float32, { device = "cuda:0" })
      print(pcall(weft.matmul, z, z, d, d))
    ]])
    assert.is_truthy(out:find("weft.matmul: no cuBLAS for matrix products on CUDA devices (libcublas.so.12 "
                              .. "or .13 from the CUDA toolkit, or set WEFT_LIBCUBLAS): /nonexistent/libcublas.so",
                              1, true), out)
  end)
end)
