-- expect: 5: weft.noise: cannot convert vec2d to int32
local weft = require "weft"
return weft.kernel{ y = weft.array(weft.float32), function(y)
  local s = weft.rand_init(1)
  y[0] = weft.noise(s, weft.vec2d(1.0, 2.0))
end }
