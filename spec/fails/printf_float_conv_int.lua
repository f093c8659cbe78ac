-- expect: 4: printf: '%.2f' expects a float, got int32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  weft.printf("%.2f\n", x[weft.tid()])
end }
