-- expect: 4: index must be an integer, got float32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), f = weft.float32, function(x, f)
  x[f] = 1.0
end }
