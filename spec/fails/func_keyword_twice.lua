-- expect: 7: argument 'x' is given twice
local weft = require "weft"
local spring = weft.func{ x = weft.float32, k = weft.float32, defaults = { k = 2.0 },
  function(x, k) return k * x end }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = spring{ x = x[i], x = 1.0 }
end }
