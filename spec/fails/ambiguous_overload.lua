-- expect: 6: ambiguous call to 'g': several definitions match equally well
local weft = require "weft"
local g = weft.func{ a = weft.float32, function(a) return a end }
g:overload{ a = weft.float32, function(a) return a * 2 end }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = g(x[1])
end }
