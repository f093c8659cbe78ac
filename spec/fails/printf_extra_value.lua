-- expect: 5: printf: more values than the format uses
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf("%f\n",
    x[0], x[1])
end }
