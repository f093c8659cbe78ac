-- expect: 5: cannot assign the type constructor 'weft.matrix'
local weft = require "weft"
return weft.kernel{ o = weft.array(weft.vec3d), function(o)
  o[0] = weft.vec3d(1, 2, 3)
  o[1] = weft.matrix
end }
