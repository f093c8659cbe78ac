-- expect: 5: printf: '%5d' expects an integer, got float32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  weft.printf("i=%d x=%5d\n", i, x[i])
end }
