-- mesh_refit.lua: the CPU time of one refit of bench/mesh.lua's torus (200k
-- triangles) on one thread, the mean over N refits, against a plain LuaJIT
-- loop that takes the same faces' boxes from the same points (no tree, no
-- triangle blocks), in the same run; then the wall time on all threads,
-- medians of R builds: of the refit right after a build (bench/mesh.lua's
-- refit row, which compares it with Warp's) and of the one after that.
--   luajit bench/mesh_refit.lua [N] [R]
local ffi = require "ffi"
local weft = require "weft"
local clock = require "bench.clock"

local function launch()
  -- a launch applies num_threads; a mesh built after it refits on as many
  weft.launch(weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 1.0 end }, 1,
              { weft.zeros(1) })
end
weft.config.num_threads = 1
launch()
local NU, NV = 500, 200
local min, max = math.min, math.max
local nt = 2 * NU * NV
local P, I = require("bench.torus")(NU, NV)
local p, ix = ffi.cast("float *", P.h.data), ffi.cast("int32_t *", I.h.data)
local m = weft.Mesh{ points = P, indices = I }
local N = tonumber(arg[1]) or 100
local box = ffi.new("float[?]", 6 * nt)
local function boxes()
  for f = 0, nt - 1 do
    local lx, ly, lz, hx, hy, hz = 1e30, 1e30, 1e30, -1e30, -1e30, -1e30
    for v = 0, 2 do
      local q = 3 * ix[3 * f + v]
      local x, y, z = p[q], p[q + 1], p[q + 2]
      lx, ly, lz, hx, hy, hz = min(lx, x), min(ly, y), min(lz, z), max(hx, x), max(hy, y), max(hz, z)
    end
    box[6 * f], box[6 * f + 1], box[6 * f + 2], box[6 * f + 3], box[6 * f + 4], box[6 * f + 5] = lx, ly, lz, hx, hy, hz
  end
end
local t = os.clock()
for _ = 1, N do m:refit() end
local tw = (os.clock() - t) / N
t = os.clock()
for _ = 1, N do boxes() end
local tl = (os.clock() - t) / N
print(string.format("mesh refit, 1 thread: weft %.3f ms CPU   LuaJIT face boxes %.3f ms   ratio %.3f", tw * 1e3,
                    tl * 1e3, tw / tl))

weft.config.num_threads = nil
launch()
m = nil
local first, next = {}, {}
for r = 1, tonumber(arg[2]) or 11 do
  collectgarbage()
  m = weft.Mesh{ points = P, indices = I }
  local t0 = clock.now()
  m:refit()
  local t1 = clock.now()
  m:refit()
  first[r], next[r] = t1 - t0, clock.now() - t1
end
print(string.format("mesh refit, %d threads: after a build %.3f ms, the next %.3f ms (wall, medians)",
                    weft.info().threads, clock.median(first) * 1e3, clock.median(next) * 1e3))
