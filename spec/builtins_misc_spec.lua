-- copysign (a row of the op table: llvm.copysign, CUDA copysign), Warp's
-- expect_eq/expect_neq/expect_near messages, and the aliases len,
-- div_approx and inverse_approx (lua/weft/stdlib.lua).
local weft, internal = require "weft", require "weft.internal"
local run_child = dofile("spec/helpers/run_child.lua")
local core = internal.core

describe("copysign", function()
  it("gives |x| with y's sign bit, -0 included, in float32 and float64", function()
    for _, t in ipairs { weft.float32, weft.float64 } do
      local k = weft.kernel{ x = weft.array(t), y = weft.array(t), r = weft.array(t), function(x, y, r)
        local i = weft.tid()
        r[i] = weft.copysign(x[i], y[i])
      end }
      local r = weft.zeros(5, t)
      weft.launch(k, 5, { weft.array({ 1.5, -2, 3, -0.25, 7 }, t), weft.array({ -1, 5, -0.0, 0.0, 1 / 0 }, t) },
        { outputs = { r } })
      local got = r:totable()
      assert.same({ -1.5, 2, -3, 0.25, 7 }, got)
    end
  end)

  it("has the gradient +-1 in x and 0 in y (central differences)", function()
    local k = weft.kernel{ x = weft.array(weft.float64), y = weft.array(weft.float64), function(x, y)
      local i = weft.tid()
      y[i] = weft.copysign(x[i] * x[i] - 1.0, x[i]) * 3.0
    end }
    local x, y = weft.array({ -1.7, -0.3, 0.4, 2.5 }, weft.float64), weft.zeros(4, weft.float64)
    local ok, err, where = weft.check_grad(k, 4, { x }, { y })
    assert(ok, tostring(where) .. " " .. tostring(err))
    local J = weft.jacobian(k, 4, { x }, { y }, 1, 1):totable()
    -- 3 (2x) s, s = +1 when x^2 - 1 and x have the same sign, else -1
    assert.same({ -3 * 2 * -1.7, 3 * 2 * -0.3, -3 * 2 * 0.4, 3 * 2 * 2.5 }, { J[1][1], J[2][2], J[3][3], J[4][4] })
  end)

  it("compiles to CUDA's copysign through NVRTC and ptxas", function()
    if not (core.cuda_nvrtc_version and core.cuda_nvrtc_version()) then return pending("NVRTC is not available") end
    local k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float64), function(x, y)
      local i = weft.tid()
      x[i] = weft.copysign(x[i], -1.0)
      y[i] = weft.copysign(y[i], weft.float64(x[i]))
    end }
    local src = k:source("cuda")
    assert.matches("copysignf(", src, 1, true)
    assert.is_true(core.cuda_assemble((k:ptx("sm_80")), "sm_80") > 0)
  end)
end)

describe("expect_eq, expect_neq, expect_near", function()
  it("print Warp's messages when the check fails, and nothing when it holds", function()
    local out = run_child([[
      local weft = require "weft"
      local k = weft.kernel{ x = weft.array(weft.float32), v = weft.array(weft.vec3), function(x, v)
        local i = weft.tid()
        weft.expect_eq(x[i], 1.0)
        weft.expect_neq(v[i], weft.vec3(1.0, 2.0, 3.0))
        weft.expect_near(x[i], 1.25, 0.5)
        weft.expect_near(v[i], weft.vec3(1.0, 2.0, 3.5))
      end }
      weft.launch(k, 1, { weft.array({ 2 }, weft.float32), weft.array({ { 1, 2, 3 } }, weft.vec3) })
      weft.launch(k, 1, { weft.array({ 1 }, weft.float32), weft.array({ { 1, 2, 3.5 } }, weft.vec3) })
      io.stdout:flush()
    ]])
    assert.equal("Error, expect_eq() failed:\n\t Expected:\t1\t\n\t Actual:\t2\n" ..
      "Error, expect_neq() failed:\n\t Expected:\t[1, 2, 3]\t\n\t Actual:\t[1, 2, 3]\n" ..
      "Error, expect_near() failed with tolerance\t0.5\t\n    Expected:\t1.25\t\n    Actual:\t2\t\n" ..
      "    Absolute difference:\t0.75\n" ..
      "Error, expect_near() failed with tolerance\t1e-06\t\n    Expected:\t[1, 2, 3.5]\t\n" ..
      "    Actual:\t[1, 2, 3]\t\n    Absolute difference:\t0.5\n", out)
  end)
end)

describe("len, div_approx, inverse_approx", function()
  it("are #x, / and inverse", function()
    local k = weft.kernel{ x = weft.array(weft.float32), v = weft.array(weft.vec3), y = weft.array(weft.float32),
      function(x, v, y)
        local i = weft.tid()
        y[i] = weft.float32(weft.len(v[i]) + weft.len(x)) + weft.div_approx(x[i], 4.0) +
          weft.inverse_approx(weft.mat22(2.0, 0.0, 0.0, 4.0))[1][1]
      end }
    local y = weft.zeros(2)
    weft.launch(k, 2, { weft.array({ 1, 2 }, weft.float32), weft.array({ { 1, 2, 3 }, { 0, 0, 0 } }, weft.vec3) },
      { outputs = { y } })
    assert.same({ 5.5, 5.75 }, y:totable())
  end)
end)

describe("component assignment: t[i] = x on transforms, q[i] and s[i]", function()
  -- t[i] is Warp's flat view of a transform: px py pz qx qy qz qw
  local function kernel(A, T, V3, Q, SV)
    return weft.kernel{ x = A, j = weft.array(weft.int32), y = A, function(x, j, y)
      local i = weft.tid()
      local t = T(V3(1.0, 2.0, 3.0), Q(0.0, 0.0, 0.0, 1.0))
      t[0] = x[i]
      t[j[i]] = x[i] * 3.0 -- a dynamic index
      t[6] = t[6] * x[i]
      local q = Q(0.0, 0.0, 0.0, 1.0)
      q[2] = x[i] * x[i]
      local s = SV(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
      s[j[i] - 1] = x[i]
      for c = 0, 6 do y[i * 9 + c] = t[c] end
      y[i * 9 + 7] = q[2] + q[3]
      y[i * 9 + 8] = s[0] + s[3] + s[5]
    end }
  end
  local function args(A)
    return { weft.array({ 2, 5 }, A), weft.array({ 4, 1 }, weft.int32) }
  end

  it("sets the component, constant or dynamic index, and keeps the others", function()
    local k = kernel(weft.array(weft.float64), weft.transformd, weft.vec3d, weft.quatd, weft.spatial_vectord)
    local y = weft.zeros(18, weft.float64)
    local a = args(weft.float64)
    weft.launch(k, 2, { a[1], a[2] }, { outputs = { y } })
    assert.same({ 2, 2, 3, 0, 6, 0, 2, 4 + 1, 1 + 2 + 6,
                  5, 15, 3, 0, 0, 0, 5, 25 + 1, 5 + 4 + 6 }, y:totable())
  end)

  it("has gradients that match central differences", function()
    local k = kernel(weft.array(weft.float64), weft.transformd, weft.vec3d, weft.quatd, weft.spatial_vectord)
    local a = args(weft.float64)
    local ok, err, where = weft.check_grad(k, 2, { a[1], a[2] }, { weft.zeros(18, weft.float64) })
    assert(ok, tostring(where) .. " " .. tostring(err))
  end)

  it("compiles to CUDA C through NVRTC and ptxas and runs on the shim as on the CPU", function()
    local k = kernel(weft.array(weft.float32), weft.transformf, weft.vec3f, weft.quatf, weft.spatial_vectorf)
    if core.cuda_nvrtc_version and core.cuda_nvrtc_version() then
      assert.is_true(core.cuda_assemble((k:ptx("sm_80")), "sm_80") > 0)
    end
    local shim = dofile("tests/cuda/shim.lua")
    if not shim.available() then return end
    local a = args(weft.float32)
    local yc, ys = weft.zeros(18, weft.float32), weft.zeros(18, weft.float32)
    weft.launch(k, 2, { a[1], a[2] }, { outputs = { yc } })
    shim.run(weft, k, 2, { a[1], a[2], ys })
    assert.same(yc:totable(), ys:totable())
  end)
end)

describe("atomic_cas", function()
  -- Warp 1.19 allows arrays of [u]int32, [u]int64, float32 and float64
  -- (its value_func checks the scalar type); vectors of those pass its
  -- type check but only its CPU build compiles them (a whole-vector
  -- compare, not atomic); weft refuses them (builtins_atomic_spec.lua).
  it("swaps on every scalar type Warp allows, on the CPU and through ptxas", function()
    for _, t in ipairs { weft.int32, weft.uint32, weft.int64, weft.uint64, weft.float32, weft.float64 } do
      local k = weft.kernel{ a = weft.array(t), o = weft.array(t), function(a, o)
        local i = weft.tid()
        -- one thread swaps 0 for 7 in a[0]; a[1] counts up through the CAS chain
        o[i] = weft.atomic_cas(a, 0, t(0), t(7))
        local old = a[1]
        while weft.atomic_cas(a, 1, old, old + t(1)) ~= old do old = a[1] end
      end }
      local a, o = weft.zeros(2, t), weft.zeros(16, t)
      weft.launch(k, 16, { a, o })
      assert.equal(7, tonumber(a[0]))
      assert.equal(16, tonumber(a[1]))
      local zeros = 0
      for _, v in ipairs(o:totable()) do
        if tonumber(v) == 0 then zeros = zeros + 1 else assert.equal(7, tonumber(v)) end
      end
      assert.equal(1, zeros)
      if core.cuda_nvrtc_version and core.cuda_nvrtc_version() then
        assert.is_true(core.cuda_assemble((k:ptx("sm_80")), "sm_80") > 0)
      end
    end
  end)

  it("refuses 16-bit arrays with Warp's set of types", function()
    local k = weft.kernel{ a = weft.array(weft.float16), function(a)
      weft.atomic_cas(a, 0, weft.float16(0.0), weft.float16(1.0))
    end }
    local ok, err = pcall(function() return k:ir() end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("builtins_misc_spec.lua:" .. (debug.getinfo(1, "l").currentline - 4) ..
      ": atomic_cas needs an array of 32- or 64-bit numbers, got array<f16,1>", 1, true), tostring(err))
  end)
end)
