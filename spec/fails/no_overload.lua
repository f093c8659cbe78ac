-- expect: 6: no definition of 'f' matches the arguments (int32)
local weft = require "weft"
local f = weft.func{ a = weft.float32, function(a) return a end }
f:overload{ a = weft.vec3, function(a) return a.x end }
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local v = f(x[0])
end }
