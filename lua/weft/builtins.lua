-- weft.builtins: the functions kernels may call, and the registry that maps
-- each builtin's Lua function value to its name for the kernel compiler.
--
-- Inside a kernel, a call is recognized by the value the name resolves to:
-- weft.sqrt and math.sqrt are the same function and both lower to "sqrt";
-- bit.band lowers to "band"; the global print to "print". On the host the
-- scalar math builtins work as plain Lua functions; the kernel-only ones
-- (tid, atomics, random numbers, vector math) raise a clear error.
local bit = require "bit"

local floor, ceil, abs = math.floor, math.ceil, math.abs

return function(weft)
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

  -- kernel-only builtins
  for _, name in ipairs {
    "tid", "dot", "cross", "length", "length_sq", "normalize", "outer", "transpose",
    "inverse", "determinant", "identity", "diag", "quat_from_axis_angle", "quat_rotate",
    "quat_rotate_inv", "quat_inverse", "quat_identity", "transform_point",
    "transform_vector", "transform_identity", "transform_get_translation",
    "transform_get_rotation", "atomic_add", "atomic_min", "atomic_max", "rand_init",
    "randf", "randi",
  } do
    weft[name] = kernel_only(name)
  end

  -- bit operations (LuaJIT's bit library)
  for name, fn in pairs { band = bit.band, bor = bit.bor, bxor = bit.bxor, bnot = bit.bnot,
                          lshift = bit.lshift, rshift = bit.rshift, arshift = bit.arshift } do
    reg(name, fn)
  end

  -- print inside kernels: the global print
  reg("print", print)
  weft.print = print

  -- Names a kernel may use as namespaces besides weft itself.
  weft._builtin_namespaces = { math = math, bit = bit }
end
