-- expect: 5: cannot assign to field 'x' of a number
local weft = require "weft"
local N = 4
return weft.kernel{ x = weft.array(weft.float32), function(x)
  N.x = x[0]
end }
