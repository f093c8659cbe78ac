-- torus.lua: the benches' torus of nu x nv quads (radii 1 and 0.4, two
-- triangles a quad) as weft arrays of points and indices; bench/warp_mesh.py
-- builds the same one.
--   local P, I = require("bench.torus")(nu, nv)
local ffi = require "ffi"
local weft = require "weft"

return function(nu, nv)
  local cos, sin, tau = math.cos, math.sin, 2 * math.pi
  local P, I = weft.empty(nu * nv, weft.vec3), weft.empty(6 * nu * nv, weft.int32)
  local p, ix = ffi.cast("float *", P.h.data), ffi.cast("int32_t *", I.h.data)
  for j = 0, nv - 1 do
    for i = 0, nu - 1 do
      local u, v, k = tau * i / nu, tau * j / nv, j * nu + i
      p[3 * k], p[3 * k + 1], p[3 * k + 2] = (1 + 0.4 * cos(v)) * cos(u), (1 + 0.4 * cos(v)) * sin(u), 0.4 * sin(v)
      local a, b = k, j * nu + (i + 1) % nu
      local c, d = ((j + 1) % nv) * nu + (i + 1) % nu, ((j + 1) % nv) * nu + i
      ix[6 * k], ix[6 * k + 1], ix[6 * k + 2], ix[6 * k + 3], ix[6 * k + 4], ix[6 * k + 5] = a, b, c, a, c, d
    end
  end
  return P, I
end
