-- expect: 4: arrays cannot be created inside kernels
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local a = weft.array(weft.float32)()
end }
