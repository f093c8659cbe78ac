-- geom_ids.lua: the cost of checking geometry ids (src/cpu/native.c):
-- weft.config.mode "release" (every native query's id checked against
-- the live objects, element indices against their object) against "fast"
-- (no checks), on the same kernels, alternating runs; medians of wall and
-- CPU time (CPU time: all threads of this process, steadier on a loaded
-- machine). Target: release <= 1.03 x fast.
--   luajit bench/geom_ids.lua [runs]
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"

local now, median, fmt = clock.now, clock.median, string.format
local runs = tonumber(arg and arg[1]) or 7
local cts = ffi.new("weft_bench_timespec")
local function cpu()
  ffi.C.clock_gettime(2, cts)
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end

-- Median wall and CPU times of f in release and fast mode, alternating.
local function compare(name, f)
  local t = { release = { {}, {} }, fast = { {}, {} } }
  for _, m in ipairs { "release", "fast" } do
    weft.config.mode = m
    f() -- compile, touch the pages
  end
  for r = 1, runs do
    for _, m in ipairs { "release", "fast" } do
      weft.config.mode = m
      local w0, c0 = now(), cpu()
      f()
      t[m][1][r], t[m][2][r] = now() - w0, cpu() - c0
    end
  end
  weft.config.mode = "release"
  local wr, wf = median(t.release[1]), median(t.fast[1])
  local cr, cf = median(t.release[2]), median(t.fast[2])
  io.write(fmt("%-30s release %8.2f ms  fast %8.2f ms  ratio %5.3f   cpu ratio %5.3f  (target <= 1.03)\n",
               name, wr * 1e3, wf * 1e3, wr / wf, cr / cf))
  io.flush()
end

-- a torus of 200 x 100 quads, 500 x 500 rays from above, closest points
local NU, NV = 200, 100
local P, I = require("bench.torus")(NU, NV)
local mesh = weft.Mesh{ points = P, indices = I }
local W = 500
local cast = weft.kernel{ id = weft.uint64, t = weft.array(weft.float32),
  function(id, t)
    local i = weft.tid()
    local o = weft.vec3(-1.6 + 3.2 * weft.float32(i % 500) / 500.0, -1.6 + 3.2 * weft.float32(weft.floordiv(i, 500)) / 500.0, 2.0)
    local r = weft.mesh_query_ray(id, o, weft.vec3(0.0, 0.0, -1.0), 1.0e6)
    t[i] = r.result and r.t or -1.0
  end }
local T = weft.zeros(W * W)
compare("mesh_query_ray 250k", function() weft.launch(cast, W * W, { mesh.id, T }) end)

-- element readers: an index checked per call (mesh_eval_position reads
-- three indices and three points)
local eval = weft.kernel{ id = weft.uint64, out = weft.array(weft.vec3),
  function(id, out)
    local i = weft.tid()
    out[i] = weft.mesh_eval_position(id, i % 40000, 0.25, 0.5)
  end }
local E = weft.zeros(1000000, weft.vec3)
compare("mesh_eval_position 1M", function() weft.launch(eval, 1000000, { mesh.id, E }) end)

-- volume lookups: the cheapest query, so the check's share is largest
local D = weft.empty({ 64, 64, 64 }, weft.float32)
do
  local d = ffi.cast("float *", D.h.data)
  for i = 0, 64 ^ 3 - 1 do d[i] = i % 97 end
end
local vol = weft.Volume.from_dense(D, {})
local look = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32),
  function(id, out)
    local i = weft.tid()
    out[i] = weft.volume_lookup_f(id, i % 64, weft.floordiv(i, 64) % 64, weft.floordiv(i, 4096) % 64)
  end }
local L = weft.zeros(1000000)
compare("volume_lookup_f 1M", function() weft.launch(look, 1000000, { vol.id, L }) end)

-- hash grid: 200k uniform points, neighbours within r
local N, R = 200000, 0.02
local HP = weft.empty(N, weft.vec3)
do
  local p = ffi.cast("float *", HP.h.data)
  math.randomseed(5)
  for i = 0, 3 * N - 1 do p[i] = math.random() end
end
local grid = weft.HashGrid(64, 64, 64)
grid:build(HP, R)
local count = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32,
  out = weft.array(weft.int32),
  function(id, p, r, out)
    local i = weft.hash_grid_point_id(id, weft.tid())
    local pt = p[i]
    local c = 0
    for j in weft.hash_grid_query(id, pt, r) do
      if weft.length_sq(p[j] - pt) <= r * r then c = c + 1 end
    end
    out[i] = c
  end }
local C = weft.zeros(N, weft.int32)
compare("hash_grid_query 200k", function() weft.launch(count, N, { grid.id, HP, R, C }) end)
