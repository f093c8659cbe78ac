-- expect: 4: atomic_xor needs an array of 32- or 64-bit integers (or vectors of them), got array<f32,1>
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.atomic_xor(x, 0, 1.0)
end }
