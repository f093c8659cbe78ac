-- expect: 4: randf: the state must be a local variable (it is updated in place)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = weft.randf(weft.rand_init(1))
end }
