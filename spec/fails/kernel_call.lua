-- expect: 6: 'inner' is a kernel; kernels cannot be called from kernels (use weft.func)
local weft = require "weft"
local inner = weft.kernel{ x = weft.array(weft.float32), function(x) end }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  inner(x)
end }
