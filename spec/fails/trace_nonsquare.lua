-- expect: 5: weft.trace(mat23f): the matrix must be square, got 2x3
local weft = require "weft"
local M23 = weft.matrix(2, 3, weft.float32)
return weft.kernel{ m = weft.array(M23), y = weft.array(weft.float32), function(m, y)
  y[0] = weft.trace(m[0])
end }
