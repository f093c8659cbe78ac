-- expect: 4: weft.mesh_query_ray: argument 1 must be uint64 (an object's id, e.g. mesh.id), got int32
local weft = require "weft"
return weft.kernel{ id = weft.int32, x = weft.array(weft.float32), function(id, x)
  local r = weft.mesh_query_ray(id, weft.vec3(), weft.vec3(0.0, 0.0, 1.0), 10.0)
  x[0] = r.t
end }
