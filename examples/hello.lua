-- hello.lua: the first weft program (what `make run` runs).
-- A kernel is an ordinary Lua function; weft compiles it to native code
-- and runs it on every core, one thread per element.
local weft = require "weft"

local saxpy = weft.kernel{
  x = weft.array(weft.float32), y = weft.array(weft.float32), a = weft.float32,
  function(x, y, a)
    local i = weft.tid()
    y[i] = a * x[i] + y[i]
  end,
}

local n = 1000000
local x = weft.full(n, 2.0)
local y = weft.ones(n)
weft.launch(saxpy, n, { x, y, 3.0 })
print(("weft %s on %s: y[0] = %g, y[%d] = %g (expected 7)"):format(
  weft.version, weft.info().cpu, y[0], n - 1, y[n - 1]))

-- Vector types, loops and builtins work inside kernels too.
local lengths = weft.kernel{
  p = weft.array(weft.vec3), out = weft.array(weft.float32),
  function(p, out)
    local i = weft.tid()
    local s = 0.0
    for k = 1, 3 do s = s + weft.length(p[i]) * weft.float32(k) end
    out[i] = s / 6.0
  end,
}
local p = weft.array({ { 3, 4, 0 }, { 1, 2, 2 } }, weft.vec3)
local out = weft.zeros(2)
weft.launch(lengths, 2, { p }, { outputs = { out } })
print(("|(3,4,0)| = %g, |(1,2,2)| = %g"):format(out[0], out[1]))
