-- expect: 5: cannot use a number as array<f32,1>
local weft = require "weft"
local S = weft.struct{ { "x", weft.array(weft.float32) }, { "n", weft.int32 }, name = "SFail2" }
return weft.kernel{ s = S, function(s)
  s.x = 5.0
end }
