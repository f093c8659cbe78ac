-- expect: 4: no definition of 'volume_sample_f' matches the arguments (uint64, vec2f, number)
local weft = require "weft"
return weft.kernel{ id = weft.uint64, x = weft.array(weft.float32), function(id, x)
  x[0] = weft.volume_sample_f(id, weft.vec2(1.0, 2.0), weft.Volume.LINEAR)
end }
