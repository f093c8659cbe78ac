-- bench/nested_loops.lua: front-end time (k:ir(): lowering and the IR
-- passes) of kernels with D nested `for j = 0, 1` loops and one carried
-- accumulator, D = 4..16. Lowering a loop once per nesting level keeps this
-- flat; lowering every body twice per level (the front end up to commit
-- bdad17a) doubled it per level. Medians of 5 kernels per depth (each a new
-- kernel, so nothing is cached). To compare with that front end: build
-- bdad17a in a worktree (git worktree add /tmp/old bdad17a; cmake -S
-- /tmp/old -B /tmp/old/build; make -C /tmp/old/build weft) and run this
-- file with WEFT_LIB and LUA_PATH pointing there. On 2026-11-22: depth 16
-- 704 ms there, 0.33 ms here.
--   WEFT_LIB=build/libweft.so LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit bench/nested_loops.lua
local weft = require "weft"
local clock = dofile("bench/clock.lua")

-- A kernel with `depth` nested loops (loaded from a file: the front end
-- reads the kernel's source text).
local function make(depth)
  local src = { "return function(weft)\nreturn weft.kernel{ y = weft.array(weft.float64), function(y)\n",
                "local i = weft.tid()\nlocal s = 0.0\n" }
  local js = {}
  for d = 1, depth do
    src[#src + 1] = ("for j%d = 0, 1 do\n"):format(d)
    js[d] = "j" .. d
  end
  src[#src + 1] = "s = s + y[i] * weft.float64(" .. table.concat(js, " + ") .. ")\n"
  src[#src + 1] = ("end\n"):rep(depth) .. "y[i] = s\nend }\nend\n"
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(table.concat(src))
  f:close()
  local k = dofile(path)(weft)
  return k, path
end

print(("%-6s %12s %10s"):format("depth", "k:ir() ms", "IR bytes"))
for _, depth in ipairs { 4, 6, 8, 10, 12, 14, 16 } do
  local t, bytes = {}, 0
  for r = 1, 5 do
    local k, path = make(depth)
    local t0 = clock.now()
    bytes = #k:ir()
    t[r] = clock.now() - t0
    os.remove(path)
  end
  print(("%-6d %12.3f %10d"):format(depth, clock.median(t) * 1e3, bytes))
end
