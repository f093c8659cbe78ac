-- mesh_probe.lua: bench/mesh.lua's ray-cast or closest-point kernel (its
-- torus; 250k of its rays, every fourth row of the camera, or its 100k
-- closest points; bench/mesh_scene.lua) launched LAUNCHES times on one
-- thread after a warm-up launch, for instruction counts under callgrind:
--   valgrind --tool=callgrind --callgrind-out-file=cg.out \
--     luajit bench/mesh_probe.lua 2 closest      (or rays)
--   callgrind_annotate cg.out | head -30
-- The largest unnamed (???) entry without a "'2" is the kernel's code
-- (the other large one is bench/torus.lua's LuaJIT trace): divided by
-- LAUNCHES + 1 and by the queries, instructions a query. (Compare that
-- entry, not the totals: under valgrind the kernel compiles for the CPU
-- valgrind shows.)
local weft = require "weft"
local S = require "bench.mesh_scene"

weft.config.num_threads = 1
local launches, which = tonumber(arg[1]) or 1, arg[2] or "closest"
local P, I = require("bench.torus")(500, 200)
local m = weft.Mesh{ points = P, indices = I }
local n
if which == "rays" then
  local O, D = S.rays(1000, 1000, 4)
  n = O.size
  local T = weft.zeros(n, weft.float32)
  for _ = 0, launches do weft.launch(S.cast, n, { m.id, O, D, T }) end
else
  local Q = S.points()
  n = Q.size
  local C = weft.zeros(n, weft.float32)
  for _ = 0, launches do weft.launch(S.closest, n, { m.id, Q, C }) end
end
io.write(string.format("%d queries (%s), %d launches after a warm-up\n", n, which, launches))
