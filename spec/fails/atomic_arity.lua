-- expect: 4: atomic_add on a 2-d array expects 2 indexes and a value, got 3 arguments
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32, 2), function(x)
  weft.atomic_add(x, 0, 1.0)
end }
