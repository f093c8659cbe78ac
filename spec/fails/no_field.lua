-- expect: 5: vec3f has no field 'q'
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local v = weft.vec3(1, 2, 3)
  x[0] = v.q
end }
