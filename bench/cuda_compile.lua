-- bench/cuda_compile.lua: NVRTC compile time of small kernels, cold (a
-- fresh cache directory: every run compiles) and warm (from the disk
-- cache), for PTX (compute_80, what launches load) and CUBIN (sm_80: NVRTC
-- then also runs ptxas). Target: <= 30 ms per small kernel cold (Warp's
-- trivial CUDA module: 160-178 ms). Columns: wall-clock median, and the
-- process CPU time median (steadier when the machine is loaded). One
-- compile runs first so loading NVRTC's builtins is not counted. Kernels
-- compile at weft's default --Ofast-compile=min; the "full" column is the
-- same cold compile with NVVM's full optimization (fast_compile = "0").
-- With warp-lang in the bench venv (WEFT_BENCH_PYTHON, set by
-- scripts/run-bench), bench/warp_cuda_compile.py compiles the same saxpy and
-- loop kernels to PTX with Warp in the same run: the ratio rows compare
-- weft's cold PTX compile with Warp's.
--   WEFT_LIB=build/libweft.so LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit bench/cuda_compile.lua
local weft = require "weft"
local internal = require "weft.internal" -- the parts' private table
local clock = dofile("bench/clock.lua")

local core = internal.core
if not (core.cuda_nvrtc_version and core.cuda_nvrtc_version()) then
  print("cuda_compile: SKIP (NVRTC not found)")
  return
end

local kernels = {
  saxpy = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
    function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end },
  loop = weft.kernel{ x = weft.array(weft.float32), n = weft.int32,
    function(x, n)
      local i = weft.tid()
      local acc = 0.0
      for k = 1, n do acc = acc + weft.sin(x[i] * weft.float32(k)) end
      x[i] = acc
    end },
  half = weft.kernel{ x = weft.array(weft.float16),
    function(x)
      local i = weft.tid()
      x[i] = x[i] * weft.float16(2.0)
    end },
}

local ffi = require "ffi"
pcall(ffi.cdef, "int setenv(const char *, const char *, int);")
pcall(ffi.cdef, [[
typedef struct weft_bench_timespec { long tv_sec; long tv_nsec; } weft_bench_timespec;
int clock_gettime(int clk, weft_bench_timespec *ts);
]])
local cts = ffi.new("weft_bench_timespec")
local function cpu_now() -- CLOCK_PROCESS_CPUTIME_ID
  ffi.C.clock_gettime(2, cts)
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end
local dir = os.tmpname()
os.remove(dir)
local RUNS = 7
local ptx_cold = {} -- kernel -> weft's cold PTX compile, ms

-- Median seconds of f over RUNS runs: wall clock, process CPU time.
local function time(f)
  local t, c = {}, {}
  for r = 1, RUNS do
    local t0, c0 = clock.now(), cpu_now()
    f(r)
    t[r], c[r] = clock.now() - t0, cpu_now() - c0
  end
  return clock.median(t), clock.median(c)
end

ffi.C.setenv("WEFT_CACHE_DIR", "off", 1)
local t0 = clock.now()
core.cuda_compile('extern "C" __global__ void warmup(float *x) { x[0] = 1.0f; }', "compute_80")
local first = clock.now() - t0

print(string.format("NVRTC %d; median of %d runs; ms per kernel", core.cuda_nvrtc_version(), RUNS))
print(string.format("first compile in the process (loads NVRTC's builtins): %.2f ms", first * 1e3))
print(string.format("%-8s %-10s %10s %10s %10s %10s %8s", "kernel", "target", "cold", "cold cpu", "full",
                    "cached", "src B"))
for _, name in ipairs { "saxpy", "loop", "half" } do
  local ok, m = pcall(function() return kernels[name]:_module() end)
  if not ok then
    print(string.format("%-8s (front end: %s)", name, tostring(m):match("[^\n]*")))
  else
    local src = core.cuda_source(m)
    for _, target in ipairs { "compute_80", "sm_80" } do
      local f = target:match("^sm_") and core.cuda_cubin or core.cuda_ptx
      -- cold: a fresh cache directory per run, so NVRTC always runs
      local cold, cold_cpu = time(function(r)
        ffi.C.setenv("WEFT_CACHE_DIR", dir .. "/cold" .. name .. target .. r, 1)
        f(m, target)
      end)
      local full = time(function(r)
        ffi.C.setenv("WEFT_CACHE_DIR", dir .. "/full" .. name .. target .. r, 1)
        f(m, target, { fast_compile = "0" })
      end)
      ffi.C.setenv("WEFT_CACHE_DIR", dir .. "/warm", 1)
      f(m, target)
      local warm = time(function() local _, _, hit = f(m, target); assert(hit) end)
      print(string.format("%-8s %-10s %10.2f %10.2f %10.2f %10.3f %8d", name, target, cold * 1e3,
                          cold_cpu * 1e3, full * 1e3, warm * 1e3, #src))
      if target == "compute_80" then ptx_cold[name] = cold * 1e3 end
    end
  end
end
os.execute("rm -rf " .. dir)

-- Warp's compile of the same kernels, measured now (see the header)
local py = os.getenv("WEFT_BENCH_PYTHON")
if py and py ~= "" then
  local p = io.popen(py .. " bench/warp_cuda_compile.py 5 2>/dev/null")
  local out = p and p:read("*a") or ""
  if p then p:close() end
  local any = false
  for name, ms, runs in out:gmatch("(%w+) ([%d.]+) (%d+)") do
    local w = ptx_cold[name]
    if w then
      any = true
      print(string.format("%-8s PTX cold: weft %.2f ms, Warp %.2f ms (median of %s)   ratio %.3f   (target: <= 30 ms)",
                          name, w, tonumber(ms), runs, w / tonumber(ms)))
    end
  end
  if not any then print("Warp compile rows skipped: bench/warp_cuda_compile.py gave no result") end
else
  print("Warp compile rows skipped: warp-lang not in the bench venv (make deps-bench)")
end
