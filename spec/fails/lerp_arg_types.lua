-- expect: 6: weft.lerp(float64, int32, float64): the arguments must share one float type
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float64), n = weft.array(weft.int32), function(x, n)
  local i = weft.tid()
  -- a stdlib builtin (a weft.func in lua/weft/stdlib.lua): reported here
  x[i] = weft.lerp(x[i], n[i], 0.5)
end }
