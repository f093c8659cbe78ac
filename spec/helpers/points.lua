-- Point clouds and brute-force neighbour counts for the hash grid specs.
local M = {}

-- n points uniform in [shift, shift + extent)^3 (tables of 3 numbers),
-- from a fixed linear congruential sequence (seed: default 11)
function M.random_points(n, extent, shift, seed)
  local s = seed or 11
  local function r()
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 2147483648
  end
  local pts = {}
  for i = 1, n do pts[i] = { r() * extent + shift, r() * extent + shift, r() * extent + shift } end
  return pts
end

-- the counts of brute force, against pts, around each point of qs
-- (default pts)
function M.brute_counts(pts, r, qs)
  local out = {}
  for i, p in ipairs(qs or pts) do
    local c = 0
    for _, q in ipairs(pts) do
      local dx, dy, dz = p[1] - q[1], p[2] - q[2], p[3] - q[3]
      -- the kernel compares in float32: compare squared lengths the same way
      if dx * dx + dy * dy + dz * dz <= r * r * (1 + 1e-6) then c = c + 1 end
    end
    out[i] = c
  end
  return out
end

return M
