-- The scalar math builtins of the op table (src/ir/ir.h: erf, erfc,
-- erfinv, erfcinv, cbrt, exp2, expm1, log2, log10, log1p, trunc, rint) and
-- of lua/weft/stdlib.lua (step, nonzero, lerp, smoothstep, degrees,
-- radians, frac, isnan, isinf, isfinite): values against Warp 1.19 on the
-- CPU (spec/helpers/warp_math_ref.lua, written by warp_math_ref.py),
-- gradients against central differences in float64, CUDA C through NVRTC
-- and ptxas, and the same CUDA C run on the host (tests/cuda/shim.h).
local weft, internal = require "weft", require "weft.internal" -- internal: the parts' private table
local ref = dofile("spec/helpers/warp_math_ref.lua")
local shim = dofile("tests/cuda/shim.lua")

local f32, f64 = weft.float32, weft.float64
local core = internal.core
local have_nvrtc = core.cuda_nvrtc_version and core.cuda_nvrtc_version() ~= nil

local function num(v)
  if v == "nan" then return 0 / 0 elseif v == "inf" then return 1 / 0 elseif v == "-inf" then return -1 / 0 end
  return v
end

-- a kernel y[i] = fn(x[i]) for a builtin or stdlib function fn
local function unary_kernel(fn, t, rt)
  return weft.kernel{ x = weft.array(t), y = weft.array(rt or t), function(x, y)
    local i = weft.tid()
    y[i] = fn(x[i])
  end }
end

local function run(k, xs, t, rt)
  local x = weft.array(xs, t)
  local y = weft.zeros(#xs, rt or t)
  weft.launch(k, #xs, { x }, { outputs = { y } })
  return y:totable()
end

-- a and b agree within rel (relative to b), NaN with NaN, inf with inf
local function close(a, b, rel)
  if b ~= b then return a ~= a end
  if b == 1 / 0 or b == -1 / 0 then return a == b end
  return math.abs(a - b) <= rel * math.max(math.abs(b), 1e-300)
end

local FLOAT_FNS = { "erf", "erfc", "erfinv", "erfcinv", "cbrt", "log2", "log10", "trunc", "rint",
                    "frac", "degrees", "radians", "step", "nonzero" }
local PREDICATES = { "isnan", "isinf", "isfinite" }

describe("math builtins", function()
  it("match Warp 1.19 on the CPU in float32 and float64, nan, inf, 0, -0 and erfinv(+-1) included", function()
    local xs = {}
    for i, v in ipairs(ref.inputs) do xs[i] = num(v) end
    for _, t in ipairs { f32, f64 } do
      local want = ref[tostring(t):match("float%d+")]
      -- 2 ulp; Warp's float64 erfinv and erfcinv are accurate to about 1e-8
      -- only (erfinv(1e-8) = 8.86226920e-9 where sqrt(pi)/2 1e-8 =
      -- 8.86226925e-9): weft's are checked to the last bits below
      local ulp = t == f32 and 2 ^ -22 or 2 ^ -51
      for _, name in ipairs(FLOAT_FNS) do
        local got = run(unary_kernel(weft[name], t), xs, t)
        local rel = (t == f64 and name:match("^erf.*inv$")) and 1e-7 or ulp
        for i = 1, #xs do
          local w = num(want[name][i])
          -- Warp's float64 erfinv(1e-300) underflows to 0, and its
          -- erfcinv(c) is erfinv(1 - c): inf for c < 1e-16 (weft's tails
          -- are exact, see below)
          local tiny = rel == 1e-7 and (math.abs(got[i] - w) < 1e-290 or
            (name == "erfcinv" and xs[i] > 0 and xs[i] < 1e-16))
          assert(close(got[i], w, rel) or tiny,
            string.format("%s %s(%.17g) = %.17g, Warp gives %.17g", tostring(t), name, xs[i], got[i], w))
        end
      end
      for _, name in ipairs(PREDICATES) do
        local got = run(unary_kernel(weft[name], t, weft.bool), xs, t, weft.bool)
        for i = 1, #xs do
          assert(got[i] == want[name][i], string.format("%s(%g) = %s, Warp gives %s", name, xs[i],
            tostring(got[i]), tostring(want[name][i])))
        end
      end
    end
  end)

  it("erfinv and erfcinv invert erf and erfc to the last bits, in the tails too", function()
    local k = weft.kernel{ x = weft.array(f64), y = weft.array(f64), function(x, y)
      local i = weft.tid()
      y[2 * i] = weft.erf(weft.erfinv(x[i]))
      y[2 * i + 1] = weft.erfc(weft.erfcinv(x[i]))
    end }
    local xs = { 1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.3, 0.5, 0.7, 0.9, 0.999999 }
    local x = weft.array(xs, f64)
    local y = weft.zeros(2 * #xs, f64)
    weft.launch(k, #xs, { x }, { outputs = { y } })
    local r = y:totable()
    for i, v in ipairs(xs) do
      assert(close(r[2 * i - 1], v, 4e-16), string.format("erf(erfinv(%g)) = %.17g", v, r[2 * i - 1]))
      -- erfc(x) for small c: one ulp of x moves erfc by 2 x^2 ulp (x < 16)
      assert(close(r[2 * i], v, 1e-13), string.format("erfc(erfcinv(%g)) = %.17g", v, r[2 * i]))
    end
    local e = run(unary_kernel(weft.erfcinv, f64), { 0, 2, -0.5, 2.5, 1 }, f64)
    assert.same({ 1 / 0, -1 / 0 }, { e[1], e[2] })
    assert.is_true(e[3] ~= e[3] and e[4] ~= e[4])
    assert.equal(0, e[5])
    local n = run(unary_kernel(weft.erfinv, f32), { 1, -1, 1.5, -2 }, f32)
    assert.same({ 1 / 0, -1 / 0 }, { n[1], n[2] })
    assert.is_true(n[3] ~= n[3] and n[4] ~= n[4])
  end)

  it("exp2, expm1 and log1p (not in Warp) agree with C's libm", function()
    local ffi = require "ffi"
    local xs = { -3, -1e-10, 0, 1e-10, 0.5, 2, 10 }
    for _, name in ipairs { "exp2", "expm1", "log1p" } do
      local got = run(unary_kernel(weft[name], f64), xs, f64)
      for i, v in ipairs(xs) do
        assert.is_true(close(got[i], tonumber(ffi.C[name](v)), 0))
        assert.is_true(close(weft[name](v), got[i], 0)) -- the host fallback
      end
    end
  end)

  it("work on the host: libm fallbacks, Lua erfinv, kernel-side stdlib", function()
    assert.equal(0.5204998778130465, weft.erf(0.5))
    assert.is_true(close(weft.cbrt(-27), -3, 2 ^ -52))
    assert.equal(2, weft.rint(2.5))
    assert.equal(-2, weft.trunc(-2.5))
    assert.equal(1 / 0, weft.erfinv(1))
    local dev = run(unary_kernel(weft.erfinv, f64), { 0.5, -0.999, 1e-9 }, f64)
    assert.is_true(close(weft.erfinv(0.5), dev[1], 2 ^ -52))
    assert.is_true(close(weft.erfinv(-0.999), dev[2], 2 ^ -52))
    assert.is_true(close(weft.erfcinv(1 - 1e-9), dev[3], 1e-7))
  end)

  it("keep integers: step and nonzero in the argument's type, trunc and rint as the identity", function()
    local k = weft.kernel{ x = weft.array(weft.int32), y = weft.array(weft.int32), function(x, y)
      local i = weft.tid()
      y[3 * i] = weft.step(x[i])
      y[3 * i + 1] = weft.nonzero(x[i])
      y[3 * i + 2] = weft.trunc(x[i]) + weft.rint(x[i])
    end }
    local x = weft.array({ -4, 0, 9 }, weft.int32)
    local y = weft.zeros(9, weft.int32)
    weft.launch(k, 3, { x }, { outputs = { y } })
    assert.same({ 1, 1, -8, 0, 0, 0, 0, 1, 18 }, y:totable())
    local u = run(unary_kernel(weft.step, weft.uint8), { 0, 200 }, weft.uint8)
    assert.same({ 0, 0 }, u)
  end)

  it("lerp and the predicates take vectors", function()
    local k = weft.kernel{ a = weft.array(weft.vec3d), y = weft.array(weft.vec3d),
      b = weft.array(weft.bool), function(a, y, b)
        local i = weft.tid()
        y[i] = weft.lerp(a[i], a[i] * 3.0, weft.float64(0.25))
        b[2 * i] = weft.isnan(a[i])
        b[2 * i + 1] = weft.isfinite(a[i])
      end }
    local a = weft.array({ { 1, 2, 4 }, { 1, 0 / 0, 3 }, { 1 / 0, 0, 0 } }, weft.vec3d)
    local y, b = weft.zeros(3, weft.vec3d), weft.zeros(6, weft.bool)
    weft.launch(k, 3, { a }, { outputs = { y, b } })
    assert.same({ 1.5, 3, 6 }, y:totable()[1])
    assert.same({ false, true, true, false, false, false }, b:totable())
  end)

  it("isinf counts a vector with any infinite component, NaN components or not (Warp)", function()
    local vs = { { 1, 2, 4 }, { 0 / 0, 1 / 0, 3 }, { 1 / 0, 0, 0 }, { 0 / 0, 0, 0 },
                 { 0, 0, -1 / 0 }, { 0 / 0, -1 / 0, 0 / 0 }, { 6e4, -6e4, 0 } }
    local want = { false, true, true, false, true, true, false }
    for _, vt in ipairs { weft.vec3d, weft.vec3, weft.vec3h } do
      local k = weft.kernel{ a = weft.array(vt), b = weft.array(weft.bool), function(a, b)
        local i = weft.tid()
        b[i] = weft.isinf(a[i])
      end }
      local a, b = weft.array(vs, vt), weft.zeros(#vs, weft.bool)
      weft.launch(k, #vs, { a }, { outputs = { b } })
      local got = b:totable()
      assert.same(want, got)
      if vt == weft.vec3d and shim.available() then
        local sb = weft.zeros(#vs, weft.bool)
        shim.run(weft, k, #vs, { a, sb })
        assert.same(want, sb:totable())
      end
    end
  end)

  it("give float literal arguments the float type of the other arguments (float64, float16)", function()
    for _, t in ipairs { f64, weft.float16 } do
      local k = weft.kernel{ x = weft.array(t), y = weft.array(t), function(x, y)
        local i = weft.tid()
        y[4 * i] = weft.lerp(x[i], 1.0, 0.25)
        y[4 * i + 1] = weft.smoothstep(0.0, 1.0, x[i])
        y[4 * i + 2] = weft.smoothstep(x[i], 2.5, 1.5)
        y[4 * i + 3] = weft.lerp(0.5, x[i], x[i] > 1.0 and 0.5 or 0.75) -- a literal conditional too
      end }
      local x, y = weft.array({ 0.5, 2 }, t), weft.zeros(8, t)
      weft.launch(k, 2, { x }, { outputs = { y } })
      assert.same({ 0.625, 0.5, 0.5, 0.5, 1.75, 1, 0, 1.25 }, y:totable())
      if have_nvrtc then assert.is_true(core.cuda_assemble((k:ptx("sm_80")), "sm_80") > 0) end
    end
    -- a vector's float type, and a user weft.func generic in both arguments
    local scale = weft.func(function(a, s) return a * s end)
    local kv = weft.kernel{ v = weft.array(weft.vec3d), w = weft.array(weft.vec3d), function(v, w)
      local i = weft.tid()
      w[i] = weft.lerp(v[i], v[i] * 3.0, 0.25) + scale(v[i], 0.5)
    end }
    local w = weft.zeros(1, weft.vec3d)
    weft.launch(kv, 1, { weft.array({ { 2, 4, 8 } }, weft.vec3d) }, { outputs = { w } })
    assert.same({ { 4, 8, 16 } }, w:totable())
    -- integer literals keep int32 (a count or an index, perhaps), and
    -- float arguments of two types leave float literals float32
    for body, msg in pairs {
      ["y[i] = weft.smoothstep(0, 1, x[i])"] = "weft.smoothstep(int32, int32, float64): the " ..
        "arguments must share one float type; integer literals are int32 here (write 1.0, not 1)",
      ["y[i] = weft.lerp(x[i], weft.float32(1), 0.5)"] =
        "weft.lerp(float64, float32, float32): the arguments must share one float type",
    } do
      local src = "local weft = ...\nreturn weft.kernel{ x = weft.array(weft.float64), " ..
        "y = weft.array(weft.float64), function(x, y)\n  local i = weft.tid()\n  " .. body .. "\nend }"
      local ok, err = pcall(function() return assert(load(src))(weft):ir() end)
      assert.is_false(ok)
      assert.equal(":4: " .. msg, err:match("^%[string [^\n]-%](:%d+: [^\n]*)"))
    end
  end)

  it("reject integers where Warp takes floats only, at the call's line", function()
    local ok, err = pcall(function()
      return weft.kernel{ x = weft.array(weft.int32), function(x)
        local i = weft.tid()
        x[i] = weft.erf(x[i])
      end }:ptx("sm_80")
    end)
    assert.is_false(ok)
    assert.matches("builtins_math_spec.lua:%d+: erf expects a float argument, got int32", err)
  end)
end)

describe("bit builtins with Warp's names", function()
  it("match Warp 1.19 on int32 and uint32; bit.* keep LuaJIT's meaning", function()
    local k = weft.kernel{ a = weft.array(weft.int32), b = weft.array(weft.int32),
      o = weft.array(weft.int32), function(a, b, o)
        local i = weft.tid()
        o[i * 6 + 0] = weft.bit_and(a[i], b[i])
        o[i * 6 + 1] = weft.bit_or(a[i], b[i])
        o[i * 6 + 2] = weft.bit_xor(a[i], b[i])
        o[i * 6 + 3] = weft.invert(a[i])
        o[i * 6 + 4] = weft.lshift(a[i], b[i] % 8)
        o[i * 6 + 5] = weft.rshift(a[i], b[i] % 8)
      end }
    local a = weft.array({ -16, 5, 123456789, -1, 0, 2147483647 }, weft.int32)
    local b = weft.array({ 3, 12, 7, 1, 5, 2 }, weft.int32)
    local o = weft.zeros(36, weft.int32)
    weft.launch(k, 6, { a, b }, { outputs = { o } })
    -- from warp 1.19 on the CPU, the same kernel
    assert.same({ 0, -13, -13, 15, -128, -2, 4, 13, 9, -6, 80, 0, 5, 123456791, 123456786,
                  -123456790, -1377400192, 964506, 1, -1, -2, 0, -2, -1, 0, 5, 5, -1, 0, 0, 2,
                  2147483647, 2147483645, -2147483648, -4, 536870911 }, o:totable())
    local ku = weft.kernel{ ua = weft.array(weft.uint32), ub = weft.array(weft.uint32),
      uo = weft.array(weft.uint32), function(ua, ub, uo)
        local i = weft.tid()
        uo[i * 2] = weft.invert(ua[i])
        uo[i * 2 + 1] = weft.rshift(ua[i], ub[i])
      end }
    local uo = weft.zeros(4, weft.uint32)
    weft.launch(ku, 2, { weft.array({ 4294967280, 7 }, weft.uint32), weft.array({ 3, 1 }, weft.uint32) },
      { outputs = { uo } })
    assert.same({ 15, 536870910, 4294967288, 3 }, uo:totable())
    -- bit_count: set bits of the value's own width, as int32 (Warp's doc
    -- examples), at run time and folded from constants
    local kc = weft.kernel{ ca = weft.array(weft.int64), co = weft.array(weft.int32), function(ca, co)
      local i = weft.tid()
      co[i * 5] = weft.bit_count(ca[i])
      co[i * 5 + 1] = weft.bit_count(weft.int8(ca[i]))
      co[i * 5 + 2] = weft.bit_count(weft.uint16(ca[i]))
      co[i * 5 + 3] = weft.bit_count(weft.int32(ca[i]))
      co[i * 5 + 4] = weft.bit_count(45) + weft.bit_count(weft.int64(-1))
    end }
    local co = weft.zeros(10, weft.int32)
    weft.launch(kc, 2, { weft.array({ -1, 45 }, weft.int64) }, { outputs = { co } })
    assert.same({ 64, 8, 16, 32, 68, 4, 4, 4, 4, 68 }, co:totable())
    assert.same({ 4, 32, 0 }, { weft.bit_count(45), weft.bit_count(-1), weft.bit_count(0) })
    -- the CUDA C of both kernels through NVRTC and ptxas
    if have_nvrtc then
      for _, kk in ipairs { k, ku, kc } do
        assert.is_true(core.cuda_assemble((kk:ptx("sm_80")), "sm_80") > 0)
      end
      assert.matches("popc", (kc:ptx("sm_80")))
    end
    -- on the host, and bit.rshift still the logical shift
    assert.same({ 0, -13, -2, 268435455 }, { weft.bit_and(-16, 3), weft.bit_or(-16, 3),
      weft.rshift(-16, 3), bit.rshift(-16, 4) })
  end)
end)

describe("math builtins: gradients", function()
  -- y[i] = expr(a) with a = x[i], checked by weft.check_grad (central
  -- differences in float64)
  local function check(expr, lo, hi)
    local src = "local weft = ...\n" ..
      "return weft.kernel{ x = weft.array(weft.float64), y = weft.array(weft.float64),\n" ..
      "  function(x, y) local i = weft.tid(); local a = x[i]\n  y[i] = " .. expr .. "\nend }\n"
    local k = assert(load(src))(weft)
    local xs = {}
    for i = 1, 6 do xs[i] = lo + (hi - lo) * (i - 0.5) / 6 end
    local x, y = weft.array(xs, f64), weft.zeros(6, f64)
    local ok, e, where = weft.check_grad(k, 6, { x }, { y })
    assert(ok, expr .. ": " .. tostring(where) .. " (error " .. tostring(e) .. ")")
    local J = weft.jacobian(k, 6, { x }, { y }, 1, 1):totable()
    return J
  end

  it("match central differences in float64", function()
    local cases = {
      { "weft.erf(a)", -2, 2 }, { "weft.erfc(a)", -2, 2 }, { "weft.erfinv(a)", -0.95, 0.95 },
      { "weft.erfcinv(a)", 0.05, 1.95 }, { "weft.cbrt(a)", 0.1, 8 }, { "weft.cbrt(a)", -8, -0.1 },
      { "weft.exp2(a)", -3, 3 }, { "weft.expm1(a)", -3, 3 }, { "weft.log2(a)", 0.1, 5 },
      { "weft.log10(a)", 0.1, 5 }, { "weft.log1p(a)", -0.5, 5 },
      { "weft.degrees(a)", -3, 3 }, { "weft.radians(a)", -90, 90 }, { "weft.frac(a)", 0.1, 0.9 },
      { "weft.lerp(a, a * a, a)", -2, 2 }, { "weft.smoothstep(weft.float64(-1), weft.float64(1), a)", -1.5, 1.5 },
      { "weft.smoothstep(a, a * a + 2, weft.float64(0.5))", -0.5, 0.5 },
      { "weft.erf(weft.erfinv(a))", -0.9, 0.9 },
    }
    for _, c in ipairs(cases) do
      local J = check(c[1], c[2], c[3])
      local any = false
      for i = 1, 6 do any = any or J[i][i] ~= 0 end
      assert(any, c[1] .. ": gradient is zero everywhere")
    end
    -- d/da erf(erfinv(a)) = 1
    local J = check("weft.erf(weft.erfinv(a))", -0.9, 0.9)
    for i = 1, 6 do assert(close(J[i][i], 1, 1e-12), "erf(erfinv(a))' = " .. J[i][i]) end
  end)

  it("are zero for the piecewise constant ones", function()
    for _, expr in ipairs { "weft.trunc(a)", "weft.rint(a)", "weft.step(a)", "weft.nonzero(a)" } do
      local J = check(expr, -2.9, 2.9)
      for i = 1, 6 do assert.equal(0, J[i][i]) end
    end
  end)
end)

describe("math builtins: CUDA", function()
  local function all_fns(x, y)
    local i = weft.tid()
    local a = x[i]
    y[i] = weft.erf(a) + weft.erfc(a) + weft.erfinv(a * 0.5) + weft.erfcinv(a + 1) + weft.cbrt(a) +
      weft.exp2(a) + weft.expm1(a) + weft.log2(a + 2) + weft.log10(a + 2) + weft.log1p(a + 1) +
      weft.trunc(a * 3) + weft.rint(a * 3) + weft.frac(a * 3) + weft.degrees(a) + weft.radians(a) +
      weft.step(a) + weft.nonzero(a) + weft.lerp(a, a * 2, a) +
      weft.smoothstep(a, a + 1, a * a) + weft.select(weft.isnan(a) or weft.isinf(a), a, a * 2) +
      weft.select(weft.isfinite(a), a, a * 3)
  end

  it("compiles every new builtin (forward and adjoint) with NVRTC and assembles with ptxas", function()
    if not have_nvrtc then return pending("NVRTC is not available") end
    for _, t in ipairs { weft.float16, f32, f64 } do
      local k = weft.kernel{ x = weft.array(t), y = weft.array(t), all_fns }
      local src = k:source("cuda")
      for _, fn in ipairs { "erfinv", "erfcinv", "cbrt", "log1p", "expm1", "exp2", "rint", "trunc" } do
        assert.matches(fn .. (t == f64 and "" or "f") .. "(", src, 1, true)
      end
      local ptx = k:ptx("sm_80")
      assert.matches("%.entry%s+weft_adj_", ptx)
      assert.is_true(core.cuda_assemble(ptx, "sm_80") > 0)
    end
  end)

  it("runs on the host through the shim with the CPU backend's results", function()
    if not shim.available() then return pending("g++ is not available") end
    -- erfinv/erfcinv: CUDA-only functions that tests/cuda/shim.h supplies
    local k = weft.kernel{ x = weft.array(f64), y = weft.array(f64), function(x, y)
      local i = weft.tid()
      local a = x[i]
      y[i] = weft.erf(a) + weft.erfc(a) * 3 + weft.cbrt(a) + weft.exp2(a) + weft.expm1(a) +
        weft.log2(a + 2) + weft.log10(a + 2) + weft.log1p(a + 1) + weft.trunc(a * 3) +
        weft.rint(a * 3) * 5 + weft.frac(a * 3) + weft.degrees(a) + weft.step(a) + weft.nonzero(a) +
        weft.erfinv(a * 0.5) * 7 + weft.erfcinv(a + 1) * 11
    end }
    local xs = { -0.75, -0.5, 0, 0.25, 0.5, 0.9 }
    local cpu = run(k, xs, f64)
    local x, y = weft.array(xs, f64), weft.zeros(#xs, f64)
    shim.run(weft, k, #xs, { x, y })
    local got = y:totable()
    for i = 1, #xs do assert(close(got[i], cpu[i], 1e-14), string.format("%g: %.17g vs %.17g", xs[i], got[i], cpu[i])) end
  end)

  it("runs erfinv and erfcinv on the host through the shim, tails and edges included", function()
    if not shim.available() then return pending("g++ is not available") end
    local xs = { 1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.3, 0.5, 0.7, 0.9, 0.999999, 1, 1.5, 1.999,
                 1 - 1e-16, 0, -0.3, -0.999, -1, 2, 2.5, 0 / 0 }
    for _, t in ipairs { f64, f32 } do
      local k = weft.kernel{ x = weft.array(t), y = weft.array(t), function(x, y)
        local i = weft.tid()
        y[2 * i] = weft.erfinv(x[i])
        y[2 * i + 1] = weft.erfcinv(x[i])
      end }
      local x = weft.array(xs, t)
      local yc, ys = weft.zeros(2 * #xs, t), weft.zeros(2 * #xs, t)
      weft.launch(k, #xs, { x }, { outputs = { yc } })
      shim.run(weft, k, #xs, { x, ys })
      local cpu, got = yc:totable(), ys:totable()
      -- a few ulp: the CPU refines with Halley steps, the shim with Newton's
      local rel = t == f64 and 1e-14 or 2 ^ -23
      for i = 1, 2 * #xs do
        assert(close(got[i], cpu[i], rel), string.format("%s %s(%.17g): shim %.17g, cpu %.17g", tostring(t),
          i % 2 == 1 and "erfinv" or "erfcinv", xs[math.floor((i + 1) / 2)], got[i], cpu[i]))
      end
    end
  end)
end)
