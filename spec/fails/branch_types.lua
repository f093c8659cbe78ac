-- expect: 5: return value 1 is int32 here but float32 in an earlier return
local weft = require "weft"
local f = weft.func(function(a)
  if a > 0 then return 1.0 end
  return weft.int32(2)
end)
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = f(x[0])
end }
-- called from: 8
