-- bounds.lua: the cost of bounds checks. weft.config.mode "release" (the
-- default: bounds-checked, with the checks the compiler can prove done once
-- per launch or loop) against "fast" (no checks), on the same kernels and
-- arrays, alternating runs; medians. Target: release <= 1.05 x fast.
-- Usage: luajit bench/bounds.lua [runs]   (scripts/run-bench runs it)
local clock = require "bench.clock"
local weft = require "weft"
local kernels = require "bench.kernels"

local now, median = clock.now, clock.median
local fmt = string.format
local runs = tonumber(arg and arg[1]) or 15

-- Median times of `release` and `fast` launches of f, alternating.
local function compare(f, n)
  local tr, tf = {}, {}
  weft.config.mode = "release"
  f() -- compile both, touch the pages
  weft.config.mode = "fast"
  f()
  for r = 1, n do
    weft.config.mode = "release"
    local t0 = now()
    f()
    local t1 = now()
    weft.config.mode = "fast"
    f()
    tr[r], tf[r] = t1 - t0, now() - t1
  end
  weft.config.mode = "release"
  return median(tr), median(tf)
end

local function row(name, tr, tf, target)
  io.write(fmt("%-34s release %9.3f ms   fast %9.3f ms   ratio %6.3f   (target %s)\n", name,
               tr * 1e3, tf * 1e3, tr / tf, target))
  io.flush()
end

-- saxpy, n = 2^24: tid indices, checked once per launch
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
  local inputs = { x, y, 1.0001 }
  local tr, tf = compare(function() weft.launch(saxpy, n, inputs) end, runs)
  row("bounds: saxpy n=2^24 f32", tr, tf, "<= 1.05")
end

-- n-body, n = 4096: tid indices and a loop range checked once per launch
do
  local n = 4096
  local nbody = kernels.nbody()
  local pos, acc = kernels.grid_positions(n), weft.zeros(n, weft.vec3)
  local inputs = { pos, acc, n }
  local tr, tf = compare(function() weft.launch(nbody, n, inputs) end, math.max(5, math.floor(runs / 2)))
  row("bounds: n-body n=4096 vec3", tr, tf, "<= 1.05")
end

-- n-body energy (bench/ad_nbody.lua's kernel): its loads sit under an if
-- in the loop, so they keep a check each (no proof covers them)
do
  local n = 2048
  local energy = weft.kernel{
    pos = weft.array(weft.vec3), mass = weft.array(weft.float32), e = weft.array(weft.float32),
    function(pos, mass, e)
      local i = weft.tid()
      local pi = pos[i]
      local acc = 0.0
      for j = 0, #pos - 1 do
        if j ~= i then
          local d = pos[j] - pi
          acc = acc + mass[j] / weft.sqrt(weft.dot(d, d) + 0.01)
        end
      end
      weft.atomic_add(e, 0, -0.5 * mass[i] * acc)
    end,
  }
  local pos, mass, e = weft.zeros(n, weft.vec3), weft.ones(n), weft.zeros(1)
  for i = 0, n - 1 do pos[i] = weft.vec3(i % 16, math.floor(i / 16) % 16, math.floor(i / 256)) end
  local inputs = { pos, mass, e }
  local tr, tf = compare(function() weft.launch(energy, n, inputs) end, math.max(5, math.floor(runs / 2)))
  row("bounds: n-body energy n=2048", tr, tf, "info")
end
