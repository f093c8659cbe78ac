-- expect: 5: cannot add float32 and int32
local weft = require "weft"
return weft.kernel{ a = weft.float32, b = weft.int32, x = weft.array(weft.float32), function(a, b, x)
  local i = weft.tid()
  x[i] = a + b
end }
