-- expect: 4: printf: '*' widths and precisions are not supported
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf("%*f\n", 5, x[0])
end }
