-- bench.lua: weft's CPU benchmarks, each against a baseline measured in the
-- same run (medians of several runs). Run through `make bench`
-- (scripts/run-bench), which builds the C baselines first:
--   luajit bench/bench.lua <libsaxpy_c.so> <libnbody_c.so> [<libnbody_o3.so>]
-- libnbody_c.so is bench/nbody.c built with gcc -O3 -march=native (GNU C
-- contracts a*b+c into FMA there, which weft does not do: it keeps the
-- rounding of the Lua expression); libnbody_o3.so with plain gcc -O3.
-- The C baselines are loaded into this process and their runs alternate
-- with weft's, so both see the same machine load.
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"
local kernels = require "bench.kernels"

ffi.cdef [[
void bench_saxpy(long n, float a, const float *x, float *y);
void bench_nbody(int n, const void *pos, void *acc);
]]
local saxpy_c, nbody_c = ffi.load(arg[1]), ffi.load(arg[2])
local nbody_o3 = arg[3] and ffi.load(arg[3]) or nil
local now, median = clock.now, clock.median
local fmt = string.format
local rows = {}
local weft_times = {} -- name -> weft seconds, for the Warp rows

local function row(name, weft_s, base_s, base_name, target)
  local ratio = weft_s / base_s
  rows[#rows + 1] = { name, weft_s, base_s, base_name, ratio, target }
  io.write(fmt("%-34s weft %10.3f ms   %-22s %10.3f ms   ratio %6.3f   (target %s)\n", name,
               weft_s * 1e3, base_name, base_s * 1e3, ratio, target))
  io.flush()
end

-- Median times of f and g over `runs` alternating runs.
local function alternate(runs, f, g)
  local tf, tg = {}, {}
  for r = 1, runs do
    local t0 = now()
    f()
    local t1 = now()
    g()
    tf[r], tg[r] = t1 - t0, now() - t1
  end
  return median(tf), median(tg)
end

-- saxpy, n = 2^24 float32 --------------------------------------------------
do
  local n = 2 ^ 24
  local saxpy = weft.kernel{
    x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
    function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end,
  }
  local x, y = weft.full(n, 1.0), weft.ones(n)
  local cx, cy = weft.full(n, 1.0), weft.ones(n)
  local px, py = ffi.cast("float *", cx.h.data), ffi.cast("float *", cy.h.data)
  weft.launch(saxpy, n, { x, y, 1.0001 }) -- compile, touch the pages
  saxpy_c.bench_saxpy(n, 1.0001, px, py)
  local inputs = { x, y, 1.0001 }
  local tw, tc = alternate(21, function() weft.launch(saxpy, n, inputs) end,
                           function() saxpy_c.bench_saxpy(n, 1.0001, px, py) end)
  row("saxpy n=2^24 f32", tw, tc, "gcc -O3 -march=native", "<= 1.1")
  weft_times.saxpy = tw
end

-- n-body O(n^2), vec3, n = 4096 -----------------------------------------------
do
  local n = 4096
  local nbody = kernels.nbody()
  local pos, acc = kernels.grid_positions(n), weft.zeros(n, weft.vec3)
  local cacc = weft.zeros(n, weft.vec3)
  weft.launch(nbody, n, { pos, acc, n })
  local inputs = { pos, acc, n }
  local tw, tc = alternate(7, function() weft.launch(nbody, n, inputs) end,
                           function() nbody_c.bench_nbody(n, pos.h.data, cacc.h.data) end)
  -- same arithmetic: the results agree
  for i = 0, n - 1, 97 do
    local a, b = acc[i], cacc[i]
    assert(math.abs(a.x - b.x) <= 1e-3 * math.max(1, math.abs(b.x)), "n-body results differ")
  end
  row("n-body n=4096 vec3", tw, tc, "gcc -O3 -march=native", "<= 0.75")
  weft_times.nbody = tw
  if nbody_o3 then
    tw, tc = alternate(7, function() weft.launch(nbody, n, inputs) end,
                       function() nbody_o3.bench_nbody(n, pos.h.data, cacc.h.data) end)
    row("n-body n=4096 vec3", tw, tc, "gcc -O3 (1 thread)", "<= 0.75")
  end
  -- the same with one weft thread: code quality per core
  weft.config.num_threads = 1
  tw, tc = alternate(5, function() weft.launch(nbody, n, inputs) end,
                     function() nbody_c.bench_nbody(n, pos.h.data, cacc.h.data) end)
  weft.config.num_threads = nil
  row("n-body, weft on 1 thread", tw, tc, "gcc -O3 -march=native", "info")
end

-- empty dim-1 launch from Lua ------------------------------------------------
do
  local empty = weft.kernel{ x = weft.array(weft.float32), function(x) end }
  local x = weft.zeros(1)
  weft.launch(empty, 1, { x })
  local per = {}
  local reps = 100000
  for r = 1, 7 do
    local t0 = now()
    for _ = 1, reps do weft.launch(empty, 1, { x }) end
    per[r] = (now() - t0) / reps
  end
  local us = median(per) * 1e6
  io.write(fmt("%-34s weft %10.3f us   %-22s %10.3f us   ratio %6.3f   (target <= 2 us)\n",
               "empty dim-1 launch", us, "Warp CPU (reported)", 3.8, us / 3.8))
end

-- first launch of a new kernel: empty cache, then the disk cache --------------
do
  local lua = os.getenv("WEFT_BENCH_LUAJIT") or "luajit"
  local base = os.tmpname()
  os.remove(base)
  local cold, warm, warm_compiles = {}, {}, 0
  for r = 1, 5 do
    local dir = fmt("%s-%d", base, r)
    local salt = os.time() % 100000 * 10 + r
    local cmd = fmt("WEFT_CACHE_DIR=%s %s bench/first_launch.lua %d", dir, lua, salt)
    local p = assert(io.popen(cmd))
    local ms = tonumber(p:read("*a"):match("^(%S+)"))
    p:close()
    p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    local ms2, compiles = out:match("^(%S+) (%d+)")
    cold[r], warm[r] = ms, tonumber(ms2)
    warm_compiles = warm_compiles + tonumber(compiles)
    os.execute("rm -rf " .. dir)
  end
  io.write(fmt("%-34s weft %10.3f ms   (target <= 50 ms)\n", "first launch, empty cache", median(cold)))
  io.write(fmt("%-34s weft %10.3f ms   (target <= 2 ms; compiles in those processes: %d)\n",
               "first launch, disk cache", median(warm), warm_compiles))
end

-- NVIDIA Warp (warp-lang) on CPU: reference rows ----------------------------
-- scripts/run-bench sets WEFT_BENCH_PYTHON to a Python that has warp-lang
-- (BUILD/venv); bench/warp_cpu.py times the same kernels on device "cpu"
-- (warm launches + wp.synchronize, medians). The ratio is weft / Warp.
do
  local py = os.getenv("WEFT_BENCH_PYTHON")
  if not py or py == "" then
    io.write("Warp CPU reference rows             skipped: warp-lang is not installed " ..
             "(make deps-bench, or WEFT_PY_PKGS=warp-lang scripts/install-deps)\n")
  else
    local p = assert(io.popen(py .. " bench/warp_cpu.py 21 5 2>/dev/null"))
    local out = p:read("*a")
    p:close()
    local ws, wn = tonumber(out:match("\nsaxpy (%S+)") or out:match("^saxpy (%S+)")),
                   tonumber(out:match("\nnbody (%S+)") or out:match("^nbody (%S+)"))
    if not ws or not wn then
      io.write("Warp CPU reference rows             skipped: bench/warp_cpu.py failed\n")
    else
      row("saxpy n=2^24 f32 vs Warp", weft_times.saxpy, ws, "Warp CPU", "info")
      row("n-body n=4096 vec3 vs Warp", weft_times.nbody, wn, "Warp CPU", "info")
    end
  end
end
