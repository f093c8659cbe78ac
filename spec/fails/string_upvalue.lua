-- expect: 5: 'name' is a string; strings cannot be used in kernels
local weft = require "weft"
local name = "hello"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local s = name
end }
