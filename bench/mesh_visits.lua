-- mesh_visits.lua: the wide nodes and leaves one closest-point query of
-- bench/mesh.lua visits (its torus of 200k triangles, its 100k points on a
-- grid around it, max_dist 100), counted by the walk of src/geom/query.h
-- built with its counters on (bench/mesh_visits.c). Fewer visits is what
-- tighter lane bounds and a better order buy; the counts do not depend on
-- the machine or its load, as times here do.
--   luajit bench/mesh_visits.lua build/bench/libmesh_visits.so
local ffi = require "ffi"
local weft = require "weft"

ffi.cdef [[
double mv_closest(uint64_t id, const float *p, int n, float lim, double *leaves, double *dsum);
]]
local lib = ffi.load(assert(arg[1], "usage: luajit bench/mesh_visits.lua libmesh_visits.so"))
local P, I = require("bench.torus")(500, 200)
local m = weft.Mesh{ points = P, indices = I }
local Q = require("bench.mesh_scene").points()
local n, q = Q.size, ffi.cast("const float *", Q.h.data)
local leaves, dsum = ffi.new("double[1]"), ffi.new("double[1]")
local nodes = lib.mv_closest(m.id, q, n, 100.0, leaves, dsum)
io.write(string.format("mesh closest points: %.2f wide nodes and %.2f leaves a query (%d queries, sum of d^2 %.6f)\n",
                       nodes, leaves[0], n, dsum[0]))
