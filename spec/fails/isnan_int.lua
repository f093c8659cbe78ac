-- expect: 6: weft.isnan(int32): the argument must be a float scalar or a vector, matrix, quaternion or transform of floats
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local i = weft.tid()
  local bad =
    weft.isnan(x[i])
  if bad then x[i] = 0 end
end }
