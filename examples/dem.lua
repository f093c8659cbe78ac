-- dem.lua: a small discrete element simulation. Spheres fall into a box,
-- collide through spring-dashpot contacts found with a weft.HashGrid, and
-- settle; the final state is drawn (side view, coloured by speed) into a
-- PNG image.
--   build/weft examples/dem.lua [out.png] [steps]
local weft = require "weft"
local png = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/png.lua")

local out_path = arg and arg[1] or "dem.png"
local steps = tonumber(arg and arg[2]) or 800
local n, radius, size = 4000, 0.01, 256
local DT = 1.0 / 1000

local init = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), seed = weft.int32,
  function(pos, vel, seed)
    local i = weft.tid()
    local s = weft.rand_init(seed, i)
    pos[i] = weft.vec3(weft.randf(s, 0.3, 0.7), weft.randf(s, 0.2, 0.9), weft.randf(s, 0.45, 0.55))
    vel[i] = weft.vec3(weft.randf(s, -0.5, 0.5), 0.0, weft.randf(s, -0.5, 0.5))
  end,
}

-- contact forces from the neighbours the grid offers, then gravity, walls
-- of the unit box, and a symplectic Euler step
local step = weft.kernel{
  grid = weft.uint64, pos = weft.array(weft.vec3), vel = weft.array(weft.vec3),
  npos = weft.array(weft.vec3), nvel = weft.array(weft.vec3), r = weft.float32, dt = weft.float32,
  function(grid, pos, vel, npos, nvel, r, dt)
    local i = weft.hash_grid_point_id(grid, weft.tid())
    local p, v = pos[i], vel[i]
    local f = weft.vec3(0.0, -9.8, 0.0)
    for j in weft.hash_grid_query(grid, p, 2.0 * r) do
      if j ~= i then
        local d = p - pos[j]
        local dist = weft.length(d)
        if dist < 2.0 * r and dist > 1e-6 then
          local nrm = d / dist
          local vn = weft.dot(v - vel[j], nrm)
          f = f + nrm * ((2.0 * r - dist) * 4.0e4 - vn * 15.0)
        end
      end
    end
    v = v + f * dt
    local q = p + v * dt
    if q.y < r then q.y = r; v.y = -v.y * 0.3 end
    if q.x < r then q.x = r; v.x = -v.x * 0.3 end
    if q.x > 1.0 - r then q.x = 1.0 - r; v.x = -v.x * 0.3 end
    if q.z < 0.4 then q.z = 0.4; v.z = -v.z * 0.3 end
    if q.z > 0.6 then q.z = 0.6; v.z = -v.z * 0.3 end
    npos[i] = q
    nvel[i] = v
  end,
}

local draw = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), img = weft.array(weft.float32, 2),
  function(pos, vel, img)
    local i = weft.tid()
    local p = pos[i]
    local w = img.shape[1]
    local x = weft.clamp(weft.int32(p.x * weft.float32(w)), 0, w - 1)
    local y = weft.clamp(weft.int32((1.0 - p.y) * weft.float32(img.shape[0])), 0, img.shape[0] - 1)
    weft.atomic_max(img, y, x, weft.length(vel[i]) + 0.05)
  end,
}

local pos, vel = weft.zeros(n, weft.vec3), weft.zeros(n, weft.vec3)
local npos, nvel = weft.zeros(n, weft.vec3), weft.zeros(n, weft.vec3)
weft.launch(init, n, { pos, vel, 7 })
local grid = weft.HashGrid(64, 64, 64)
for _ = 1, steps do
  grid:build(pos, 2 * radius)
  weft.launch(step, n, { grid.id, pos, vel, npos, nvel, radius, DT })
  pos, npos, vel, nvel = npos, pos, nvel, vel
end

local P = pos:totable()
local img = weft.zeros({ size, size })
weft.launch(draw, n, { pos, vel, img })
local mean = 0
for _, p in ipairs(P) do mean = mean + p[2] / n end

local rows = {}
local lit = 0
for y = 0, size - 1 do
  local row = {}
  for x = 0, size - 1 do
    local s = img[y][x]
    if s > 0 then lit = lit + 1 end
    local t = math.min(1, s / 0.5)
    row[#row + 1] = s > 0 and string.char(math.floor(80 + 175 * t), math.floor(120 + 60 * (1 - t)), math.floor(255 * (1 - t)))
      or string.char(16, 16, 24)
  end
  rows[#rows + 1] = "\0" .. table.concat(row) -- a PNG row: filter byte 0, then RGB
end
png.write(out_path, size, size, table.concat(rows))
print(("dem: %d spheres, %d steps, mean height %.3f, %d lit pixels -> %s")
  :format(n, steps, mean, lit, out_path))
