-- expect: 4: weft.mesh_query_point_sign_winding_number expects 3 to 5 arguments, got 2
local weft = require "weft"
return weft.kernel{ id = weft.uint64, x = weft.array(weft.float32), function(id, x)
  local q = weft.mesh_query_point_sign_winding_number(id, weft.vec3())
  x[0] = q.sign
end }
