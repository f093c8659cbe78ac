-- hashgrid.lua: weft.HashGrid against NVIDIA Warp's CPU hash grid and a
-- plain C neighbour loop over the same cell lists (bench/hashgrid_c.c),
-- the rows of issue 14:
--   build of HashGrid(128, 128, 128) over 1M uniform points in the unit
--   cube (target <= 0.5x Warp), and counting the neighbours within
--   r = 0.01 (about 5 each) for all of them (target >= 20x faster than
--   Warp, within 1.5x of the C loop). Medians of alternating runs. The C
--   loop visits the 27 cells one by one and tests every point in them;
--   weft's query takes a row of cells as one slice, tests its points on
--   the grid's own copy of the positions in cell order, 8 at a time, and
--   yields only those within r, which the kernel then tests again.
--   The count runs twice: threads in hash_grid_point_id order (Warp's
--   examples; neighbouring threads share cells) and in tid order (thread i
--   queries point i), each against Warp launched the same way. weft runs
--   the tid-order kernel's threads in the grid's cell order (its query is
--   at p[tid()] with p the build's array: docs/geometry.md); the row
--   after it runs it with weft.config.cell_order = false, in tid order, so
--   that the queries jump around memory as Warp's do.
--   luajit bench/hashgrid.lua <libhashgrid_c.so> [N]
-- Warp's rows run when WEFT_BENCH_PYTHON names a Python with warp-lang
-- (scripts/run-bench sets it).
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"

ffi.cdef [[
void bench_hashgrid_count(const void *h, const float *points, int n, float r, int32_t *out,
                          int nthreads);
void bench_hashgrid_count_sorted(const void *h, const float *points, float *sorted, int n, float r,
                                 int32_t *out, int nthreads, int fill);
]]
local base = ffi.load(assert(arg[1], "usage: luajit bench/hashgrid.lua <libhashgrid_c.so> [N]"))
local N = tonumber(arg[2]) or 1000000
local R = 0.01
local now, median, fmt = clock.now, clock.median, string.format

local function row(name, weft_s, base_s, base_name, target)
  io.write(fmt("%-34s weft %10.3f ms   %-22s %10.3f ms   ratio %6.3f   (target %s)\n", name,
               weft_s * 1e3, base_name, base_s * 1e3, weft_s / base_s, target))
  io.flush()
end

-- uniform points (a fixed seed, so every run counts the same pairs)
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
local count_tid = weft.kernel{
  id = weft.uint64, p = weft.array(weft.vec3), r = weft.float32, out = weft.array(weft.int32),
  function(id, p, r, out)
    local i = weft.tid()
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
local out, cout = weft.zeros(N, weft.int32), weft.zeros(N, weft.int32)
weft.launch(count, N, { g.id, pts, R, out }) -- compile
weft.launch(count_tid, N, { g.id, pts, R, out })
local W = require "weft.internal"
local nthreads = tonumber(W.C.wf_rt_num_threads(W.rt))
local gh = g._h
local pp, cp = ffi.cast("const float *", pts.h.data), ffi.cast("int32_t *", cout.h.data)

local sorted = ffi.new("float[?]", 3 * N)
base.bench_hashgrid_count_sorted(gh, pp, sorted, N, R, cp, nthreads, 1)
local tb, tq, tc, tt, ts, tn = {}, {}, {}, {}, {}, {}
for r = 1, 7 do
  local t0 = now()
  g:build(pts, R)
  local t1 = now()
  weft.launch(count, N, { g.id, pts, R, out })
  local t2 = now()
  base.bench_hashgrid_count(gh, pp, N, R, cp, nthreads)
  local t3 = now()
  weft.launch(count_tid, N, { g.id, pts, R, out })
  local t5 = now()
  if r <= 3 then -- slower: fewer runs
    weft.config.cell_order = false
    weft.launch(count_tid, N, { g.id, pts, R, out })
    weft.config.cell_order = nil
    tn[r] = now() - t5
  end
  tt[r] = t5 - t3
  tb[r], tq[r], tc[r] = t1 - t0, t2 - t1, t3 - t2
  local t4 = now()
  base.bench_hashgrid_count_sorted(gh, pp, sorted, N, R, cp, nthreads, 0)
  ts[r] = now() - t4
end
local wb, wq, wc, wt, wsorted = median(tb), median(tq), median(tc), median(tt), median(ts)
local wnone = median(tn)
local total, ctotal = 0, 0
local o, c = ffi.cast("int32_t *", out.h.data), cp
for i = 0, N - 1 do total, ctotal = total + o[i], ctotal + c[i] end
-- (the counts of the last C loop, over positions in cell order)
assert(total == ctotal, "weft and the C loop disagree: " .. total .. " vs " .. ctotal)
io.write(fmt("hash grid: %d points, %.2f neighbours each (self included), %d threads\n", N,
             total / N, nthreads))
row("hashgrid neighbour count vs C loop", wq, wc, "plain C, same cells", "<= 1.5")
io.write(fmt("  (the C loop over positions copied into cell order, a bound: %.3f ms)\n", wsorted * 1e3))

local py = os.getenv("WEFT_BENCH_PYTHON")
if not py or py == "" then
  io.write(fmt("hashgrid build %-20s weft %10.3f ms   (Warp rows skipped: no warp-lang)\n", "", wb * 1e3))
  return
end
local p = assert(io.popen(fmt("%s bench/warp_geom.py hashgrid %d 7 %g 2>/dev/null", py, N, R)))
local res = p:read("*a")
p:close()
local build, cnt = tonumber(res:match("build (%S+)")), tonumber(res:match("count (%S+)"))
local cnt_tid = tonumber(res:match("count_tid (%S+)"))
if not build or not cnt then
  io.write("Warp hash grid rows                 skipped: bench/warp_geom.py failed\n")
  return
end
row("hashgrid build 1M vs Warp", wb, build, "Warp CPU", "<= 0.5")
row("hashgrid neighbour count vs Warp", wq, cnt, "Warp CPU", "<= 0.05")
io.write(fmt("  (the cell-order C bound vs Warp: ratio %.3f)\n", wsorted / cnt))
if cnt_tid then
  row("  the same in tid order vs Warp", wt, cnt_tid, "Warp CPU, tid order", "<= 0.05")
  row("  (cell_order = false) vs Warp", wnone, cnt_tid, "Warp CPU, tid order", "none")
end
