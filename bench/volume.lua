-- volume.lua: 1M trilinear weft.volume_sample_f on Warp's torus.nvdb
-- against NVIDIA Warp's CPU (issue 14: target >= 5x faster), at the same
-- random index-space points inside the grid's box. Medians of several
-- runs; Warp's rows need WEFT_BENCH_PYTHON (a Python with warp-lang, set
-- by scripts/run-bench), which also locates torus.nvdb.
--   luajit bench/volume.lua [N]
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"

local N = tonumber(arg[1]) or 1000000
local now, median, fmt = clock.now, clock.median, string.format
local py = os.getenv("WEFT_BENCH_PYTHON")
if not py or py == "" then
  io.write("volume rows                         skipped: no Python with warp-lang for torus.nvdb\n")
  return
end
local p = assert(io.popen(py .. [[ -c "import warp, os; print(os.path.dirname(warp.__file__))" 2>/dev/null]]))
local wdir = (p:read("*l") or "")
p:close()
local path = wdir .. "/tests/assets/torus.nvdb"
local ok, v = pcall(weft.Volume.load_from_nvdb, path)
if not ok then
  io.write("volume rows                         skipped: " .. tostring(v) .. "\n")
  return
end
local info = v:grid_info()
local lo, hi = info.bbox_min, info.bbox_max

-- the same points as Warp's: generated here, handed over through a file
local pts = weft.empty(N, weft.vec3)
do
  local q = ffi.cast("float *", pts.h.data)
  math.randomseed(7)
  for i = 0, N - 1 do
    for c = 0, 2 do q[3 * i + c] = lo[c + 1] + math.random() * (hi[c + 1] - lo[c + 1] + 1) end
  end
end

local sample = weft.kernel{
  id = weft.uint64, pp = weft.array(weft.vec3), out = weft.array(weft.float32),
  function(id, pp, out)
    local i = weft.tid()
    out[i] = weft.volume_sample_f(id, pp[i], 1)
  end,
}
local out = weft.zeros(N)
weft.launch(sample, N, { v.id, pts, out })
local ts = {}
for r = 1, 9 do
  local t0 = now()
  weft.launch(sample, N, { v.id, pts, out })
  ts[r] = now() - t0
end
local tw = median(ts)

local pr = assert(io.popen(fmt("%s bench/warp_geom.py volume %d 9 %d %d %d %d %d %d 2>/dev/null", py, N,
                               lo[1], lo[2], lo[3], hi[1] + 1, hi[2] + 1, hi[3] + 1)))
local res = pr:read("*a")
pr:close()
local wt = tonumber(res:match("sample (%S+)"))
if not wt then
  io.write(fmt("volume_sample_f 1M torus              weft %10.3f ms   (Warp row failed)\n", tw * 1e3))
  return
end
io.write(fmt("%-34s weft %10.3f ms   %-22s %10.3f ms   ratio %6.3f   (target %s)\n",
             "volume_sample_f 1M torus vs Warp", tw * 1e3, "Warp CPU", wt * 1e3, tw / wt, "<= 0.2"))
