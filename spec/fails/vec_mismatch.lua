-- expect: 6: cannot add vec3f and vec2f
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local a = weft.vec3(1, 2, 3)
  local b = weft.vec2(1, 2)
  local c = a + b
end }
