-- expect: 4: if condition must be a bool, got int32
local weft = require "weft"
return weft.kernel{ n = weft.int32, x = weft.array(weft.int32), function(n, x)
  if n then x[0] = 1 end
end }
