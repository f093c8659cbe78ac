-- expect: 5: weft.lerp(vec3d, vec3d, float32): t must be a float64 scalar
local weft = require "weft"
-- a builtin misused in the user's weft.func: at that call, then the kernel's
local blend = weft.func(function(a, b, t)
  return weft.lerp(a, b, t)
end)
return weft.kernel{ v = weft.array(weft.vec3d), t = weft.float32, function(v, t)
  local i = weft.tid()
  v[i] = blend(v[i], v[i] * 2.0, t)
end }
-- called from: 9
