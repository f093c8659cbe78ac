-- expect: 4: cannot compare float32 and int32
local weft = require "weft"
return weft.kernel{ a = weft.float32, b = weft.int32, x = weft.array(weft.float32), function(a, b, x)
  if a < b then x[0] = 1 end
end }
