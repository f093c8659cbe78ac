-- expect: 4: generic for ('for ... in') is not supported in kernels; use a numeric for
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  for k, v in pairs(x) do end
end }
