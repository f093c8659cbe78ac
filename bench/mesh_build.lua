-- mesh_build.lua: weft.Mesh over bench/mesh.lua's torus (200k triangles)
-- BUILDS times in a row, alone (no kernels, no Embree, no Warp between the
-- builds): each build's wall and CPU time (all threads), then their
-- medians. For comparing two builds of the library in alternating runs on
-- a noisy machine (the medians of one run move by several ms there; CPU
-- time moves less than wall time):
--   for i in 1 2 3; do for L in old.so new.so; do
--     WEFT_LIB=$L luajit bench/mesh_build.lua 15 | tail -1; done; done
-- Every build but the last leaves its mesh to the collector, as
-- bench/mesh.lua's loop does, so each one faults in fresh memory. THREADS
-- (default: the runtime's) sets weft.config.num_threads, e.g. 1 for
-- instruction counts of the build's functions under callgrind:
--   valgrind --tool=callgrind --callgrind-out-file=cg.out \
--     luajit bench/mesh_build.lua 2 1
--   callgrind_annotate --inclusive=yes cg.out | grep -E 'wf_bvh_build_fn|wf_bvh4'
-- (three builds: the first outside the loop, then BUILDS = 2).
--   luajit bench/mesh_build.lua [BUILDS] [THREADS]
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"

local cts = ffi.new("weft_bench_timespec")
local function cpu()
  ffi.C.clock_gettime(2, cts) -- CLOCK_PROCESS_CPUTIME_ID
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end
local BUILDS = tonumber(arg[1]) or 15
if arg[2] then
  weft.config.num_threads = tonumber(arg[2])
  -- a launch applies num_threads; meshes built after it build on them
  weft.launch(weft.kernel{ x = weft.array(weft.float32), function(x) x[weft.tid()] = 1.0 end }, 1,
              { weft.zeros(1) })
end
local P, I = require("bench.torus")(500, 200)
local m = weft.Mesh{ points = P, indices = I } -- the build's scratch, kept from here on
local wall, cput, each = {}, {}, {}
for r = 1, BUILDS do
  local t0, c0 = clock.now(), cpu()
  m = weft.Mesh{ points = P, indices = I }
  wall[r], cput[r] = (clock.now() - t0) * 1e3, (cpu() - c0) * 1e3
  each[r] = string.format("%.1f/%.1f", wall[r], cput[r])
end
assert(m.id ~= 0)
io.write("wall/cpu ms: ", table.concat(each, " "), "\n")
io.write(string.format("mesh build (%d faces): wall median %.2f ms, cpu median %.2f ms\n",
                       I.size / 3, clock.median(wall), clock.median(cput)))
