-- expect: 5: generic for ('for ... in') in kernels only iterates over a geometry query (weft.mesh_query_aabb(id, lo, hi), weft.bvh_query_aabb(id, lo, hi), weft.bvh_query_ray(id, start, dir)); use a numeric for otherwise
local weft = require "weft"
local t = { 1, 2, 3 }
return weft.kernel{ x = weft.array(weft.float32), function(x)
  for k, v in ipairs(t), 1 do
    x[k] = v
  end
end }
