-- expect: 5: cannot assign to 'count': only locals of the kernel can be assigned
local weft = require "weft"
local count = 0
return weft.kernel{ x = weft.array(weft.float32), function(x)
  count = count + 1
end }
