-- expect: 7: 'spring' needs argument 'k' (it has no default)
local weft = require "weft"
local spring = weft.func{ x = weft.float32, k = weft.float32, rest = weft.float32,
  defaults = { rest = 1.0 }, function(x, k, rest) return k * (x - rest) end }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = spring(x[i])
end }
