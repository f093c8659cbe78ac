-- expect: 5: 'weft.volume_sample' has no variant for the type float64
local weft = require "weft"
return weft.kernel{ id = weft.uint64, x = weft.array(weft.float32), function(id, x)
  x[0] = weft.volume_sample(id, weft.vec3(0.0, 0.0, 0.0), weft.Volume.LINEAR,
    weft.float64)
end }
