-- expect: 4: method calls (':fill_') are not supported in kernels
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x:fill_(0)
end }
