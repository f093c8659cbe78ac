-- expect: 4: strings are only supported as print's format argument
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  print("%f", "text")
end }
