-- expect: 4: weft.mesh_query_aabb gives one value per iteration: write `for f in ...`
local weft = require "weft"
return weft.kernel{ id = weft.uint64, x = weft.array(weft.int32), function(id, x)
  for f, g in weft.mesh_query_aabb(id, weft.vec3(), weft.vec3(1.0, 1.0, 1.0)) do
    x[0] = f
  end
end }
