-- expect: 5: index 8 out of range for vec8i (0..7)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local stack = weft.vector(8, weft.int32)()
  stack[8] = x[0]
end }
