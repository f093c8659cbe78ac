-- expect: 4: sqrt expects a float argument, got int32
local weft = require "weft"
return weft.kernel{ n = weft.int32, x = weft.array(weft.float32), function(n, x)
  x[0] = weft.sqrt(n)
end }
