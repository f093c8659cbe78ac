-- expect: 4: function definitions (closures) are not supported inside kernels
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  local f = function(y) return y end
end }
