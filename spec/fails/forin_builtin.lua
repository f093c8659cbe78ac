-- expect: 4: generic for ('for ... in') over sqrt: kernels only iterate over the geometry queries (weft.mesh_query_aabb(id, lo, hi), weft.bvh_query_aabb(id, lo, hi), weft.bvh_query_ray(id, start, dir))
local weft = require "weft"
return weft.kernel{ x = weft.array(weft.float32), function(x)
  for k in weft.sqrt(2.0) do
    x[0] = 1.0
  end
end }
