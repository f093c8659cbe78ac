-- expect: 4: nil is not supported in kernels
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local a = nil
end }
