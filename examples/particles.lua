-- particles.lua: three fountains of particles in a box, caught in mid-air.
-- Two jets cross over a central one; particles fall under gravity, splash
-- on the floor, bounce off the walls, and are born again at their nozzle
-- when their time is up, so every frame is in motion. The last frame is
-- drawn with motion blur (each particle splats a short streak of its last
-- 1/60 s, coloured by its fountain and its speed) into a PNG image.
--   build/weft examples/particles.lua [out.png] [steps]
local weft = require "weft"
local here = (arg and arg[0] or ""):match("^(.*)/") or "."
local png = dofile(here .. "/png.lua")

local out_path = arg and arg[1] or "particles.png"
local steps = tonumber(arg and arg[2]) or 400
local n, W, H = 20000, 480, 320
local box = W / H -- the box is box x 1 (metres), as the image
local dt, life = 1.0 / 240, 1.4

-- The nozzles: position (x), launch angle from the floor, speed.
local NOZZLE_X = weft.vec3(0.15, box * 0.5, box - 0.15)
local ANGLE = weft.vec3(1.22, 1.5533, 1.92) -- radians: 70, 89, 110 degrees
local SPEED = weft.vec3(4.0, 3.6, 4.0)

-- A particle's start at its nozzle; gen counts its lives (new random numbers).
local spawn = weft.func(function(i, gen, seed)
  local s = weft.rand_init(seed, i + gen * 7919)
  local j = i % 3
  local a = ANGLE[j] + weft.randf(s, -0.06, 0.06)
  local v = SPEED[j] * weft.randf(s, 0.9, 1.05)
  local p = weft.vec3(NOZZLE_X[j] + weft.randf(s, -0.01, 0.01), 0.02, 0.0)
  return p, weft.vec3(weft.cos(a) * v, weft.sin(a) * v, 0.0)
end)

local init = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), birth = weft.array(weft.float32),
  seed = weft.int32,
  function(pos, vel, birth, seed)
    local i = weft.tid()
    local p, v = spawn(i, 0, seed)
    pos[i] = p
    vel[i] = v
    -- births spread over one lifetime: a steady stream from the start
    birth[i] = life * weft.float32(i) / weft.float32(#pos)
  end,
}

local step = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), birth = weft.array(weft.float32),
  t = weft.float32, seed = weft.int32,
  function(pos, vel, birth, t, seed)
    local i = weft.tid()
    if t < birth[i] then return end -- not born yet: waits at its nozzle
    if t - birth[i] > life then -- its time is up: born again
      local gen = weft.int32(birth[i] / life) + 1
      birth[i] = birth[i] + life
      local p, v = spawn(i, gen, seed)
      pos[i] = p
      vel[i] = v
      return
    end
    local v = vel[i] + weft.vec3(0.0, -9.8, 0.0) * dt
    local p = pos[i] + v * dt
    if p.y < 0.0 then p.y = -p.y * 0.3; v.y = -v.y * 0.45; v.x = v.x * 0.85 end
    if p.x < 0.0 then p.x = -p.x; v.x = -v.x * 0.6 end
    if p.x > box then p.x = 2.0 * box - p.x; v.x = -v.x * 0.6 end
    pos[i] = p
    vel[i] = v
  end,
}

local COLOR = weft.mat33(1.0, 0.45, 0.12, -- one row per fountain
                         0.25, 0.75, 1.0,
                         0.95, 0.3, 0.85)

-- Splat a streak per particle into a float RGB image (atomic adds:
-- threads collide), bilinear weights at each of 8 points along its motion.
local splat = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), birth = weft.array(weft.float32),
  t = weft.float32, img = weft.array(weft.float32, 3),
  function(pos, vel, birth, t, img)
    local i = weft.tid()
    if t < birth[i] then return end
    local h, w = img.shape[0], img.shape[1]
    local v = vel[i]
    local speed = weft.length(v)
    local c = COLOR[i % 3] * (0.35 + 0.12 * speed)
    for k = 0, 7 do
      local p = pos[i] - v * (weft.float32(k) / 480.0)
      local fx = p.x / box * weft.float32(w) - 0.5
      local fy = (1.0 - p.y) * weft.float32(h) - 0.5
      local x0, y0 = weft.int32(weft.floor(fx)), weft.int32(weft.floor(fy))
      local ax, ay = fx - weft.floor(fx), fy - weft.floor(fy)
      for dy = 0, 1 do
        for dx = 0, 1 do
          local x, y = x0 + dx, y0 + dy
          if x >= 0 and x < w and y >= 0 and y < h then
            local wx = dx == 1 and ax or 1.0 - ax
            local wy = dy == 1 and ay or 1.0 - ay
            local s = wx * wy * 0.125
            weft.atomic_add(img, y, x, 0, c.x * s)
            weft.atomic_add(img, y, x, 1, c.y * s)
            weft.atomic_add(img, y, x, 2, c.z * s)
          end
        end
      end
    end
  end,
}

-- Tone-map into PNG rows: a filter byte, then R G B per pixel; count the
-- pixels a particle lit.
local tonemap = weft.kernel{
  img = weft.array(weft.float32, 3), rows = weft.array(weft.uint8, 2),
  lit = weft.array(weft.int32),
  function(img, rows, lit)
    local y, x = weft.tid()
    local h = weft.float32(img.shape[0])
    -- the background: a dark blue wall fading down to a floor
    local g = weft.float32(y) / h
    local bg = weft.vec3(0.002, 0.003, 0.008) + weft.vec3(0.006, 0.007, 0.014) * g
    local e = 0.0
    for k = 0, 2 do e = e + img[y][x][k] end
    if e > 0.02 then weft.atomic_add(lit, 0, 1) end
    if x == 0 then rows[y][0] = weft.uint8(0) end
    for k = 0, 2 do
      local v = 1.0 - weft.exp(-2.0 * img[y][x][k]) + bg[k]
      v = weft.pow(weft.clamp(v, 0.0, 1.0), 1.0 / 2.2) -- gamma
      rows[y][1 + 3 * x + k] = weft.uint8(v * 255.0 + 0.5)
    end
  end,
}

local pos, vel = weft.zeros(n, weft.vec3), weft.zeros(n, weft.vec3)
local birth = weft.zeros(n, weft.float32)
weft.launch(init, n, { pos, vel, birth, 42 })
local t = 0.0
for _ = 1, steps do
  t = t + dt
  weft.launch(step, n, { pos, vel, birth, t, 42 })
end
local img = weft.zeros({ H, W, 3 }, weft.float32)
weft.launch(splat, n, { pos, vel, birth, t, img })
local rows, lit = weft.zeros({ H, 1 + 3 * W }, weft.uint8), weft.zeros(1, weft.int32)
weft.launch(tonemap, { H, W }, { img, rows, lit })
png.write(out_path, W, H, rows:ptr(), H * (1 + 3 * W))

local airborne = 0
for i = 0, n - 1 do
  if pos[i].y > 0.05 then airborne = airborne + 1 end
end
print(("particles: %d particles, %d steps, %d in the air, %d lit pixels -> %s (%dx%d)")
  :format(n, steps, airborne, lit[0], out_path, W, H))
