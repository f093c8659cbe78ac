-- expect: 5: bit_count expects an integer, got float32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.int32), function(x, y)
  local i = weft.tid()
  y[i] = weft.bit_count(x[i])
end }
