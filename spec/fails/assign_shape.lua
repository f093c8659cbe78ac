-- expect: 4: cannot assign to an array's shape
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x.shape[0] = 3
end }
