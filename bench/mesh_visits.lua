-- mesh_visits.lua: the wide nodes and leaves one closest-point query and
-- one ray cast of bench/mesh.lua visit (its torus of 200k triangles, its
-- 100k points on a grid around it with max_dist 100, its 1M eye rays),
-- and the visits that rank no lanes, counted by the walk of src/geom/query.h
-- built with its counters on (bench/mesh_visits.c). Fewer visits is what
-- tighter lane bounds and a better order buy; the counts do not depend on
-- the machine or its load, as times here do.
--   luajit bench/mesh_visits.lua build/bench/libmesh_visits.so
local ffi = require "ffi"
local weft = require "weft"

ffi.cdef [[
double mv_closest(uint64_t id, const float *p, int n, float lim, double *leaves, double *dsum);
double mv_rays(uint64_t id, const float *o, const float *d, int n, float tmax, double *leaves,
               double *tsum);
double mv_few_last(int n);
]]
local lib = ffi.load(assert(arg[1], "usage: luajit bench/mesh_visits.lua libmesh_visits.so"))
local P, I = require("bench.torus")(500, 200)
local m = weft.Mesh{ points = P, indices = I }
local Q = require("bench.mesh_scene").points()
local n, q = Q.size, ffi.cast("const float *", Q.h.data)
local leaves, sum = ffi.new("double[1]"), ffi.new("double[1]")
local nodes = lib.mv_closest(m.id, q, n, 100.0, leaves, sum)
io.write(string.format("mesh closest points: %.2f wide nodes and %.2f leaves a query, %.2f visits"
                       .. " ranking no lanes (%d queries, sum of d^2 %.6f)\n",
                       nodes, leaves[0], lib.mv_few_last(n), n, sum[0]))
local O, D = require("bench.mesh_scene").rays(1000, 1000)
n = O.size
nodes = lib.mv_rays(m.id, ffi.cast("const float *", O.h.data), ffi.cast("const float *", D.h.data),
                    n, 1.0e6, leaves, sum)
io.write(string.format("mesh ray casts: %.2f wide nodes and %.2f leaves a ray, %.2f visits ranking"
                       .. " no lanes (%d rays, sum of t %.6f)\n", nodes, leaves[0],
                       lib.mv_few_last(n), n, sum[0]))
