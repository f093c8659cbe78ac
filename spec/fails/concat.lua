-- expect: 4: string concatenation ('..') is not supported in kernels
local weft = require "weft"
return weft.kernel{ a = weft.float32, function(a)
  local s = "a" .. "b"
end }
