-- expect: 5: cannot multiply mat33f and vec2f
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local m = weft.mat33()
  local v = m * weft.vec2(1, 2)
end }
