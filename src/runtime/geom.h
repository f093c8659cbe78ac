/*
** geom.h -- host side of the geometry objects: the registry of live ids
** (geom_registry.c), meshes and Bvh objects (geom_mesh.c) (reached from Lua through
** the FFI: lua/weft/geom.lua, declared in lua/weft/cdef.lua).
**
** Takes: the runtime (wf_rt, arrays), the kernel-side layouts of query.h.
** Gives: objects whose id (the descriptor's address) kernels pass to the
** native builtins of native.h.
**
** Ownership: a wf_geom owns its descriptor, nodes and items; it borrows
** the arrays it was made from (the Lua object keeps them alive). It holds
** one reference to its runtime's registry, so it may outlive the runtime.
*/
#ifndef WF_RT_GEOM_H
#define WF_RT_GEOM_H

#include <stdint.h>

#include "geom/bvh.h"
#include "geom/native.h"
#include "geom/query.h"
#include "runtime/wf_rt.h"

/* ---- registry of live objects (geom_registry.c) ---- */
typedef struct wf_georeg wf_georeg;
/* The runtime's registry, made on first use (NULL on out of memory). */
WF_INTERNAL wf_georeg *wf_georeg_of(wf_rt *rt);
WF_INTERNAL void wf_georeg_retain(wf_georeg *g);
WF_INTERNAL void wf_georeg_release(void *g);
/* Build memory kept between mesh builds (geom/bvh.h) while a mesh lives:
** a build borrows it (lend: into *s, empty), gives it back (keep: from *s,
** freed when no mesh is registered); the last mesh removed frees it. */
WF_INTERNAL void wf_georeg_scratch_lend(wf_georeg *g, struct wf_bvh_scratch *s);
WF_INTERNAL void wf_georeg_scratch_keep(wf_georeg *g, struct wf_bvh_scratch *s);
/* The bytes of build memory rt's registry keeps (tests). */
WF_FFI size_t wf_geom_scratch_bytes(wf_rt *rt);
WF_INTERNAL int wf_georeg_add(wf_georeg *g, uint64_t id, int kind); /* 0 ok, -1 OOM */
WF_INTERNAL void wf_georeg_remove(wf_georeg *g, uint64_t id);
/* The kind of a live id, 0 if it is none (thread-safe against launches). */
WF_INTERNAL int wf_georeg_kind(const void *g, uint64_t id);
/* The same for the FFI: rt's registry kind of id (0: none). */
WF_FFI int wf_geom_kind(wf_rt *rt, uint64_t id);

/* ---- objects (geom_mesh.c): the FFI surface ---- */
typedef struct wf_geom wf_geom;
WF_FFI int wf_geom_mesh_new(wf_rt *rt, const wf_array *points, const wf_array *indices,
                            const wf_array *velocities, int winding, wf_geom **out);
WF_FFI int wf_geom_bvh_new(wf_rt *rt, const wf_array *lowers, const wf_array *uppers,
                           wf_geom **out);
/* After the points (boxes) moved: new bounds, same tree. */
WF_FFI int wf_geom_refit(wf_rt *rt, wf_geom *g);
/* Where mesh_get_point's adjoint accumulates (NULL arrays: nowhere). */
WF_FFI int wf_geom_set_grads(wf_rt *rt, wf_geom *g, const wf_array *points_grad,
                             const wf_array *velocities_grad);
/* Where mesh_get_point's tangent is read (weft.jvp; NULL arrays: zero). */
WF_FFI int wf_geom_set_tangents(wf_rt *rt, wf_geom *g, const wf_array *points_tan,
                                const wf_array *velocities_tan);
WF_FFI uint64_t wf_geom_id(const wf_geom *g);
/* The host memory g holds (its tree, triangles and copies), which the Lua
** layer counts towards forcing a collection: the collector sees only the
** small object that holds g. */
WF_FFI size_t wf_geom_bytes(const wf_geom *g);
/* Volumes and hash grids (geom_track.c): their ids in the registry. */
WF_FFI void *wf_geom_track(wf_rt *rt, uint64_t id, int kind);
WF_FFI void wf_geom_untrack(void *reg, uint64_t id);
WF_FFI void wf_geom_free(wf_geom *g);

#endif
