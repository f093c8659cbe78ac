-- expect: 4: printf: '%s' takes a literal string, got a value (use print)
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  weft.printf("%s\n", x[0])
end }
