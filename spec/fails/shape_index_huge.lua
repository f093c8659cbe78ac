-- expect: 4: shape index 4294967296 out of range for a 1-d array
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = x.shape[4294967296]
end }
