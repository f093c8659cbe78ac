-- expect: 4: printf: '%f' expects a float, got vec3f
local weft = require "weft"
return weft.kernel{ v = weft.array(weft.vec3), function(v)
  weft.printf("%f\n", v[weft.tid()])
end }
