-- expect: 5: local 'v' gets different types in the two branches: float32 and int32
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local v = 0
  if x[0] > 0 then v = x[0] else v = weft.int32(2) end
end }
