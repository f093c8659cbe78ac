-- expect: 5: 'add3' expects 3 arguments, got 2
local weft = require "weft"
local add3 = weft.func(function(a, b, c) return a + b + c end)
return weft.kernel{ x = weft.array(weft.float32), function(x)
  x[0] = add3(1.0, 2.0)
end }
