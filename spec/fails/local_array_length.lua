-- expect: 4: argument 1 of 'weft.vector' must be a number literal or a type, known when the kernel compiles
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), n = weft.int32, function(x, n)
  local stack = weft.vector(n, weft.float32)()
  x[0] = stack[0]
end }
