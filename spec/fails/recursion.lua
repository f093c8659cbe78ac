-- expect: 4: recursive call to 'fact': weft.func calls are inlined, so recursion is not supported
local weft = require "weft"
local fact
fact = weft.func(function(n) if n <= 1 then return 1 end return n * fact(n - 1) end)
return weft.kernel{ x = weft.array(weft.int32), function(x)
  x[0] = fact(5)
end }
-- called from: 6
