-- expect: 6: only a goto to a label at the end of the enclosing loop's body (Lua's 'goto continue') is supported in kernels
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  for i = 0, 3 do
    for j = 0, 3 do
      if j == i then goto continue end
      x[i] = x[i] + 1
    end
    ::continue::
  end
end }
