-- expect: 5: undefined name 'foo'
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = weft.tid()
  x[i] = foo
end }
