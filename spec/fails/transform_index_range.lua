-- expect: 5: index 7 out of range for transformf (0..6)
local weft = require "weft"
return weft.kernel{ y = weft.array(weft.float32), function(y)
  local t = weft.transform_identity()
  t[7] = y[0]
end }
