-- expect: 5: index 1e+300 out of range for vec2d (0..1)
local weft = require "weft"
return weft.kernel{ m = weft.array(weft.mat22d), function(m)
  local i = weft.tid()
  m[i][1][1e300] = 1.0
end }
