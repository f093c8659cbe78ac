-- expect: 5: Body has no field 'weight'
local weft = require "weft"
local P = weft.struct{ { "pos", weft.vec3 }, { "mass", weft.float32 }, name = "Body" }
return weft.kernel{ ps = weft.array(P), function(ps)
  local m = ps[0].weight
end }
