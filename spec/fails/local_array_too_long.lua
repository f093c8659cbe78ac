-- expect: 4: weft.vector: length must be an integer from 1 to 64, got 100
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local stack = weft.vector(100, weft.float32)()
  x[0] = stack[0]
end }
