local weft = require "weft"
local A, i32, f32, f64 = weft.array, weft.int32, weft.float32, weft.float64
return weft.kernel{ o = A(weft.vec3d), i = A(weft.vec3i), function(o, i)
      o[0] = weft.vec3d(1, 2, 3)
      o[1] = weft.vec3d(2.5)      o[2] =weft.matrix weft.vec3d()
      o[3] = weft.vec3d(weft.vec4(0.52))
      i[0] = weft.vec3i(weft.vec3d(2.7, -2.7, 0.2))
    end }
