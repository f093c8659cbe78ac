-- examples/devices.lua: one script for a machine with or without a GPU.
-- The arrays live on cuda:0 when there is one (launches go to a stream of
-- our own, timed with events), else on the cpu; the kernel is the same.
--   build/weft examples/devices.lua
local weft = require "weft"

local n = 2 ^ 20
local dev = weft.is_cuda_available() and "cuda:0" or "cpu"
print(("devices: %s; running on %s"):format(table.concat(weft.devices(), ", "), dev))

local step = weft.kernel{ p = weft.array(weft.vec3), v = weft.array(weft.vec3), dt = weft.float32,
  function(p, v, dt)
    local i = weft.tid()
    v[i] = v[i] + weft.vec3(0.0, -9.8, 0.0) * dt
    p[i] = p[i] + v[i] * dt
  end }

-- pinned host memory when a driver is there (a.pinned says which)
local p0 = weft.zeros(n, weft.vec3, { pinned = true })
local p, v = p0:to(dev), weft.zeros(n, weft.vec3, { device = dev })

local steps = 100
if dev == "cpu" then
  for _ = 1, steps do weft.launch(step, n, { p, v, 0.01 }) end
else
  local s = weft.Stream(dev)
  local t0, t1 = weft.Event(dev, { enable_timing = true }), weft.Event(dev, { enable_timing = true })
  s:record_event(t0)
  for _ = 1, steps do weft.launch(step, n, { p, v, 0.01 }, { stream = s }) end
  s:record_event(t1)
  weft.synchronize_event(t1)
  print(("devices: %d steps in %.2f ms on the GPU"):format(steps, weft.get_event_elapsed_time(t0, t1)))
end

-- every particle fell the same way: y = -9.8 * dt^2 * steps (steps + 1) / 2
local y = p:to("cpu")[n - 1].y
local expect = -9.8 * 0.01 * 0.01 * steps * (steps + 1) / 2
print(("devices: y after %d steps = %.4f (expected %.4f), pinned host buffer: %s"):format(
  steps, y, expect, tostring(p0.pinned)))
assert(math.abs(y - expect) < 1e-3 * math.abs(expect), "wrong result")
print("devices: ok")
