-- expect: 5: local 'a' is used before it has a value
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local a
  x[0] = a
end }
