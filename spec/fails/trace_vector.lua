-- expect: 4: weft.trace(vec3f): the arguments must be matrices
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.vec3), y = weft.array(weft.float32), function(x, y)
  y[0] = weft.trace(x[0])
end }
