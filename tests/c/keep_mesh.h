/* For C tests that build meshes through Lua: the static library's objects
** come in only when referenced, so keep what the Lua layer reaches through
** ffi.C (launches, and the mesh and Bvh objects). */
#ifndef WTEST_KEEP_MESH_H
#define WTEST_KEEP_MESH_H
#include <stdint.h>

#include "runtime/geom.h"
#include "runtime/wf_launch.h"

__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;
__attribute__((used)) static void *const keep_geom[] = {
    (void *)wf_geom_mesh_new,     (void *)wf_geom_bvh_new, (void *)wf_geom_refit,
    (void *)wf_geom_set_grads,    (void *)wf_geom_id,      (void *)wf_geom_free,
    (void *)wf_geom_scratch_bytes};
#endif
