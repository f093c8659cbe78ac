-- expect: 4: printf: '%n' is not allowed
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  weft.printf("abc%n\n", x[0])
end }
