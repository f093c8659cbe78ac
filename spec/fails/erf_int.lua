-- expect: 5: erf expects a float argument, got int32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local i = weft.tid()
  x[i] = weft.erf(x[i])
end }
