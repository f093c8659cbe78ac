local weft = require "weft"
local h = weft.func{ a = weft.float32, b = weft.float32, function(a, b) return weft.sqrt(a * a + b * b) end }
return weft.kernel{ p1 = weft.array(weft.float32, 2), p2 = weft.array(weft.int32), p3 = weft.array(weft.int32), p4 = weft.array(weft.float32), p5 = weft.float64, function(p1, p2, p3, p4, p5)
  local i = weft.tid()
  local v1 = h(((weft.vec3() + weft.vec3()) * weft.determinant(weft.mat33())).y, (weft.mat33(p1[i][i], 3.0e38, 2.5e-8, 0.1, 3.0, 3.0, 3.0, 3.0, 3.0) + weft.mat33())[0].x)
  p1[i][i] = 0.5
  if (i < ((not (not true)) and i or -2147483648)) then
    p1[i][p2[i]] = (-p1[i][i])
  end
  local v2 = weft.min((0.5 ^ weft.max(p4[i], weft.mat33(-1e-30, 123456.75, 2.5e-8, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5)[0][0])), 0.5)
  local v3 = v2
  local v4 = v2
end }
