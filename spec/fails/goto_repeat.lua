-- expect: 6: only a goto to a label at the end of the enclosing loop's body (Lua's 'goto continue') is supported in kernels
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  local i = 0
  repeat
    if i == 2 then goto continue end
    x[i] = 1
    ::continue::
    i = i + 1
  until i > 3
end }
