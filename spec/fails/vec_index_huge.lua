-- expect: 5: index 2147483648 out of range for vec3f (0..2)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local v = weft.vec3(1, 2, 3)
  x[0] = v[2147483648]
end }
