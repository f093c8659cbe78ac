-- expect: 4: print: unsupported format conversion '%q'
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  print("%q", x[0])
end }
