-- Fixed-size local arrays in kernels (weft issue 12, "Language"): Warp's
-- wp.vector(length=64, dtype=...) used as a stack, or a matrix as scratch.
-- `weft.vector(64, weft.int32)()` (the pinned type constructor, called at
-- compile time with constants) gives a zero local; `stack[k]` reads and
-- `stack[k] = v` writes with dynamic k, checked in release and debug mode
-- with an error naming the local; float ones are differentiable.
local weft, internal = require "weft", require "weft.internal"

local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil

-- a stack: push 0..n-1 squared, pop them all, sum
local stack_sum = weft.kernel{ out = weft.array(weft.int32), n = weft.int32, function(out, n)
  local stack = weft.vector(64, weft.int32)()
  local top = 0
  for k = 0, n - 1 do
    stack[top] = k * k
    top = top + 1
  end
  local s = 0
  while top > 0 do
    top = top - 1
    s = s + stack[top]
  end
  out[weft.tid()] = s
end }

-- a matrix and a vector as scratch, with a gradient through both
local scratch = weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32),
  function(x, out)
    local m = weft.matrix(4, 4, weft.float32)()
    for i = 0, 3 do
      for j = 0, 3 do m[i][j] = x[i] * weft.float32(j + 1) end
    end
    local buf = weft.vector(8, weft.float32)()
    for i = 0, 7 do buf[i] = x[i % 4] * x[i % 4] end
    local s = 0.0
    for i = 0, 3 do s = s + m[i][3 - i] + buf[7 - i] end
    out[0] = s
  end }

local function with_mode(mode, fn)
  local old = weft.config.mode
  weft.config.mode = mode
  local ok, err = pcall(fn)
  weft.config.mode = old
  if not ok then error(err, 0) end
end

describe("local arrays", function()
  it("work as a stack with dynamic indices", function()
    local out = weft.zeros(2, weft.int32)
    weft.launch(stack_sum, 2, { out, 10 })
    assert.same({ 285, 285 }, out:totable())
    weft.launch(stack_sum, 2, { out, 64 })
    local s = 0
    for k = 0, 63 do s = s + k * k end
    assert.same({ s, s }, out:totable())
  end)

  it("stop a launch that indexes past them, naming the local, in release and debug mode", function()
    for _, mode in ipairs { "release", "debug" } do
      with_mode(mode, function()
        local out = weft.zeros(1, weft.int32)
        local ok, err = pcall(weft.launch, stack_sum, 1, { out, 65 })
        assert.is_false(ok)
        assert.matches("local_array_spec.lua:17: index out of range for local 'stack' of type "
          .. "vec64i (0..63)", err, 1, true)
      end)
    end
    local rd = weft.kernel{ out = weft.array(weft.float32), k = weft.int32, function(out, k)
      local v = weft.vector(5, weft.float32)()
      out[0] = v[k]
    end }
    local out = weft.zeros(1)
    weft.launch(rd, 1, { out, 4 })
    local ok, err = pcall(weft.launch, rd, 1, { out, -1 })
    assert.is_false(ok)
    assert.matches("local_array_spec.lua:73: index out of range for local 'v' of type "
      .. "vec5f (0..4)", err, 1, true)
  end)

  it("hold matrices and vectors as scratch, with gradients matching finite differences", function()
    local xs = { 1, 2, 3, 4 }
    local x = weft.array(xs, weft.float32, { requires_grad = true })
    local out = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(scratch, 1, { x }, { outputs = { out } }) end)
    assert.equal(50, out[0])
    tape:backward(out)
    local function f(v)
      local s = 0
      for i = 1, 4 do s = s + v[i] * (5 - i) + v[i] * v[i] end
      return s
    end
    for i = 1, 4 do
      local p, m = { unpack(xs) }, { unpack(xs) }
      p[i], m[i] = xs[i] + 1e-3, xs[i] - 1e-3
      assert.near((f(p) - f(m)) / 2e-3, x.grad[i - 1], 1e-3)
    end
  end)

  it("compile to CUDA C that NVRTC and ptxas accept", function()
    if not have_nvrtc then return pending("NVRTC not found") end
    for _, k in ipairs { stack_sum, scratch } do
      for _, checks in ipairs { true, false } do
        local ptx = core.cuda_ptx(k:_module(), "compute_80",
                                  { checks = checks, names = internal.param_names(k) })
        assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
      end
    end
    assert.matches("weft_adj_scratch", (scratch:ptx("sm_80")))
  end)
end)

-- Dynamic accesses of aggregates of 5 or more components are EXTRACTD and
-- INSERTD; on the CPU a local array whose versions never overlap lives in
-- one stack slot updated in place (src/cpu/local.c). Where a version stays
-- live after a newer one is made, it must keep its own value.
describe("local arrays in memory", function()
  local copies = weft.kernel{ out = weft.array(weft.int32), k = weft.int32, function(out, k)
    local s = weft.vector(8, weft.int32)()
    for j = 0, 7 do s[j] = j + 10 end
    local a = s         -- a copy: keeps 10 + k
    s[k] = 99
    out[0] = a[k] + s[k] * 1000
    local b = s
    for t = 0, 2 do
      local c = b       -- changed each trip, b stays
      c[k + t] = t
      out[1 + t] = c[k + t] * 100 + b[k + t]
    end
    if k > 1 then s[k - 1] = -1 else out[4] = s[k] end
    out[5] = s[k - 1]
    out[6] = b[k - 1]
  end }

  it("keep each version's value where versions overlap", function()
    local out = weft.zeros(7, weft.int32)
    weft.launch(copies, 1, { out, 2 })
    assert.same({ 99012, 99, 113, 214, 0, -1, 11 }, out:totable())
    weft.launch(copies, 1, { out, 1 })
    assert.same({ 99011, 99, 112, 213, 99, 10, 10 }, out:totable())
  end)

  it("hold matrices written by dynamic row and column", function()
    local k = weft.kernel{ out = weft.array(weft.float32), function(out)
      local i = weft.tid()
      local m = weft.matrix(8, 8, weft.float32)()
      for r = 0, 7 do
        for c = 0, 7 do m[r][c] = weft.float32(r * 8 + c + i) end
      end
      local s = weft.float32(0)
      for t = 0, 63 do
        local r, c = (t * 5 + i) % 8, (t * 3) % 8
        s = s + m[r][c]
        m[c][r] = weft.float32(t)
      end
      out[i] = s
    end }
    local col = weft.kernel{ out = weft.array(weft.float32), c = weft.int32, function(out, c)
      local m = weft.matrix(8, 8, weft.float32)()
      m[c % 8][c] = 1.0
      out[0] = m[1][c - 1] + m[1][c]
    end }
    local out = weft.zeros(3)
    weft.launch(col, 1, { out, 1 })
    assert.equal(1, out[0])
    local ok, err = pcall(weft.launch, col, 1, { out, 8 })
    assert.is_false(ok)
    assert.matches("local_array_spec.lua:163: index out of range for a row of local 'm' of type "
      .. "vec8f (0..7)", err, 1, true)
    ok, err = pcall(weft.launch, col, 1, { out, 0 })
    assert.is_false(ok)
    assert.matches("local_array_spec.lua:164: index out of range for a row of local 'm' of type "
      .. "vec8f (0..7)", err, 1, true)
    weft.launch(k, 3, { out })
    for i = 0, 2 do
      local m = {}
      for r = 0, 7 do
        m[r] = {}
        for c = 0, 7 do m[r][c] = r * 8 + c + i end
      end
      local s = 0
      for t = 0, 63 do
        local r, c = (t * 5 + i) % 8, (t * 3) % 8
        s = s + m[r][c]
        m[c][r] = t
      end
      assert.equal(s, out[i])
    end
  end)

  it("keep a matrix's rows apart from copies of them", function()
    local k = weft.kernel{ out = weft.array(weft.float32), r = weft.int32, c = weft.int32,
      function(out, r, c)
        local m = weft.matrix(8, 8, weft.float32)()
        for i = 0, 7 do
          for j = 0, 7 do m[i][j] = weft.float32(i * 8 + j) end
        end
        local row = m[r]      -- a copy, written: m keeps its row
        row[c] = -1.0
        out[0] = m[r][c]
        out[1] = row[c]
        local row2 = m[r]     -- a copy, read after m changes
        m[r][c] = -2.0
        out[2] = row2[c]
        out[3] = m[r][c]
        local row3 = m[r]     -- written back to another row
        row3[c] = -3.0
        m[r + 1] = row3
        out[4] = m[r][c]
        out[5] = m[r + 1][c]
        m[2][c] = -4.0        -- a constant row
        out[6] = m[2][c] + m[2][c + 1]
      end }
    local out = weft.zeros(7)
    weft.launch(k, 1, { out, 3, 4 })
    assert.same({ 28, -1, 28, -2, -2, -3, -4 + 21 }, out:totable())
    -- the same row through another index value (c - 1 == r at run time)
    local k2 = weft.kernel{ o = weft.array(weft.float32), r = weft.int32, c = weft.int32,
      function(o, r, c)
        local m = weft.matrix(8, 8, weft.float32)()
        for i = 0, 7 do
          for j = 0, 7 do m[i][j] = weft.float32(i * 8 + j) end
        end
        local row = m[r]      -- read after m changes
        m[c - 1][c] = -2.0
        o[0] = row[c]
        o[1] = m[r][c]
        local row2 = m[r]     -- written back after m is read
        row2[c] = -5.0
        o[2] = m[c - 1][c]
        m[r] = row2
        o[3] = m[r][c]
      end }
    weft.launch(k2, 1, { out, 3, 4 })
    assert.same({ 28, -2, -2, -5 }, { out[0], out[1], out[2], out[3] })
  end)

  it("give gradients through dynamic reads and writes in loops", function()
    local k = weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32),
      function(x, out)
        local buf = weft.vector(16, weft.float32)()
        local n = x.shape[0]
        for i = 0, n - 1 do buf[(3 * i) % 16] = x[i] * x[i] end
        local s = 0.0
        local j = 0
        while j < n do
          s = s + buf[(3 * j) % 16] * weft.float32(j + 1)
          buf[(3 * j) % 16] = 0.0
          j = j + 1
        end
        out[0] = s
      end }
    local xs = { 1, 2, 3, 4, 5 }
    local x = weft.array(xs, weft.float32, { requires_grad = true })
    local out = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 1, { x }, { outputs = { out } }) end)
    assert.equal(1 + 8 + 27 + 64 + 125, out[0])
    tape:backward(out)
    for i = 1, 5 do assert.near(2 * xs[i] * i, x.grad[i - 1], 1e-4) end
  end)

  it("give gradients through a matrix indexed by dynamic row and column", function()
    local k = weft.kernel{ x = weft.array(weft.float32), out = weft.array(weft.float32),
      function(x, out)
        local m = weft.matrix(6, 6, weft.float32)()
        local n = x.shape[0]
        for i = 0, n - 1 do m[i % 6][(2 * i) % 6] = x[i] * x[i] end
        local s = 0.0
        for i = 0, n - 1 do
          local r, c = i % 6, (2 * i) % 6
          s = s + m[r][c] * weft.float32(i + 1) + m[c][r]
        end
        out[0] = s
      end }
    local xs = { 1, 2, 3, 4, 5 }
    local function f(v)
      local m = {}
      for r = 0, 5 do
        m[r] = {}
        for c = 0, 5 do m[r][c] = 0 end
      end
      for i = 0, 4 do m[i % 6][(2 * i) % 6] = v[i + 1] * v[i + 1] end
      local s = 0
      for i = 0, 4 do s = s + m[i % 6][(2 * i) % 6] * (i + 1) + m[(2 * i) % 6][i % 6] end
      return s
    end
    local x = weft.array(xs, weft.float32, { requires_grad = true })
    local out = weft.zeros(1, weft.float32, { requires_grad = true })
    local tape = weft.Tape()
    tape:record(function() weft.launch(k, 1, { x }, { outputs = { out } }) end)
    assert.equal(f(xs), out[0])
    tape:backward(out)
    for i = 1, 5 do
      local p, q = { unpack(xs) }, { unpack(xs) }
      p[i], q[i] = xs[i] + 1e-3, xs[i] - 1e-3
      assert.near((f(p) - f(q)) / 2e-3, x.grad[i - 1], 1e-3)
    end
    if have_nvrtc then -- the kernel and its adjoint through NVRTC and ptxas
      local ptx = k:ptx("sm_80")
      assert.matches("weft_adj_", ptx)
      assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
    end
  end)

  it("run on a CUDA device with the CPU's values", function() -- make test: under scripts/cuda-emu
    if require("helpers.cuda").missing() then return end
    local D = { device = "cuda:0" }
    local o1, o2 = weft.zeros(7, weft.int32), weft.zeros(7, weft.int32, D)
    weft.launch(copies, 1, { o1, 2 })
    weft.launch(copies, 1, { o2, 2 }, D)
    assert.same(o1:totable(), o2:to("cpu"):totable())
    local s1, s2 = weft.zeros(3, weft.int32), weft.zeros(3, weft.int32, D)
    weft.launch(stack_sum, 3, { s1, 64 })
    weft.launch(stack_sum, 3, { s2, 64 }, D)
    assert.same(s1:totable(), s2:to("cpu"):totable())
  end)
end)
