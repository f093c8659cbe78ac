/*
** bvh.h -- building and refitting the bounding volume hierarchy that the
** mesh and Bvh queries of query.h walk (code in bvh.c). Knows no runtime:
** the objects that own a tree (src/runtime/geom_mesh.c) call these.
*/
#ifndef WF_GEOM_BVH_H
#define WF_GEOM_BVH_H

#include <stddef.h>

#include "geom/query.h"
#include "util/util.h"

/* Build over n boxes (lo, hi: 3 floats each per box, any NaN-free values);
** *nodes comes from wf_bvh_big_alloc, *items from malloc. 0, or -1 on out
** of memory. */
WF_INTERNAL int wf_bvh_build(int n, const float *lo, const float *hi, int nthreads,
                             wf_gnode **nodes, int **items, int *nnodes);
/* The boxes of primitives [begin, end) into lo, hi (3 floats each, from
** index 0); called on the build's threads, for chunks of the primitives. */
typedef void (*wf_bvh_boxes_fn)(void *ctx, int begin, int end, float *lo, float *hi);
/* Blocks of memory a build takes and hands back, kept by its caller from
** one build to the next: the records (WF_BVH_RECS), for trees that live
** only until they are collapsed the nodes (WF_BVH_NODES), and the second
** thread's wide nodes in a collapse (WF_BVH_WIDE, bvh4.c). Pages a build
** has used before cost nothing; fresh ones are faulted in and zeroed by
** the kernel: 20 builds of the 200k-triangle bench torus in a row spent
** 15% of their CPU samples in clear_page_erms (perf, cpu-clock, on a
** 2-core AMD EPYC VM), 5% with the scratch. */
enum { WF_BVH_RECS, WF_BVH_NODES, WF_BVH_WIDE, WF_BVH_NSCRATCH };
typedef struct wf_bvh_scratch {
  void *p[WF_BVH_NSCRATCH];
  size_t size[WF_BVH_NSCRATCH];
} wf_bvh_scratch;
/* A block of at least bytes for use k (s NULL: wf_bvh_big_alloc). */
WF_INTERNAL void *wf_bvh_scratch_take(wf_bvh_scratch *s, int k, size_t bytes);
/* Block p of bytes back for use k (kept, the smaller block freed; s NULL:
** freed). */
WF_INTERNAL void wf_bvh_scratch_give(wf_bvh_scratch *s, int k, void *p, size_t bytes);
WF_INTERNAL void wf_bvh_scratch_free(wf_bvh_scratch *s);
/* Slots [begin, end) of items are final (called on the build's threads,
** once for every slot, for ranges of whole leaves: work on the primitives
** in slot order that then runs beside the build, their items in cache). */
typedef void (*wf_bvh_slots_fn)(void *ctx, int begin, int end, const int *items);
/* wf_bvh_build over the boxes fn gives (no arrays of all the boxes), with
** the records from s and, when s is set, the nodes too: the caller gives
** them back (WF_BVH_NODES, *nodes_bytes bytes) when done with them. slots
** (may be NULL) takes ctx too. */
WF_INTERNAL int wf_bvh_build_fn(int n, wf_bvh_boxes_fn fn, wf_bvh_slots_fn slots, void *ctx,
                                int nthreads, wf_bvh_scratch *s, wf_gnode **nodes, int **items,
                                int *nnodes, size_t *nodes_bytes);
/* bytes (rounded up to 64), 64-byte aligned, on transparent huge pages when
** large; free() frees it. NULL on out of memory. A fresh 4 KB page costs
** a fault (first touch of 8 MB: 5.5 ms on 4 KB pages, 0.3-1.3 ms on huge
** pages, on that VM), but a block of its own is fresh memory every time,
** where malloc's heap reuses what freed meshes left: the arrays that live
** with a mesh (triangles, indices, items) stay with malloc. */
WF_INTERNAL void *wf_bvh_big_alloc(size_t bytes);
/* Recompute node bounds from new primitive boxes. */
WF_INTERNAL void wf_bvh_refit(wf_gnode *nodes, int nnodes, const int *items, const float *lo,
                              const float *hi);

#endif
