-- expect: 4: too many return values (at most 8)
local weft = require "weft"
local g = weft.func(function(a) return a end)
local f = weft.func(function(a) return a, a, a, a, a, a, a, a, g(a) end)
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = f(x[1])
end }
-- called from: 6
