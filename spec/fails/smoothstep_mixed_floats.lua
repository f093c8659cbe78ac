-- expect: 5: weft.smoothstep(float64, float64, float32): the arguments must share one float type
local weft = require "weft"
return weft.kernel{ a = weft.array(weft.float64), x = weft.array(weft.float32), function(a, x)
  local i = weft.tid()
  x[i] = weft.smoothstep(a[0], a[1], x[i])
end }
