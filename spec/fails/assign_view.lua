-- expect: 4: cannot assign to a 1-d view of array<f32,2>; index all 2 dimensions
local weft = require "weft"
return weft.kernel{ m = weft.array(weft.float32, 2), function(m)
  m[0] = 1.0
end }
