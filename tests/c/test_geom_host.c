/* A C host uses volumes and hash grids through Lua: it wraps its own
** buffers (no copy) as a dense block and as points, builds a weft.Volume
** and a weft.HashGrid in a script, and reads what kernels wrote into its
** memory; a bad file is a status and a message. */
#include <stdint.h>
#include <string.h>

#include "geom/hashgrid.h"
#include "geom/nanovdb.h"
#include "runtime/geom.h"
#include "runtime/wf_launch.h"
#include "weft.h"
#include "wtest.h"

/* The static library's objects come in only when referenced: keep what the
** Lua layer reaches through ffi.C (the registry of live objects too: kernels
** check their ids against it). */
__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;
__attribute__((used)) static void *const keep_geom[] = {
    (void *)wf_volume_load,     (void *)wf_volume_from_dense,    (void *)wf_volume_save,
    (void *)wf_volume_info_get, (void *)wf_volume_free,          (void *)wf_volume_sample_points,
    (void *)wf_volume_sizes,    (void *)wf_volume_bytes,         (void *)wf_volume_device_desc,
    (void *)wf_hashgrid_new,    (void *)wf_hashgrid_reserve,     (void *)wf_hashgrid_build,
    (void *)wf_hashgrid_free,   (void *)wf_hashgrid_device_desc, (void *)wf_hashgrid_array,
    (void *)wf_geom_track,      (void *)wf_geom_untrack,         (void *)wf_geom_kind};

int main(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return 1;
  float dense[3 * 4 * 5], pts[4 * 3] = {0, 0, 0, 0.2f, 0, 0, 0.9f, 0.9f, 0.9f, 0.1f, 0.1f, 0.1f};
  for (int i = 0; i < 60; i++)
    dense[i] = (float)i;
  float out[2] = {0, 0};
  int32_t counts[4] = {0, 0, 0, 0};
  const int64_t dshape[3] = {3, 4, 5}, pshape[1] = {4}, oshape[1] = {2};
  CHECK_INT(weft_wrap(W, "dense", dense, "float32", 3, dshape, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "pts", pts, "vec3f", 1, pshape, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "out", out, "float32", 1, oshape, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "counts", counts, "int32", 1, (const int64_t[]){4}, "cpu"), 0);
  int rc =
      weft_dostring(W, "local weft = require 'weft'\n"
                       "local v = weft.Volume.from_dense(dense, { background = -1 })\n"
                       "local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.float32),\n"
                       "  function(id, out)\n"
                       "    out[0] = weft.volume_sample_f(id, weft.vec3(1.0, 2.0, 3.5), 1)\n"
                       "    out[1] = weft.volume_lookup_f(id, 7, 0, 0)\n"
                       "  end }\n"
                       "weft.launch(k, 1, { v.id, out })\n"
                       "local g = weft.HashGrid(4, 4, 4)\n"
                       "g:build(pts, 0.3)\n"
                       "local q = weft.kernel{ id = weft.uint64, p = weft.array(weft.vec3),\n"
                       "  n = weft.array(weft.int32), function(id, p, n)\n"
                       "    local i = weft.tid()\n"
                       "    for j in weft.hash_grid_query(id, p[i], 0.3) do\n"
                       "      if weft.length(p[j] - p[i]) <= 0.3 then n[i] = n[i] + 1 end\n"
                       "    end\n"
                       "  end }\n"
                       "weft.launch(q, 4, { g.id, pts, counts })\n");
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
  /* voxel (1, 2, 3) and (1, 2, 4): 33 and 34; outside: the background */
  CHECK(out[0] == 33.5f);
  CHECK(out[1] == -1.0f);
  CHECK_INT(counts[0], 3);
  CHECK_INT(counts[2], 1);
  rc = weft_dostring(W, "local weft = require 'weft'\n"
                        "weft.Volume.load_from_nvdb('NanoVDB0 but not really')\n");
  CHECK(rc != 0);
  CHECK(strstr(weft_errmsg(W), "weft.Volume.load_from_nvdb: unsupported NanoVDB version 931.1368 "
                               "(weft reads 32.x)") != NULL);
  weft_close(W);
  WTEST_DONE();
}
