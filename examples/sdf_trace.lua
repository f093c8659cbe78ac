-- sdf_trace.lua: sphere tracing a signed distance field stored in a sparse
-- volume. The field of a torus is sampled into a dense block, turned into
-- a weft.Volume (NanoVDB), and every pixel marches its ray by the
-- trilinear distance until it hits; the surface is shaded with the
-- volume's gradient as the normal and written as a PNG image.
--   build/weft examples/sdf_trace.lua [out.png] [file.nvdb]
-- With a .nvdb level set (Warp's torus.nvdb, say) it traces that instead.
local weft = require "weft"
local png = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/png.lua")

local out_path = arg and arg[1] or "sdf_trace.png"
local nvdb = arg and arg[2]
local W, H = 160, 120

-- the torus (radii 0.6 and 0.25 around the y axis) on a 64^3 block
local fill = weft.kernel{
  sdf = weft.array(weft.float32, 3), h = weft.float32, o = weft.float32,
  function(sdf, h, o)
    local i, j, k = weft.tid()
    local p = weft.vec3(weft.float32(i), weft.float32(j), weft.float32(k)) * h + weft.vec3(o, o, o)
    local q = weft.vec3(weft.length(weft.vec3(p.x, 0.0, p.z)) - 0.6, p.y, 0.0)
    sdf[i][j][k] = weft.length(q) - 0.25
  end,
}

local trace = weft.kernel{
  vol = weft.uint64, img = weft.array(weft.vec3, 2), hits = weft.array(weft.int32),
  center = weft.vec3, scale = weft.float32,
  function(vol, img, hits, center, scale)
    local y, x = weft.tid()
    local w, hgt = weft.float32(img.shape[1]), weft.float32(img.shape[0])
    local eye = center + weft.vec3(0.0, 1.1, 2.2) * scale
    local fwd = weft.normalize(weft.vec3(0.0, -0.45, -1.0))
    local right = weft.normalize(weft.cross(fwd, weft.vec3(0.0, 1.0, 0.0)))
    local up = weft.cross(right, fwd)
    local u = (weft.float32(x) + 0.5) / w * 2.0 - 1.0
    local v = 1.0 - (weft.float32(y) + 0.5) / hgt * 2.0
    local dir = weft.normalize(fwd + right * (u * 0.6 * w / hgt) + up * (v * 0.6))
    local t, hit = 0.0, 0
    local col = weft.vec3(0.1, 0.12, 0.16) + weft.vec3(0.1, 0.1, 0.12) * v
    for _ = 1, 128 do
      if hit == 0 and t < 6.0 * scale then
        local p = eye + dir * t
        local d = weft.volume_sample_f(vol, weft.volume_world_to_index(vol, p), weft.Volume.LINEAR)
        if d < 0.002 * scale then
          hit = 1
          local _, g = weft.volume_sample_grad_f(vol, weft.volume_world_to_index(vol, p), weft.Volume.LINEAR)
          local n = weft.normalize(weft.volume_index_to_world_dir(vol, g))
          local light = weft.normalize(weft.vec3(0.5, 1.0, 0.6))
          local diff = weft.max(weft.dot(n, light), 0.0)
          col = weft.vec3(0.9, 0.55, 0.25) * (0.15 + 0.85 * diff)
        else
          t = t + weft.max(d, 0.002 * scale)
        end
      end
    end
    img[y][x] = col
    if hit == 1 then weft.atomic_add(hits, 0, 1) end
  end,
}

local vol, what
local center, scale = weft.vec3(0, 0, 0), 1.0
if nvdb then
  -- frame the grid: its box in world space sets the camera's distance
  vol, what = weft.Volume.load_from_nvdb(nvdb), nvdb
  local info = vol:grid_info()
  local lo, hi, h, t = info.bbox_min, info.bbox_max, info.voxel_size, info.translation
  local c, ext = {}, 0
  for a = 1, 3 do
    c[a] = t[a] + h[a] * (lo[a] + hi[a]) / 2
    ext = math.max(ext, h[a] * (hi[a] - lo[a] + 1) / 2)
  end
  center, scale = weft.vec3(c[1], c[2], c[3]), ext / 0.85
else
  local n, h, o = 64, 2.4 / 63, -1.2
  local sdf = weft.zeros({ n, n, n })
  weft.launch(fill, { n, n, n }, { sdf, h, o })
  vol = weft.Volume.from_dense(sdf, { voxel_size = h, origin = { o, o, o }, background = 1.0 })
  what = "torus SDF, 64^3 voxels"
end
local img, hits = weft.zeros({ H, W }, weft.vec3), weft.zeros(1, weft.int32)
weft.launch(trace, { H, W }, { vol.id, img, hits, center, scale })

local rows, png_rows = img:totable(), {}
for y = 1, H do
  local row = {}
  for x = 1, W do
    local c = rows[y][x]
    row[x] = string.char(math.floor(math.min(1, c[1]) * 255), math.floor(math.min(1, c[2]) * 255),
                         math.floor(math.min(1, c[3]) * 255))
  end
  png_rows[y] = "\0" .. table.concat(row) -- a PNG row: filter byte 0, then RGB
end
png.write(out_path, W, H, table.concat(png_rows))
print(("sdf_trace: %s, %dx%d pixels, %d hit the surface -> %s"):format(what, W, H, hits[0], out_path))
