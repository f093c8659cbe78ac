-- expect: 4: printf: the format must be a literal string
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf(x[0])
end }
