-- expect: 5: only a goto to a label at the end of the enclosing loop's body (Lua's 'goto continue') is supported in kernels
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  local b = a
  goto done
  ::done::
end }
