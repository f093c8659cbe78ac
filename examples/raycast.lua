-- raycast.lua: ray-cast a triangle mesh into a normal-shaded image (PNG).
--   weft examples/raycast.lua [out.png] [width] [height]
-- A torus knotted with a sine wave is built on the host, handed to a
-- weft.Mesh (a BVH over its triangles), and every pixel's camera ray is
-- cast in a kernel with weft.mesh_query_ray; hits are shaded by their face
-- normal, misses stay dark.
local weft = require "weft"

local png = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/png.lua")
local path = arg[1] or "raycast.png"
local W, H = tonumber(arg[2]) or 320, tonumber(arg[3]) or 240
local NU, NV = 160, 48

-- the mesh: a wavy torus, NU x NV quads of two triangles
local pts, idx = {}, {}
for j = 0, NV - 1 do
  for i = 0, NU - 1 do
    local u, v = 2 * math.pi * i / NU, 2 * math.pi * j / NV
    local r = 0.35 + 0.06 * math.sin(5 * u)
    pts[#pts + 1] = { (1 + r * math.cos(v)) * math.cos(u), (1 + r * math.cos(v)) * math.sin(u),
                      r * math.sin(v) + 0.15 * math.sin(3 * u) }
  end
end
for j = 0, NV - 1 do
  for i = 0, NU - 1 do
    local a, b = j * NU + i, j * NU + (i + 1) % NU
    local c, d = ((j + 1) % NV) * NU + (i + 1) % NU, ((j + 1) % NV) * NU + i
    for _, k in ipairs { a, b, c, a, c, d } do idx[#idx + 1] = k end
  end
end
local mesh = weft.Mesh{ points = weft.array(pts, weft.vec3), indices = weft.array(idx, weft.int32) }

local render = weft.kernel{
  id = weft.uint64, w = weft.int32, h = weft.int32, img = weft.array(weft.vec3), depth = weft.array(weft.float32),
  function(id, w, h, img, depth)
    local y, x = weft.tid()
    local eye = weft.vec3(0.0, -3.0, 1.6)
    local fwd = weft.normalize(-eye)
    local right = weft.normalize(weft.cross(fwd, weft.vec3(0.0, 0.0, 1.0)))
    local up = weft.cross(right, fwd)
    local s = 0.45
    local dx = (2.0 * (weft.float32(x) + 0.5) / weft.float32(w) - 1.0) * s * weft.float32(w) / weft.float32(h)
    local dy = (1.0 - 2.0 * (weft.float32(y) + 0.5) / weft.float32(h)) * s
    local dir = weft.normalize(fwd + right * dx + up * dy)
    local r = weft.mesh_query_ray(id, eye, dir, 100.0)
    local c = weft.vec3(0.05, 0.05, 0.08)
    local t = -1.0
    if r.result then
      c = r.normal * 0.5 + weft.vec3(0.5, 0.5, 0.5)
      t = r.t
    end
    img[y * w + x] = c
    depth[y * w + x] = t
  end }

local img, depth = weft.zeros(W * H, weft.vec3), weft.zeros(W * H, weft.float32)
weft.launch(render, { H, W }, { mesh.id, W, H, img, depth })

-- write the PNG and count the hits
local pix, hits = img:totable(), 0
for _, t in ipairs(depth:totable()) do
  if t >= 0 then hits = hits + 1 end
end
local bytes, rows = {}, {}
for i, c in ipairs(pix) do
  for k = 1, 3 do bytes[3 * (i - 1) + k] = string.char(math.max(0, math.min(255, math.floor(c[k] * 255 + 0.5)))) end
end
for y = 0, H - 1 do -- PNG rows: filter byte 0, then RGB
  rows[y + 1] = "\0" .. table.concat(bytes, "", 3 * W * y + 1, 3 * W * (y + 1))
end
png.write(path, W, H, table.concat(rows))
print(string.format("raycast: %d triangles, %dx%d pixels, %d hit the mesh, wrote %s", #idx / 3, W, H, hits, path))
