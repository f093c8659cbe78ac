/* A C host ray-casts its own mesh through Lua: it wraps its points and
** indices (no copy) and a result buffer, builds a weft.Mesh in a script,
** reads the hits a kernel wrote into its memory, moves its points in
** place, refits and casts again; bad indices are a status and a message.
** The memory mesh builds keep for the next one lives as long as a mesh
** does: the last mesh collected frees it. */
#include <stdint.h>
#include <string.h>

#include "keep_mesh.h"
#include "weft.h"
#include "wtest.h"

int main(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return 1;
  /* a square at z = 1 made of two triangles, and three rays down */
  float pts[4 * 3] = {-1, -1, 1, 1, -1, 1, 1, 1, 1, -1, 1, 1};
  int32_t idx[6] = {0, 1, 2, 0, 2, 3};
  float t[3] = {0, 0, 0};
  const int64_t pshape[1] = {4}, ishape[1] = {6}, tshape[1] = {3};
  CHECK_INT(weft_wrap(W, "pts", pts, "vec3f", 1, pshape, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "idx", idx, "int32", 1, ishape, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "t", t, "float32", 1, tshape, "cpu"), 0);
  int rc =
      weft_dostring(W, "local weft = require 'weft'\n"
                       "mesh = weft.Mesh{ points = pts, indices = idx }\n"
                       "cast = weft.kernel{ id = weft.uint64, t = weft.array(weft.float32),\n"
                       "  function(id, t)\n"
                       "    local i = weft.tid()\n"
                       "    local o = weft.vec3(weft.float32(i) * 0.75, 0.25, 0.0)\n"
                       "    local r = weft.mesh_query_ray(id, o, weft.vec3(0.0, 0.0, 1.0), 10.0)\n"
                       "    t[i] = r.result and r.t or -1.0\n"
                       "  end }\n"
                       "weft.launch(cast, 3, { mesh.id, t })\n");
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
  CHECK(t[0] == 1.0f && t[1] == 1.0f && t[2] == -1.0f); /* x = 1.5 misses the square */
  /* the mesh reads the host's memory: move it in place, refit, cast */
  for (int i = 0; i < 4; i++) {
    pts[3 * i] *= 2.0f;
    pts[3 * i + 2] = 3.0f;
  }
  rc = weft_dostring(W, "mesh:refit()\nweft.launch(cast, 3, { mesh.id, t })\n");
  CHECK_INT(rc, 0);
  CHECK(t[0] == 3.0f && t[1] == 3.0f && t[2] == 3.0f);
  /* an index out of range: a status and the message */
  idx[5] = 7;
  rc = weft_dostring(W, "weft.Mesh{ points = pts, indices = idx }\n");
  CHECK(rc != 0);
  CHECK(strstr(weft_errmsg(W), "weft.Mesh: indices[5] = 7 is out of range for the points") != NULL);
  /* build memory: kept while a mesh lives (the records of 2 triangles,
  ** 64 bytes each, and their nodes), freed with the last one; a Bvh
  ** object takes none */
  idx[5] = 3;
  rc =
      weft_dostring(W, "local weft = require 'weft'\n"
                       "local C, P = require('weft.cdef').C, require('weft.internal')\n"
                       "local function bytes() return tonumber(C.wf_geom_scratch_bytes(P.rt)) end\n"
                       "local function gc() collectgarbage() collectgarbage() end\n"
                       "assert(bytes() >= 128, 'kept while a mesh lives: ' .. bytes())\n"
                       "local other = weft.Mesh{ points = pts, indices = idx }\n"
                       "mesh = nil gc()\n"
                       "assert(bytes() >= 128, 'kept while the other mesh lives: ' .. bytes())\n"
                       "other = nil gc()\n"
                       "assert(bytes() == 0, 'freed with the last mesh: ' .. bytes())\n"
                       "local b = weft.Bvh(pts, pts)\n"
                       "assert(bytes() == 0, 'a Bvh takes none: ' .. bytes())\n"
                       "local m = weft.Mesh{ points = pts, indices = idx }\n"
                       "assert(bytes() >= 128, 'kept again: ' .. bytes())\n"
                       "m = nil gc()\n"
                       "assert(bytes() == 0, 'freed again: ' .. bytes())\n");
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
  /* more points or triangles than a mesh takes (refit's 32-bit vertex
  ** offsets, int face counts): an error before anything reads the arrays,
  ** here host views far larger than their small buffers */
  const int64_t bigp[1] = {1431655766}, bigi[1] = {3 * (int64_t)(INT32_MAX / 4 + 1)};
  CHECK_INT(weft_wrap(W, "bigpts", pts, "vec3f", 1, bigp, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "bigidx", idx, "int32", 1, bigi, "cpu"), 0);
  rc = weft_dostring(W, "weft.Mesh{ points = bigpts, indices = idx }\n");
  CHECK(rc != 0);
  CHECK(strstr(weft_errmsg(W), "weft.Mesh: points has 1431655766 entries, more than a mesh "
                               "takes (1431655765)") != NULL);
  rc = weft_dostring(W, "weft.Mesh{ points = pts, indices = bigidx }\n");
  CHECK(rc != 0);
  CHECK(strstr(weft_errmsg(W), "weft.Mesh: indices has 536870912 triangles, more than a mesh "
                               "takes (536870911)") != NULL);
  weft_close(W);
  WTEST_DONE();
}
