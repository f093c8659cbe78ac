-- expect: 4: while condition must be a bool, got int32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  while x[0] do x[0] = x[0] - 1 end
end }
