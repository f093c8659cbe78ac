-- expect: 5: cannot negate bool
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local b = x[0] > 1
  local c = -b
end }
