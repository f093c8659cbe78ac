-- expect: 4: cannot assign to parameter 'a' of type float32
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  a = a * 2
end }
