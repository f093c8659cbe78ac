-- expect: 4: vec3f expects 3 numbers (or none), got 2 arguments
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.vec3), function(x)
  x[0] = weft.vec3(1, 2)
end }
