-- expect: 6: 's' cannot be used in a kernel: a SFail4 holds arrays, which cannot be constants (pass the struct to the kernel as a parameter)
local weft = require "weft"
local S = weft.struct{ { "x", weft.array(weft.float32) }, name = "SFail4" }
local s = S{ x = weft.ones(3) }
return weft.kernel{ y = weft.array(weft.float32), function(y)
  y[0] = s.x[0]
end }
