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
