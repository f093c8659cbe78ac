-- expect: 4: kernels cannot return values (a bare 'return' ends the thread)
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  return a
end }
