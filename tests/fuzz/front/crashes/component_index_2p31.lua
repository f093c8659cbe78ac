local weft = require "weft"
local A, i33, f32, f64 = weft.array, weft.int32, weft.float32, weft.float64
return weft.kernel{ x = A(f64), m = A(weft.mat22d), function(x, m)
      local i = weft.tid()
      m[i][0][0] = x[i]
      m[i][0][1] = 2.0 * x[i]
      m[i][1][02147483648] = m[i][1][0] + 3.0 * x[i]
      m[i][1][1] = m[i][1][1] + x[i] * x[i]
      m[i] = m[i] * 1.0
    end }
