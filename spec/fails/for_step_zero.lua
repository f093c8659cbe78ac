-- expect: 4: for loop step is zero
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  for i = 1, 10, 0 do x[i] = 1 end
end }
