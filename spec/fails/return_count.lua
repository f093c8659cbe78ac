-- expect: 5: this return gives 1 value, an earlier one 2
local weft = require "weft"
local f = weft.func(function(a)
  if a > 0 then return a, a end
  return a
end)
return weft.kernel{ x = weft.array(weft.int32), function(x)
  x[0] = f(x[1])
end }
-- called from: 8
