-- expect: 5: cannot assign to a 1-d view of array<f32,2>; index all 2 dimensions
local weft = require "weft"
local S = weft.struct{ { "a", weft.array(weft.float32, 2) }, name = "SFail" }
return weft.kernel{ s = S, function(s)
  s.a[0] = 1.0
end }
