-- expect: 6: sstep(int32, int32, float64): the arguments must share one float type; integer literals are int32 here (write 1.0, not 1)
local weft = require "weft"
local sstep = weft.smoothstep -- named as the call writes it
return weft.kernel{ x = weft.array(weft.float64), function(x)
  local i = weft.tid()
  x[i] = sstep(0, 1, x[i])
end }
