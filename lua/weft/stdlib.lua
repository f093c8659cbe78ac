-- weft.stdlib: the builtins that compose other builtins, written once here
-- as weft.func. Both backends compile them and autodiff differentiates them
-- like any weft.func, so they need no row in the op table (src/ir/ir.h) and
-- no derivative rule. Names and semantics are Warp's (warp/_src/builtins.py,
-- warp/native/builtin.h); where a result must have the argument's type, a
-- typed value is built from weft.sign (+-1 for every input, NaN included),
-- since an untyped literal would take its default type.
--
-- Each builtin checks its argument types before its body is compiled
-- (resolve.c: check_builtin), so a wrong call is reported at the user's
-- call as "weft.lerp(float64, int32, float32): <what is wrong>" rather
-- than as a type error on a line of this file. A check gets one
-- description per argument, { name = "vec3d", kind = "vec", scalar =
-- "float64", float = true, literal = "int" | "float" | nil }, and returns
-- nil or the message. Any other error in a builtin's body is still
-- reported at the user's call (src/front/api.c: wf_front_error).
return function(weft)
  local func, select, sign, trunc, clamp = weft.func, weft.select, weft.sign, weft.trunc, weft.clamp
  local min, max = weft.min, weft.max

  -- weft[name] = a weft.func of fn whose arguments check accepts
  local function builtin(name, check, fn)
    local f = func{ name = name, fn }
    f._builtin = check
    weft[name] = f
  end

  -- a hint when an integer literal is among the arguments: it is int32
  local function literal_hint(...)
    for _, d in ipairs { ... } do
      if d.literal == "int" then return "; integer literals are int32 here (write 1.0, not 1)" end
    end
    return ""
  end

  local function scalar_arg(x)
    if x.kind ~= "int" and x.kind ~= "float" then
      return "the argument must be an int or float scalar"
    end
  end

  local function float_arg(x)
    if not x.float then
      return "the argument must be a float scalar or a vector, matrix, quaternion or transform of "
        .. "floats" .. literal_hint(x)
    end
  end

  -- a, b and t (or x) of one float type
  local function one_float(a, b, t)
    if not (a.float and b.float and t.float and a.scalar == b.scalar and b.scalar == t.scalar) then
      return "the arguments must share one float type" .. literal_hint(a, b, t)
    end
  end

  local function lerp_args(a, b, t)
    if a.float and a.name == b.name then
      if t.kind ~= "float" or t.scalar ~= a.scalar then
        return "t must be a " .. a.scalar .. " scalar" .. literal_hint(t)
      end
      return nil
    end
    return one_float(a, b, t) or "a and b must have the same type"
  end

  local function smoothstep_args(a, b, x)
    local bad = one_float(a, b, x)
    if bad then return bad end
    if a.kind ~= "float" or b.kind ~= "float" or x.kind ~= "float" then
      return "the arguments must be float scalars"
    end
  end

  -- step(x): 1 if x < 0, else 0, in x's type (unsigned: always 0)
  builtin("step", scalar_arg, function(x)
    local s = sign(x)
    return select(x < 0, s - s, 1)
  end)

  -- nonzero(x): 1 if x ~= 0 (NaN included), else 0, in x's type
  builtin("nonzero", scalar_arg, function(x)
    local s = sign(x)
    return select(x == 0, s * s, 0)
  end)

  -- lerp(a, b, t) = a * (1 - t) + b * t; a and b scalars, vectors,
  -- matrices or quaternions of t's scalar type
  builtin("lerp", lerp_args, function(a, b, t)
    return a * (1 - t) + b * t
  end)

  -- smoothstep(a, b, x): the cubic Hermite step of x between edges a and b
  builtin("smoothstep", smoothstep_args, function(a, b, x)
    local t = clamp((x - a) / (b - a), 0, 1)
    return t * t * (3 - 2 * t)
  end)

  -- degrees and radians (constants as Warp's RAD_TO_DEG and DEG_TO_RAD)
  builtin("degrees", float_arg, function(x)
    return x * 57.29577951308232087679
  end)
  builtin("radians", float_arg, function(x)
    return x * 0.01745329251994329577
  end)

  -- frac(x) = x - trunc(x), with the sign of x
  builtin("frac", float_arg, function(x)
    return x - trunc(x)
  end)

  -- isnan(x): x is NaN (a vector: any component is)
  builtin("isnan", float_arg, function(x)
    return x ~= x
  end)

  -- isfinite(x): x is neither NaN nor infinite (a vector: every component;
  -- x - x is 0 exactly for finite x, NaN otherwise)
  builtin("isfinite", float_arg, function(x)
    local d = x - x
    return d == d
  end)

  -- isinf(x): x is +-infinity (a vector: any component is, NaN ones or
  -- not, as Warp). max(x, 0) - min(x, 0) is |x| with each NaN component
  -- made 0 (min and max return their second operand when the first is
  -- NaN); the zero is s - s, exact in x's type. inf - inf is NaN.
  builtin("isinf", float_arg, function(x)
    local s = sign(x)
    local z = s - s
    local a = max(x, z) - min(x, z)
    local d = a - a
    return d ~= d
  end)
end
