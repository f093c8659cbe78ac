-- kernels.lua: kernels several benchmarks share (bench.lua, bounds.lua,
-- interrupt.lua), written once so every row times the same code.
local weft = require "weft"
local M = {}

-- n-body accelerations, O(n^2) over vec3 positions: the pattern that is
-- vectorized across threads. A new kernel at each call (a benchmark that
-- compares two modes needs one per mode).
function M.nbody()
  return weft.kernel{
    pos = weft.array(weft.vec3), acc = weft.array(weft.vec3), n = weft.int32,
    function(pos, acc, n)
      local i = weft.tid()
      local p = pos[i]
      local a = weft.vec3(0.0, 0.0, 0.0)
      for j = 0, n - 1 do
        local d = pos[j] - p
        local r2 = weft.dot(d, d) + 0.01
        local inv = 1.0 / (r2 * weft.sqrt(r2))
        a = a + d * inv
      end
      acc[i] = a
    end,
  }
end

-- n positions on a 16 x 16 x n/256 grid.
function M.grid_positions(n)
  local pos = weft.zeros(n, weft.vec3)
  for i = 0, n - 1 do pos[i] = weft.vec3(i % 16, math.floor(i / 16) % 16, math.floor(i / 256)) end
  return pos
end

return M
