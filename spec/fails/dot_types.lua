-- expect: 4: dot: arguments have different types: vec3f and vec3d
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = weft.dot(weft.vec3(1, 2, 3), weft.vec3d(1, 2, 3))
end }
