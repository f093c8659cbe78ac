-- expect: 4: '#' needs an array, got int32
local weft = require "weft"
return weft.kernel{ n = weft.int32, x = weft.array(weft.int32), function(n, x)
  x[0] = #n
end }
