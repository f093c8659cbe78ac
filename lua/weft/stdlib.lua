-- weft.stdlib: the builtins that compose other builtins, written once here
-- as weft.func. Both backends compile them and autodiff differentiates them
-- like any weft.func, so they need no row in the op table (src/ir/ir.h) and
-- no derivative rule. Names and semantics are Warp's (warp/_src/builtins.py,
-- warp/native/builtin.h); where a result must have the argument's type, a
-- typed value is built from weft.sign (+-1 for every input, NaN included),
-- since an untyped literal would take its default type.
return function(weft)
  local func, select, sign, trunc, clamp = weft.func, weft.select, weft.sign, weft.trunc, weft.clamp
  local min, max = weft.min, weft.max

  -- step(x): 1 if x < 0, else 0, in x's type (unsigned: always 0)
  weft.step = func(function(x)
    local s = sign(x)
    return select(x < 0, s - s, 1)
  end)

  -- nonzero(x): 1 if x ~= 0 (NaN included), else 0, in x's type
  weft.nonzero = func(function(x)
    local s = sign(x)
    return select(x == 0, s * s, 0)
  end)

  -- lerp(a, b, t) = a * (1 - t) + b * t; a and b scalars, vectors,
  -- matrices or quaternions of t's scalar type
  weft.lerp = func(function(a, b, t)
    return a * (1 - t) + b * t
  end)

  -- smoothstep(a, b, x): the cubic Hermite step of x between edges a and b
  weft.smoothstep = func(function(a, b, x)
    local t = clamp((x - a) / (b - a), 0, 1)
    return t * t * (3 - 2 * t)
  end)

  -- degrees and radians (constants as Warp's RAD_TO_DEG and DEG_TO_RAD)
  weft.degrees = func(function(x)
    return x * 57.29577951308232087679
  end)
  weft.radians = func(function(x)
    return x * 0.01745329251994329577
  end)

  -- frac(x) = x - trunc(x), with the sign of x
  weft.frac = func(function(x)
    return x - trunc(x)
  end)

  -- isnan(x): x is NaN (a vector: any component is)
  weft.isnan = func(function(x)
    return x ~= x
  end)

  -- isfinite(x): x is neither NaN nor infinite (a vector: every component;
  -- x - x is 0 exactly for finite x, NaN otherwise)
  weft.isfinite = func(function(x)
    local d = x - x
    return d == d
  end)

  -- isinf(x): x is +-infinity (a vector: any component is, NaN ones or
  -- not, as Warp). max(x, 0) - min(x, 0) is |x| with each NaN component
  -- made 0 (min and max return their second operand when the first is
  -- NaN); the zero is s - s, exact in x's type. inf - inf is NaN.
  weft.isinf = func(function(x)
    local s = sign(x)
    local z = s - s
    local a = max(x, z) - min(x, z)
    local d = a - a
    return d ~= d
  end)
end
