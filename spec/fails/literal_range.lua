-- expect: 5: cannot use the number 2147483648 as int32 (out of range -2147483648..2147483647)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local r = x[0]
  x[1] = r + 2147483648
end }
