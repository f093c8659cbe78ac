-- expect: 5: 'break' outside a loop
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = 1
  break
end }
