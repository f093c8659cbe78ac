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
** *nodes and *items are malloc'd. 0, or -1 on out of memory. */
WF_INTERNAL int wf_bvh_build(int n, const float *lo, const float *hi, int nthreads,
                             wf_gnode **nodes, int **items, int *nnodes);
/* The boxes of primitives [begin, end) into lo, hi (3 floats each, from
** index 0); called on the build's threads, for chunks of the primitives. */
typedef void (*wf_bvh_boxes_fn)(void *ctx, int begin, int end, float *lo, float *hi);
/* wf_bvh_build over the boxes fn gives (no arrays of all the boxes). */
WF_INTERNAL int wf_bvh_build_fn(int n, wf_bvh_boxes_fn fn, void *ctx, int nthreads,
                                wf_gnode **nodes, int **items, int *nnodes);
/* bytes (rounded up to 64), 64-byte aligned, on transparent huge pages when
** large; free() frees it. NULL on out of memory. */
WF_INTERNAL void *wf_bvh_big_alloc(size_t bytes);
/* Recompute node bounds from new primitive boxes. */
WF_INTERNAL void wf_bvh_refit(wf_gnode *nodes, int nnodes, const int *items, const float *lo,
                              const float *hi);

#endif
