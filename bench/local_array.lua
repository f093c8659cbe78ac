-- bench/local_array.lua: the costs of weft issue 12's language features,
-- each against a baseline in the same run (medians of 9 alternating runs).
--   local stack    a 64-entry weft.vector(64, weft.int32)() stack with
--                  dynamic pushes and pops (one stack slot, src/cpu/local.c)
--                  against the same algorithm on a per-thread row of a
--                  global scratch array
--   local matrix   an 8x8 weft.matrix scratch filled and read with dynamic
--                  row and column, against a per-thread 8x8 global block
--   (WEFT_LOCAL_SLOTS=off: local arrays as SSA values, for comparison)
--   struct saxpy   y = a x + y with x and y inside a struct (the general
--                  variant: no noalias, no vectorizing on proven
--                  distinct arrays) against x and y as parameters
--   WEFT_LIB=build/libweft.so LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit bench/local_array.lua
local weft = require "weft"
local clock = dofile("bench/clock.lua")
local now, median = clock.now, clock.median
local fmt = string.format

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

local function row(name, a, b, bname)
  print(fmt("%-14s weft %9.3f ms   %-16s %9.3f ms   ratio %6.2f", name, a * 1e3, bname, b * 1e3, a / b))
end

-- a depth-first walk of an implicit binary tree of `depth` levels from
-- each thread's root, pushing children on a stack: sums the node ids
do
  local n, levels = 2 ^ 14, 5
  local local_stack = weft.kernel{ out = weft.array(weft.int32), depth = weft.int32,
    function(out, depth)
      local i = weft.tid()
      local stack = weft.vector(64, weft.int32)()
      local top, s = 1, 0
      stack[0] = 1
      while top > 0 do
        top = top - 1
        local node = stack[top]
        s = s + node + i
        if node < bit.lshift(1, depth - 1) then
          stack[top] = 2 * node
          stack[top + 1] = 2 * node + 1
          top = top + 2
        end
      end
      out[i] = s
    end }
  local scratch_stack = weft.kernel{ out = weft.array(weft.int32), st = weft.array(weft.int32, 2),
    depth = weft.int32,
    function(out, st, depth)
      local i = weft.tid()
      local stack = st[i]
      local top, s = 1, 0
      stack[0] = 1
      while top > 0 do
        top = top - 1
        local node = stack[top]
        s = s + node + i
        if node < bit.lshift(1, depth - 1) then
          stack[top] = 2 * node
          stack[top + 1] = 2 * node + 1
          top = top + 2
        end
      end
      out[i] = s
    end }
  local o1, o2 = weft.zeros(n, weft.int32), weft.zeros(n, weft.int32)
  local st = weft.zeros({ n, 64 }, weft.int32)
  weft.launch(local_stack, n, { o1, levels })
  weft.launch(scratch_stack, n, { o2, st, levels })
  assert(o1[7] == o2[7] and o1[7] > 0)
  local a, b = alternate(9, function() weft.launch(local_stack, n, { o1, levels }) end,
    function() weft.launch(scratch_stack, n, { o2, st, levels }) end)
  row("local stack", a, b, "scratch array")
end

do
  local n = 2 ^ 14
  local local_mat = weft.kernel{ out = weft.array(weft.float32), function(out)
    local i = weft.tid()
    local m = weft.matrix(8, 8, weft.float32)()
    for r = 0, 7 do
      for c = 0, 7 do m[r][c] = weft.float32(r * 8 + c + i) end
    end
    local s = weft.float32(0)
    for t = 0, 63 do
      local r, c = (t * 5 + i) % 8, (t * 3) % 8
      s = s + m[r][c]
      m[c][r] = s * 0.5
    end
    out[i] = s
  end }
  local scratch_mat = weft.kernel{ out = weft.array(weft.float32), st = weft.array(weft.float32, 3),
    function(out, st)
      local i = weft.tid()
      local m = st[i]
      for r = 0, 7 do
        for c = 0, 7 do m[r][c] = weft.float32(r * 8 + c + i) end
      end
      local s = weft.float32(0)
      for t = 0, 63 do
        local r, c = (t * 5 + i) % 8, (t * 3) % 8
        s = s + m[r][c]
        m[c][r] = s * 0.5
      end
      out[i] = s
    end }
  local o1, o2 = weft.zeros(n), weft.zeros(n)
  local st = weft.zeros({ n, 8, 8 })
  weft.launch(local_mat, n, { o1 })
  weft.launch(scratch_mat, n, { o2, st })
  assert(o1[7] == o2[7] and o1[7] > 0)
  local a, b = alternate(9, function() weft.launch(local_mat, n, { o1 }) end,
    function() weft.launch(scratch_mat, n, { o2, st }) end)
  row("local matrix", a, b, "scratch array")
end

do
  local n = 2 ^ 22
  local S = weft.struct{ { "x", weft.array(weft.float32) }, { "y", weft.array(weft.float32) },
                         name = "BenchXY" }
  local ks = weft.kernel{ s = S, a = weft.float32, function(s, a)
    local i = weft.tid()
    s.y[i] = a * s.x[i] + s.y[i]
  end }
  local kp = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),
    a = weft.float32, function(x, y, a)
      local i = weft.tid()
      y[i] = a * x[i] + y[i]
    end }
  local x, y = weft.ones(n), weft.ones(n)
  local s = S{ x = weft.ones(n), y = weft.ones(n) }
  weft.launch(ks, n, { s, 1.0 })
  weft.launch(kp, n, { x, y, 1.0 })
  local a, b = alternate(9, function() weft.launch(ks, n, { s, 1.0001 }) end,
    function() weft.launch(kp, n, { x, y, 1.0001 }) end)
  row("struct saxpy", a, b, "array params")
end
