-- expect: 4: printf: unknown conversion '%q'
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf("%q\n", x[0])
end }
