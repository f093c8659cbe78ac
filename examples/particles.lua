-- particles.lua: a small particle simulation. Particles fall under gravity
-- inside a box, bounce off the walls with damping, and are drawn into a
-- PPM image of their final state.
--   build/weft examples/particles.lua [out.ppm] [steps]
local weft = require "weft"

local out_path = arg and arg[1] or "particles.ppm"
local steps = tonumber(arg and arg[2]) or 400
local n, size = 20000, 256

local init = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), seed = weft.int32,
  function(pos, vel, seed)
    local i = weft.tid()
    local s = weft.rand_init(seed, i)
    pos[i] = weft.vec3(weft.randf(s, 0.2, 0.8), weft.randf(s, 0.5, 0.95), 0.0)
    vel[i] = weft.vec3(weft.randf(s, -0.5, 0.5), weft.randf(s, -0.2, 0.2), 0.0)
  end,
}

local step = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), dt = weft.float32,
  function(pos, vel, dt)
    local i = weft.tid()
    local v = vel[i] + weft.vec3(0.0, -9.8, 0.0) * dt
    local p = pos[i] + v * dt
    -- bounce off the walls of the unit box, losing some energy
    if p.y < 0.0 then p.y = -p.y; v.y = -v.y * 0.7 end
    if p.x < 0.0 then p.x = -p.x; v.x = -v.x * 0.9 end
    if p.x > 1.0 then p.x = 2.0 - p.x; v.x = -v.x * 0.9 end
    pos[i] = p
    vel[i] = v
  end,
}

-- Splat particles into a density image (atomic adds: threads collide).
local splat = weft.kernel{
  pos = weft.array(weft.vec3), img = weft.array(weft.int32, 2),
  function(pos, img)
    local i = weft.tid()
    local p = pos[i]
    local w = img.shape[1]
    local x = weft.clamp(weft.int32(p.x * weft.float32(w)), 0, w - 1)
    local y = weft.clamp(weft.int32((1.0 - p.y) * weft.float32(img.shape[0])), 0, img.shape[0] - 1)
    weft.atomic_add(img, y, x, 1)
  end,
}

local pos, vel = weft.zeros(n, weft.vec3), weft.zeros(n, weft.vec3)
weft.launch(init, n, { pos, vel, 42 })
for _ = 1, steps do weft.launch(step, n, { pos, vel, 1.0 / 240 }) end
local img = weft.zeros({ size, size }, weft.int32)
weft.launch(splat, n, { pos, img })

local f = assert(io.open(out_path, "wb"))
f:write(("P6\n%d %d\n255\n"):format(size, size))
local maxc, lit = 0, 0
for y = 0, size - 1 do
  local row = {}
  for x = 0, size - 1 do
    local c = img[y][x]
    if c > maxc then maxc = c end
    if c > 0 then lit = lit + 1 end
    local v = math.min(255, c * 40)
    row[#row + 1] = string.char(v, math.min(255, v * 2 / 3), 255 - v)
  end
  f:write(table.concat(row))
end
f:close()
print(("particles: %d particles, %d steps, %d lit pixels, densest pixel %d -> %s")
  :format(n, steps, lit, maxc, out_path))
