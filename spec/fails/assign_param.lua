-- expect: 4: cannot assign to parameter 'a' of type array<f32,1>
local weft = require "weft"
return weft.kernel{ a = weft.array(weft.float32), b = weft.array(weft.float32), function(a, b)
  a = b
end }
