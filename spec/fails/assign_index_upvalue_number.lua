-- expect: 5: cannot index a number
local weft = require "weft"
local N = weft.constant(4)
return weft.kernel{ x = weft.array(weft.float32), function(x)
  N[weft.tid()] = x[0]
end }
