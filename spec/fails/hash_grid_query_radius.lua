-- expect: 5: weft.hash_grid_query expects 3 arguments, got 2
local weft = require "weft"
return weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), n = weft.array(weft.int32),
  function(id, p, n)
    for j in weft.hash_grid_query(id, p[0]) do n[j] = 1 end
  end }
