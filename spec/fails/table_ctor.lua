-- expect: 4: table constructors are only supported as struct values: P{...}
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.int32), function(x)
  local t = { 1, 2, 3 }
end }
