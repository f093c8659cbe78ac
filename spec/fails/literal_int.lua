-- expect: 4: cannot use the number 1.5 as int32 (not an integer)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  x[0] = 1.5
end }
