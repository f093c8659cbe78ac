-- expect: 4: expected float32, got float64
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), d = weft.float64, function(x, d)
  x[0] = d
end }
