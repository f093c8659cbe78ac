-- Reverse mode: every differentiable operator and builtin, checked against
-- central differences in float64 (weft.check_grad), one kernel per
-- expression in a and b (read from x[i] and z[i]).
local weft = require "weft"

local f64 = weft.float64

-- A kernel y[i] = <expr>, with a = x[i], b = z[i]; compiled from a string
-- chunk so that one template serves every expression.
local function kernel_of(expr)
  local src = "local weft = ...\n" ..
    "return weft.kernel{ x = weft.array(weft.float64), z = weft.array(weft.float64),\n" ..
    "  y = weft.array(weft.float64), function(x, z, y)\n" ..
    "  local i = weft.tid()\n" ..
    "  local a, b = x[i], z[i]\n" ..
    "  y[i] = " .. expr .. "\n" ..
    "end }\n"
  return assert(load(src))(weft)
end

local function inputs(n, lo, hi, seed)
  local xs, zs = {}, {}
  local s = seed or 7
  local function r()
    s = (s * 1103515245 + 12345) % 2147483648
    return lo + (hi - lo) * s / 2147483648
  end
  for i = 1, n do xs[i], zs[i] = r(), r() end
  return weft.array(xs, f64), weft.array(zs, f64)
end

-- check_grad on y = expr over random a, b in [lo, hi]; also checks that the
-- gradient is not identically zero unless `flat` is set.
local function check(expr, lo, hi, flat)
  local k = kernel_of(expr)
  local n = 6
  local x, z = inputs(n, lo, hi)
  local y = weft.zeros(n, f64)
  local ok, err, where = weft.check_grad(k, n, { x, z }, { y })
  assert(ok, expr .. ": " .. tostring(where) .. " (error " .. tostring(err) .. ")")
  if not flat then
    local J = weft.jacobian(k, n, { x, z }, { y }, 1, 1):totable()
    local K = weft.jacobian(k, n, { x, z }, { y }, 2, 1):totable()
    local any = false
    for i = 1, n do any = any or J[i][i] ~= 0 or K[i][i] ~= 0 end
    assert(any, expr .. ": gradient is zero everywhere")
  end
end

describe("autodiff: scalar operators", function()
  local cases = {
    { "a + b", -2, 2 }, { "a - b", -2, 2 }, { "a * b", -2, 2 }, { "a / b", 0.5, 2 },
    { "-a * b", -2, 2 }, { "a % b", 0.3, 3 }, { "a ^ b", 0.5, 2 }, { "(a * b) ^ 2", -2, 2 },
    { "a ^ 3.0", -2, 2 }, { "a * 2 + 1 - b / 4", -2, 2 },
    -- the division rule multiplies by a shared 1 / b and reuses a replayed
    -- quotient when there is one: divisor shared with sqrt, quotient read
    -- by another rule, divisor depending on the numerator, chained divides
    { "a / weft.sqrt(a * a + b * b + 0.01)", -2, 2 }, { "(a / b) * (a / b)", 0.5, 2 },
    { "a / (a * b + 1)", 0.2, 2 }, { "b / a / a", 0.5, 2 }, { "a / a", 0.5, 2 },
  }
  for _, c in ipairs(cases) do
    it(c[1], function() check(c[1], c[2], c[3]) end)
  end
end)

describe("autodiff: math builtins", function()
  local cases = {
    { "weft.sqrt(a) * b", 0.2, 2 }, { "weft.exp(a) + b", -1, 1 }, { "weft.log(a) * b", 0.2, 2 },
    { "weft.sin(a * b)", -2, 2 }, { "weft.cos(a) * b", -2, 2 }, { "weft.tan(a) + b", -1, 1 },
    { "weft.asin(a) * b", -0.9, 0.9 }, { "weft.acos(a) * b", -0.9, 0.9 },
    { "weft.atan(a) * b", -2, 2 }, { "weft.atan2(a, b)", 0.2, 2 }, { "weft.atan2(-a, -b)", 0.2, 2 },
    { "weft.sinh(a) * b", -1, 1 }, { "weft.cosh(a) * b", -1, 1 }, { "weft.tanh(a) * b", -1, 1 },
    { "weft.pow(a, b)", 0.5, 2 }, { "weft.min(a, b) * 2", -2, 2 }, { "weft.max(a, b) * 2", -2, 2 },
    { "weft.abs(a - 3) * b", 0, 1 }, { "weft.abs(a) * b", 0.1, 1 },
    { "weft.clamp(a, 0.3, 0.6) * b", 0, 1 }, { "weft.sign(a - 0.5) * b", 0, 1 },
    { "weft.floor(a * 3) * b", 0, 2 }, { "weft.ceil(a * 3) * b", 0, 2 },
    { "weft.round(a * 3) * b", 0, 2 }, { "math.sqrt(a * a + b * b)", 0.2, 2 },
    { "math.exp(-a * b) * math.sin(b)", -1, 1 },
    { "weft.select(a > b, a * a, b * 3)", -1, 1 }, { "(a > b) and a * b or b - a", -1, 1 },
    { "weft.float64(weft.int32(a * 10)) * b", 0, 3 },
  }
  for _, c in ipairs(cases) do
    it(c[1], function() check(c[1], c[2], c[3], c[4]) end)
  end
  it("piecewise constant functions have zero derivative", function()
    local k = kernel_of("weft.floor(a * 3) + weft.ceil(b) + weft.round(a) + weft.sign(b)")
    local x, z = inputs(4, 0.1, 2)
    local J = weft.jacobian(k, 4, { x, z }, { weft.zeros(4, f64) }):totable()
    for i = 1, 4 do
      for j = 1, 4 do assert.are.equal(0, J[i][j]) end
    end
  end)
end)

describe("autodiff: vector and matrix builtins", function()
  local cases = {
    "weft.length(weft.vec3d(a, b, a * b))",
    "weft.dot(weft.vec3d(a, b, 1.0), weft.vec3d(b, a * a, a))",
    "weft.cross(weft.vec3d(a, b, 1.0), weft.vec3d(b, 2.0, a)).y",
    "weft.normalize(weft.vec3d(a, b, 0.5)).x",
    "weft.length_sq(weft.vec3d(a, b, a) * 2.0 - weft.vec3d(b, b, b))",
    "weft.determinant(weft.mat33d(a, b, 1.0, 2.0, a * b, 0.5, b, 1.0, a))",
    "weft.inverse(weft.mat33d(a + 3, b, 1.0, 0.5, a * b + 3, 0.5, b, 1.0, a + 3))[1][2]",
    "(weft.mat33d(a, b, 1.0, 2.0, a * b, 0.5, b, 1.0, a) * weft.vec3d(b, a, 1.0)).z",
    "weft.transpose(weft.mat33d(a, b, 1.0, 2.0, a * b, 0.5, b, 1.0, a))[1][0]",
    "weft.outer(weft.vec3d(a, b, 1.0), weft.vec3d(b, a, 2.0))[0][1]",
    "weft.quat_rotate(weft.quat_from_axis_angle(weft.normalize(weft.vec3d(a, b, 1.0)), b), " ..
      "weft.vec3d(1.0, a, 0.0)).y",
  }
  for _, e in ipairs(cases) do
    it(e, function() check(e, 0.2, 1.5) end)
  end
end)
