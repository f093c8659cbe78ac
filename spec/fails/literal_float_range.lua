-- expect: 4: cannot use the number 1e+39 as float32 (out of range)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = x[1] * 1e39
end }
