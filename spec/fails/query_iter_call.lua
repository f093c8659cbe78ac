-- expect: 4: weft.bvh_query_aabb is an iterating query: use it in a generic for, for i in weft.bvh_query_aabb(...) do ... end
local weft = require "weft"
return weft.kernel{ id = weft.uint64, x = weft.array(weft.uint64), function(id, x)
  x[0] = weft.bvh_query_aabb(id, weft.vec3(), weft.vec3())
end }
