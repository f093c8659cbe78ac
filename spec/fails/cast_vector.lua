-- expect: 4: cannot convert vec3f to float32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = weft.float32(weft.vec3(1, 2, 3))
end }
