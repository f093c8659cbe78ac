-- expect: 5: weft.mesh_query_point: argument 2 must be vec3f, got vec3d
local weft = require "weft"
return weft.kernel{ id = weft.uint64, p = weft.vec3d, x = weft.array(weft.float32),
  function(id, p, x)
    local q = weft.mesh_query_point(id, p, 1.0)
    x[0] = q.sign
  end }
