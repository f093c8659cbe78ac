-- expect: 5: cannot index a number
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local n = 4
  n[0] = x[0]
end }
