-- expect: 5: cannot use a number as array<f32,1>
local weft = require "weft"
local S = weft.struct{ { "x", weft.array(weft.float32) }, { "n", weft.int32 }, name = "SFail3" }
return weft.kernel{ y = weft.array(weft.float32), function(y)
  local s = S{ x = 3.0, n = 1 }
  y[0] = s.x[0]
end }
