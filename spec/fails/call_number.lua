-- expect: 5: cannot call a number
local weft = require "weft"
local N = 3
return weft.kernel{ x = weft.array(weft.int32), function(x)
  x[0] = N(2)
end }
