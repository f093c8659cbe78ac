-- hashgrid_probe.lua: the neighbour count of bench/hashgrid.lua (1M
-- uniform points, r = 0.01, cell order) launched LAUNCHES times on one
-- thread after a warm-up launch, for instruction counts under callgrind:
--   valgrind --tool=callgrind --callgrind-out-file=cg.out \
--     luajit bench/hashgrid_probe.lua 2
--   callgrind_annotate cg.out | head -20
-- The largest unnamed (???) entry is the kernel's code: divided by
-- LAUNCHES and by 1M, instructions a query. (Compare that entry, not the
-- totals: under valgrind the CPU looks different, so the first run
-- compiles the kernel again.)
local ffi = require "ffi"
local weft = require "weft"

weft.config.num_threads = 1
local launches = tonumber(arg[1]) or 1
local N, R = 1000000, 0.01
local pts = weft.empty(N, weft.vec3)
do
  local p = ffi.cast("float *", pts.h.data)
  math.randomseed(12345)
  for i = 0, 3 * N - 1 do p[i] = math.random() end
end
local count = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, out = weft.array(weft.int32),
  function(id, p, r, out)
    local i = weft.hash_grid_point_id(id, weft.tid())
    local pi = p[i]
    local c = 0
    for j in weft.hash_grid_query(id, pi, r) do
      if weft.length_sq(p[j] - pi) <= r * r then c = c + 1 end
    end
    out[i] = c
  end,
}
local g = weft.HashGrid(128, 128, 128)
g:build(pts, R)
local out = weft.zeros(N, weft.int32)
weft.launch(count, 1, { g.id, pts, R, out })
for _ = 1, launches do weft.launch(count, N, { g.id, pts, R, out }) end
