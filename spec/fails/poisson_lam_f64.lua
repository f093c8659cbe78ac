-- expect: 5: weft.poisson(rng, float64): lam must be a float32
local weft = require "weft"
return weft.kernel{ y = weft.array(weft.float64), function(y)
  local s = weft.rand_init(1)
  y[0] = weft.float64(weft.poisson(s, y[1]))
end }
