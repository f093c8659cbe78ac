-- weft.builtins: the functions kernels may call, and the registry that maps
-- each builtin's Lua function value to its name for the kernel compiler.
--
-- Inside a kernel, a call is recognized by the value the name resolves to:
-- weft.sqrt and math.sqrt are the same function and both lower to "sqrt";
-- bit.band lowers to "bit.band"; the global print to "print". On the host the
-- scalar math builtins work as plain Lua functions; the kernel-only ones
-- (tid, atomics, random numbers, vector math) raise a clear error.
local bit = require "bit"
local ffi = require "ffi"

local floor, ceil, abs, exp, log, sqrt = math.floor, math.ceil, math.abs, math.exp, math.log, math.sqrt

-- libm functions Lua's math library lacks, for the host-side fallbacks
require("weft.cdef").declare [[
double erf(double); double erfc(double); double cbrt(double); double exp2(double);
double expm1(double); double log2(double); double log10(double); double log1p(double);
double trunc(double); double rint(double);
]]
local libm = ffi.C

-- Inverse error functions on the host (the kernels' are in src/cpu/rtlib.c,
-- same method): an estimate refined with Halley steps on erf or erfc; the
-- tails solve erfc(x) = c with the exact c = 1 - |y|.
local TWO_SQRTPI = 1.12837916709551257390
local function erfinv_guess(l)
  local k = 2 / (math.pi * 0.147) + l / 2
  return sqrt(sqrt(k * k - l / 0.147) - k)
end
local function solve(f, x, target, sgn)
  for _ = 1, 12 do
    local g = f(x) - target
    local dx = g / (sgn * TWO_SQRTPI * exp(-x * x) + x * g)
    x = x - dx
    if not (abs(dx) > 2 ^ -53 * abs(x)) then break end -- luacheck: ignore 581 (a NaN step stops too)
  end
  return x
end
local function erfcinv_small(c) -- 0 < c <= 1
  return solve(libm.erfc, erfinv_guess(log(c * (2 - c))), c, -1)
end
local function erfinv(y)
  local ay = abs(y)
  if not (ay <= 1) then return 0 / 0 end -- luacheck: ignore 581 (NaN too)
  if ay == 0 then return y end
  if ay == 1 then return y * math.huge end
  local x
  if ay > 0.5 then x = erfcinv_small(1 - ay)
  else x = solve(libm.erf, erfinv_guess(libm.log1p(-ay * ay)), ay, 1) end
  return y < 0 and -x or x
end
local function erfcinv(c)
  if not (c >= 0 and c <= 2) then return 0 / 0 end
  if c == 0 then return math.huge end
  if c == 2 then return -math.huge end
  if c > 1 then return -erfcinv_small(2 - c) end
  if c >= 0.5 then return erfinv(1 - c) end
  return erfcinv_small(c)
end

return function(weft, P)
  local registry = {}   -- function value -> builtin name
  weft._builtins = registry

  local function reg(name, fn)
    registry[fn] = registry[fn] or name
    return fn
  end

  -- kernel-only builtins: a distinct function each, raising on the host
  local function kernel_only(name)
    return reg(name, function()
      error("weft." .. name .. " can only be called inside a kernel", 2)
    end)
  end

  -- math: same functions as Lua's, so math.* and weft.* both resolve
  local mathfns = {
    sqrt = math.sqrt, sin = math.sin, cos = math.cos, tan = math.tan, asin = math.asin,
    acos = math.acos, atan = math.atan, atan2 = math.atan2, exp = math.exp, log = math.log,
    pow = math.pow, sinh = math.sinh, cosh = math.cosh, tanh = math.tanh, floor = math.floor,
    ceil = math.ceil, abs = math.abs, min = math.min, max = math.max,
    -- LuaJIT's, lowered in src/front/luamath.c
    log10 = math.log10, fmod = math.fmod, ldexp = math.ldexp, frexp = math.frexp,
    modf = math.modf, rad = math.rad, deg = math.deg,
  }
  for name, fn in pairs(mathfns) do
    weft[name] = reg(name, fn)
  end

  -- round half away from zero (C's round), sign, clamp, floordiv, select, where
  weft.round = reg("round", function(x)
    if x >= 0 then return floor(x + 0.5) end
    return ceil(x - 0.5)
  end)
  -- Warp's sign: -1 below zero, else 1 (also at zero), as in kernels
  weft.sign = reg("sign", function(x)
    if x < 0 then return -1 end
    return 1
  end)
  weft.clamp = reg("clamp", function(x, lo, hi)
    if x < lo then return lo elseif x > hi then return hi end
    return x
  end)
  weft.floordiv = reg("floordiv", function(a, b) return floor(a / b) end)
  -- truncating division (C's and Warp's `/` on integers)
  weft.idiv = reg("idiv", function(a, b)
    local q = a / b
    if q < 0 then return ceil(q) end
    return floor(q)
  end)
  -- Warp's select: select(cond, value_if_false, value_if_true)
  weft.select = reg("select", function(c, a, b)
    if c then return b end
    return a
  end)
  -- where(cond, value_if_true, value_if_false)
  weft.where = reg("where", function(c, a, b)
    if c then return a end
    return b
  end)

  -- The op table's builtins (src/ir/ir.h rows flagged WF_OPF_BUILTIN) that
  -- are not above: a host fallback from this table, else kernel-only.
  local host = {
    erf = libm.erf, erfc = libm.erfc, erfinv = erfinv, erfcinv = erfcinv, cbrt = libm.cbrt,
    exp2 = libm.exp2, expm1 = libm.expm1, log2 = libm.log2, log10 = libm.log10,
    log1p = libm.log1p, trunc = libm.trunc, rint = libm.rint,
    bit_count = function(x) -- of the 32-bit value, as LuaJIT's bit library sees x
      local n, v = 0, bit.tobit(x)
      while v ~= 0 do v, n = bit.band(v, v - 1), n + 1 end
      return n
    end,
  }
  local core = P and P.core or weft._core
  for _, name in ipairs(core.builtin_ops()) do
    if not weft[name] then
      local fn = host[name]
      weft[name] = fn and reg(name, function(x) return tonumber(fn(x)) end) or kernel_only(name)
    end
  end

  -- kernel-only builtins
  for _, name in ipairs {
    "tid", "dot", "cross", "length", "length_sq", "normalize", "outer", "transpose",
    "inverse", "determinant", "identity", "diag", "quat_from_axis_angle", "quat_rotate",
    "quat_rotate_inv", "quat_inverse", "quat_identity", "transform_point",
    "transform_vector", "transform_identity", "transform_get_translation",
    "transform_get_rotation", "atomic_add", "atomic_min", "atomic_max", "rand_init",
    "randf", "randi", "matrix_from_rows", "matrix_from_cols", "randn", "randu", "sample_triangle",
    "sample_unit_ring", "sample_unit_disk", "sample_unit_sphere_surface", "sample_unit_sphere",
    "sample_unit_hemisphere_surface", "sample_unit_hemisphere", "sample_unit_square",
    "sample_unit_cube", "atomic_sub", "atomic_exch", "atomic_cas", "atomic_and", "atomic_or",
    "atomic_xor",
  } do
    weft[name] = kernel_only(name)
  end

  -- bit operations: LuaJIT's bit library (bit.rshift is a logical shift)
  for name, fn in pairs { band = bit.band, bor = bit.bor, bxor = bit.bxor, bnot = bit.bnot,
                          lshift = bit.lshift, rshift = bit.rshift, arshift = bit.arshift } do
    reg("bit." .. name, fn)
  end
  -- and Warp's names (rshift is C's >>: arithmetic on signed integers)
  weft.bit_and = reg("bit_and", function(a, b) return bit.band(a, b) end)
  weft.bit_or = reg("bit_or", function(a, b) return bit.bor(a, b) end)
  weft.bit_xor = reg("bit_xor", function(a, b) return bit.bxor(a, b) end)
  weft.invert = reg("invert", function(a) return bit.bnot(a) end)
  weft.lshift = reg("lshift", function(a, b) return bit.lshift(a, b) end)
  weft.rshift = reg("rshift", function(a, b) return bit.arshift(a, b) end)

  -- print inside kernels: the global print
  reg("print", print)
  weft.print = print
  -- Warp's printf: C's format, no newline added (on the host: string.format)
  weft.printf = reg("printf", function(fmt, ...) io.write(string.format(fmt, ...)) end)

  -- Names a kernel may use as namespaces besides weft itself.
  weft._builtin_namespaces = { math = math, bit = bit }
end
