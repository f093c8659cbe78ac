-- mesh.lua: weft's meshes against NVIDIA Warp's CPU runtime and Embree 3
-- on one scene (issue 13): a torus of 500 x 200 quads (200k triangles),
-- 1M coherent rays from a 1000 x 1000 pinhole camera, 100k closest-point
-- queries on a grid around it, BVH build and refit. Medians of RUNS runs;
-- weft and Embree alternate in this process, Warp runs in
-- bench/warp_mesh.py (when WEFT_BENCH_PYTHON names a Python with
-- warp-lang) on the same scene.
--   luajit bench/mesh.lua [libembree_mesh.so] [RUNS]
-- (scripts/run-bench builds bench/embree_mesh.c into the library.)
local ffi = require "ffi"
local clock = require "bench.clock"
local weft = require "weft"

local now, median = clock.now, clock.median
-- CPU seconds of this process (all threads): on a loaded machine the wall
-- clock mostly measures waiting, so each row also gives CPU-time ratios
local cts = ffi.new("weft_bench_timespec")
local function cpu()
  ffi.C.clock_gettime(2, cts)
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end
local fmt = string.format
local NU, NV, W, H = 500, 200, 1000, 1000
local RUNS = tonumber(arg[2]) or 5

ffi.cdef [[
void *eb_build(const float *pts, int np, const int *idx, int nt);
void eb_cast(void *h, const float *org, const float *dir, int n, float *t, int threads);
void eb_free(void *h);
]]
local eb = arg[1] and arg[1] ~= "" and ffi.load(arg[1]) or nil

local function row(name, weft_s, base_s, base_name, target, weft_c, base_c)
  io.write(fmt("%-34s weft %10.3f ms   %-22s %10.3f ms   ratio %6.3f   (target %s)%s\n", name,
               weft_s * 1e3, base_name, base_s * 1e3, weft_s / base_s, target,
               weft_c and base_c and fmt("   cpu %.1f / %.1f ms", weft_c * 1e3, base_c * 1e3) or ""))
  io.flush()
end

-- the scene (bench/warp_mesh.py builds the same one)
local S = require "bench.mesh_scene"
local np, nt = NU * NV, 2 * NU * NV
local P, I = require("bench.torus")(NU, NV)
local n = W * H
local O, D = S.rays(W, H)
local Q = S.points()
local cast, closest = S.cast, S.closest

-- weft (and Embree, alternating)
local m = weft.Mesh{ points = P, indices = I }
local T, TE = weft.zeros(n, weft.float32), weft.zeros(n, weft.float32)
local C = weft.zeros(Q.size, weft.float32)
weft.launch(cast, n, { m.id, O, D, T }) -- compile
weft.launch(closest, Q.size, { m.id, Q, C })
local pp, ip = ffi.cast("const float *", P.h.data), ffi.cast("const int *", I.h.data)
local op, dp, tp = ffi.cast("const float *", O.h.data), ffi.cast("const float *", D.h.data),
  ffi.cast("float *", TE.h.data)
local tb, tr, tc, tcl, eb_b, eb_1, eb_2 = {}, {}, {}, {}, {}, {}, {}
local cb, cr, cc, ccl, ce_b, ce_1, ce_2 = {}, {}, {}, {}, {}, {}, {}
local scene
for r = 1, RUNS do
  local t0, c0 = now(), cpu()
  m = weft.Mesh{ points = P, indices = I }
  local t1, c1 = now(), cpu()
  m:refit()
  local t2, c2 = now(), cpu()
  weft.launch(cast, n, { m.id, O, D, T })
  local t3, c3 = now(), cpu()
  weft.launch(closest, Q.size, { m.id, Q, C })
  local t4, c4 = now(), cpu()
  tb[r], tr[r], tc[r], tcl[r] = t1 - t0, t2 - t1, t3 - t2, t4 - t3
  cb[r], cr[r], cc[r], ccl[r] = c1 - c0, c2 - c1, c3 - c2, c4 - c3
  if eb then
    if scene then eb.eb_free(scene) end
    local e0, d0 = now(), cpu()
    scene = eb.eb_build(pp, np, ip, nt)
    local e1, d1 = now(), cpu()
    eb.eb_cast(scene, op, dp, n, tp, 1)
    local e2, d2 = now(), cpu()
    eb.eb_cast(scene, op, dp, n, tp, 2)
    eb_b[r], eb_1[r], eb_2[r] = e1 - e0, e2 - e1, now() - e2
    ce_b[r], ce_1[r], ce_2[r] = d1 - d0, d2 - d1, cpu() - d2
    -- Embree's worker threads spin for a while after a cast: without a
    -- pause they take a core from the next run's weft build
    clock.sleep(0.3)
  end
end
local wb, wr, wc, wcl = median(tb), median(tr), median(tc), median(tcl)
local xb, xr, xc, xcl = median(cb), median(cr), median(cc), median(ccl)
local hits = 0
do
  local t = ffi.cast("float *", T.h.data)
  for i = 0, n - 1 do if t[i] >= 0 then hits = hits + 1 end end
end
io.write(fmt("mesh: torus %d triangles, %d rays (%d hit), %d closest points; weft %.2f Mrays/s\n",
             nt, n, hits, Q.size, n / wc / 1e6))
if eb then
  local mism = 0
  local t, te = ffi.cast("float *", T.h.data), ffi.cast("float *", TE.h.data)
  for i = 0, n - 1 do
    if (t[i] >= 0) ~= (te[i] >= 0) or math.abs(t[i] - te[i]) > 1e-3 then mism = mism + 1 end
  end
  -- on this scene 1 ray, through the edge two triangles share: Embree's
  -- default (non-robust) test misses both, weft's watertight one hits;
  -- with RTC_SCENE_FLAG_ROBUST Embree agrees on every ray
  if mism > 0 then
    io.write(fmt("note: %d rays differ from Embree by more than 1e-3 (shared edges Embree's non-robust mode misses)\n", mism))
  end
  row("mesh BVH build vs Embree", wb, median(eb_b), "Embree 3 (own threads)", "moonshot <= 1", xb, median(ce_b))
  row("mesh ray casts vs Embree 1 thread", wc, median(eb_1), "Embree rtcIntersect1 x1", "", xc, median(ce_1))
  row("mesh ray casts vs Embree 2 threads", wc, median(eb_2), "Embree rtcIntersect1 x2", "<= 2", xc, median(ce_2))
  eb.eb_free(scene)
else
  io.write("Embree rows skipped: no libembree_mesh.so\n")
end

-- leave without lua_close: unloading the Embree library under its
-- still-running worker threads crashes the process at exit
local function finish()
  io.stdout:flush()
  os.exit(0)
end

local py = os.getenv("WEFT_BENCH_PYTHON")
if not py or py == "" then
  io.write(fmt("mesh build %.3f ms, refit %.3f ms, rays %.3f ms, closest %.3f ms (Warp rows skipped)\n",
               wb * 1e3, wr * 1e3, wc * 1e3, wcl * 1e3))
  io.write(fmt("  cpu: build %.1f ms, refit %.2f ms, rays %.1f ms, closest %.1f ms\n",
               xb * 1e3, xr * 1e3, xc * 1e3, xcl * 1e3))
  finish()
end
local p = assert(io.popen(fmt("%s bench/warp_mesh.py %d %d %d %d %d 2>/dev/null", py, NU, NV, W, H, RUNS)))
local res = p:read("*a")
p:close()
local wbuild, wrefit = tonumber(res:match("build (%S+)")), tonumber(res:match("refit (%S+)"))
local wrays, wclosest = tonumber(res:match("rays (%S+)")), tonumber(res:match("closest (%S+)"))
local function wcpu(k) return tonumber(res:match(k .. "_cpu (%S+)")) end
local whits = tonumber(res:match("hits (%S+)"))
if not wbuild or not wrays or not wclosest then
  io.write("Warp mesh rows                      skipped: bench/warp_mesh.py failed\n")
  finish()
end
if whits ~= hits then io.write(fmt("note: Warp's rays hit %s times, weft's %d\n", tostring(whits), hits)) end
row("mesh BVH build vs Warp", wb, wbuild, "Warp CPU", "<= 0.5", xb, wcpu("build"))
row("mesh refit vs Warp", wr, wrefit, "Warp CPU", "<= 0.5", xr, wcpu("refit"))
row("mesh ray casts vs Warp", wc, wrays, "Warp CPU (serial)", "<= 0.25", xc, wcpu("rays"))
row("mesh closest points vs Warp", wcl, wclosest, "Warp CPU (serial)", "<= 0.1", xcl, wcpu("closest"))
finish()
