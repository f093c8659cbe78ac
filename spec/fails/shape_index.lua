-- expect: 4: x.shape must be indexed with a constant
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), n = weft.int32, function(x, n)
  x[0] = x.shape[n]
end }
