/*
** geom_track.c -- volumes and hash grids join the runtime's registry of live
** geometry objects (geom_registry.c), so that a debug-mode kernel can tell their
** ids from stale or made-up ones. Their host code (nanovdb.c, hashgrid.c)
** knows no runtime; the Lua objects track their ids through these two.
*/
#include "runtime/geom.h"

/* Add id (of kind WF_GEOM_*) to rt's registry; returns the registry with
** a reference for the object to keep, or NULL (out of memory, message
** set). */
void *wf_geom_track(wf_rt *rt, uint64_t id, int kind) {
  wf_georeg *g = wf_georeg_of(rt);
  if (!g) {
    wf_rt_seterr(rt, WEFT_ERRMEM, "out of memory for the registry of geometry objects");
    return NULL;
  }
  wf_georeg_retain(g);
  if (wf_georeg_add(g, id, kind)) {
    wf_georeg_release(g);
    wf_rt_seterr(rt, WEFT_ERRMEM, "out of memory for the registry of geometry objects");
    return NULL;
  }
  return g;
}

/* Remove id and drop the object's reference to the registry. */
void wf_geom_untrack(void *reg, uint64_t id) {
  if (!reg) return;
  wf_georeg_remove(reg, id);
  wf_georeg_release(reg);
}
