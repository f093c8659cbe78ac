-- first_launch.lua SALT: time the first launch of a small kernel in a fresh
-- process (front end + CPU compile, or a disk cache hit). The salt goes into
-- the kernel's constant, so each salt is a kernel no cache has seen.
-- Prints: <milliseconds> <compiles> <disk_hits>
local salt = tonumber(arg[1]) or 1
local clock = require "bench.clock"
local weft = require "weft"
local scale = salt * 0.5
local k = weft.kernel{
  x = weft.array(weft.float32), y = weft.array(weft.float32),
  function(x, y)
    local i = weft.tid()
    y[i] = x[i] * scale + 1.0
  end,
}
local x = weft.ones(64)
local y = weft.zeros(64)
local t0 = clock.now()
weft.launch(k, 64, { x, y })
local t1 = clock.now()
assert(y[3] == 1.0 * scale + 1.0, "wrong result")
local s = weft.stats()
io.write(string.format("%.3f %d %d\n", (t1 - t0) * 1e3, s.compiles, s.disk_hits))
