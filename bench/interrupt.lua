-- interrupt.lua: the cost of polling the interrupt flag (weft_interrupt).
-- Kernels read the flag with a relaxed load at every loop back-edge; with
-- WEFT_POLL=off (read when a kernel is compiled) they do not, and an
-- interrupt stops a launch between chunks only. The same kernels compiled
-- both ways, launched alternately on the same arrays; medians. The n-body
-- row runs vectorized across threads, where the polls of its FOR loop are
-- dropped (bounded trip counts), so it should show no cost; the WHILE and
-- 2-D rows keep a poll in their hot loops.
-- Usage: luajit bench/interrupt.lua [runs]   (scripts/run-bench runs it)
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"
local kernels = require "bench.kernels"

pcall(ffi.cdef, [[
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
]])

local now, median = clock.now, clock.median
local fmt = string.format
local runs = tonumber(arg and arg[1]) or 15

-- Two copies of the kernel made by make(): the first compiled with polls,
-- the second without (the launch compiles, so launch once each).
local function pair(make, launch)
  local kp, kn = make(), make()
  launch(kp)
  ffi.C.setenv("WEFT_POLL", "off", 1)
  launch(kn)
  ffi.C.unsetenv("WEFT_POLL")
  return kp, kn
end

local function compare(make, launch, n)
  local kp, kn = pair(make, launch)
  local tp, tn = {}, {}
  for r = 1, n do
    local t0 = now()
    launch(kp)
    local t1 = now()
    launch(kn)
    tp[r], tn[r] = t1 - t0, now() - t1
  end
  return median(tp), median(tn)
end

local function row(name, tp, tn)
  io.write(fmt("%-36s polled %9.3f ms   unpolled %9.3f ms   ratio %6.3f\n", name, tp * 1e3,
               tn * 1e3, tp / tn))
  io.flush()
end

-- n-body, n = 4096: one FOR loop per thread, vectorized across threads
do
  local n = 4096
  local make = kernels.nbody
  local pos = weft.zeros(n, weft.vec3)
  for i = 0, n - 1 do pos[i] = weft.vec3(math.sin(i), math.cos(i * 0.7), i / n) end
  local acc = weft.zeros(n, weft.vec3)
  local inputs = { pos, acc, n }
  row("interrupt: n-body n=4096 (SIMD)", compare(make, function(k) weft.launch(k, n, inputs) end, runs))
end

-- Mandelbrot escape counts, 512x512, at most 256 steps: a WHILE loop
do
  local w = 512
  local function make()
    return weft.kernel{
      out = weft.array(weft.int32), w = weft.int32,
      function(out, w)
        local i = weft.tid()
        local cx = weft.float32(i % w) / weft.float32(w) * 3.0 - 2.0
        local cy = weft.float32(weft.floordiv(i, w)) / weft.float32(w) * 3.0 - 1.5
        local x, y = weft.float32(0.0), weft.float32(0.0)
        local it = 0
        while it < 256 and x * x + y * y <= 4.0 do
          x, y = x * x - y * y + cx, 2.0 * x * y + cy
          it = it + 1
        end
        out[i] = it
      end,
    }
  end
  local out = weft.zeros(w * w, weft.int32)
  local inputs = { out, w }
  row("interrupt: mandelbrot 512^2 (while)", compare(make, function(k) weft.launch(k, w * w, inputs) end, runs))
end

-- matrix product 256^3 on a 2-D grid: an inner FOR loop, not vectorized
-- across threads (2-D launches are not), so its poll stays
do
  local n = 256
  local function make()
    return weft.kernel{
      a = weft.array(weft.float32, 2), b = weft.array(weft.float32, 2),
      c = weft.array(weft.float32, 2),
      function(a, b, c)
        local i, j = weft.tid()
        local s = weft.float32(0.0)
        for k = 0, a.shape[1] - 1 do s = s + a[i][k] * b[k][j] end
        c[i][j] = s
      end,
    }
  end
  local a, b, c = weft.ones({ n, n }), weft.ones({ n, n }), weft.zeros({ n, n })
  local inputs = { a, b, c }
  row("interrupt: matmul 256^3 2-D (for)", compare(make, function(k) weft.launch(k, { n, n }, inputs) end, runs))
end
