-- expect: 5: goto and labels are not supported in kernels
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  local b = a
  goto done
  ::done::
end }
