-- expect: 5: the call gives 1 value, 2 needed
local weft = require "weft"
local one = weft.func(function(a) return a end)
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local a, b = one(x[0])
end }
