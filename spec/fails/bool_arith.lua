-- expect: 5: cannot add bool values
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local b = x[0] > 0
  x[1] = b + 1
end }
