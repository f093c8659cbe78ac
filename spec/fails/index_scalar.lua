-- expect: 4: cannot index a value of type float32
local weft = require "weft"
return weft.kernel{ a = weft.float32, x = weft.array(weft.float32), function(a, x)
  x[0] = a[1]
end }
