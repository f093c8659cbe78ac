-- expect: 4: atomic_cas expects (array, index..., compare, value), got 3 arguments
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  weft.atomic_cas(x, 0, 1)
end }
