-- expect: 4: printf: the format needs more values than the 1 given
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf("%f %f\n", x[0])
end }
