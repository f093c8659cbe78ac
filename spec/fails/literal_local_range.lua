-- expect: 5: cannot use the number 3000000000 as int32 (out of range -2147483648..2147483647)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local n = 3000000000
  if x[0] > 0 then n = x[1] end
  x[2] = n
end }
