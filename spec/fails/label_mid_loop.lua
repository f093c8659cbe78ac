-- expect: 5: labels are only supported at the end of a loop's body, as the target of 'goto continue'
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  for i = 0, 3 do
    ::top::
    x[i] = 1
  end
end }
