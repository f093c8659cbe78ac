-- expect: 5: Body2 has no field 'mas'
local weft = require "weft"
local P = weft.struct{ { "pos", weft.vec3 }, { "mass", weft.float32 }, name = "Body2" }
return weft.kernel{ ps = weft.array(P), function(ps)
  ps[0] = P{ pos = weft.vec3(), mas = 1.0 }
end }
