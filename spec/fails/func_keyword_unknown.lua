-- expect: 7: 'spring' has no parameter 'stiffness'
local weft = require "weft"
local spring = weft.func{ x = weft.float32, k = weft.float32, defaults = { k = 2.0 },
  function(x, k) return k * x end }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = spring{ x = x[i], stiffness = 3.0 }
end }
