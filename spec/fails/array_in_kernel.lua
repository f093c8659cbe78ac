-- expect: 4: 'weft.array' is a Lua function, not a builtin or a weft.func; it cannot be called in a kernel
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local a = weft.array(weft.float32)()
end }
