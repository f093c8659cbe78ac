-- expect: 4: sqrt expects 1 argument, got 2
local weft = require "weft"
return weft.kernel{ a = weft.float32, x = weft.array(weft.float32), function(a, x)
  x[0] = weft.sqrt(a, a)
end }
