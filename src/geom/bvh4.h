/*
** bvh4.h -- the 4-wide BVH that mesh ray casts and closest-point queries
** walk (query.h: wf_gnode4), made from the binary tree of bvh.c after its
** build, and refit from it (code in bvh4.c).
*/
#ifndef WF_GEOM_BVH4_H
#define WF_GEOM_BVH4_H

#include "geom/query.h"
#include "util/util.h"

/* Collapse the binary tree nodes[0 .. nnodes) (built by wf_bvh_build) into
** *wide (*nwide nodes, 64-byte aligned) and *src, the binary node behind
** each of the 4 slots of every wide node (-1: empty), which refits read.
** Both malloc'd. 0, or -1 on out of memory. */
WF_INTERNAL int wf_bvh4_build(const wf_gnode *nodes, int nnodes, wf_gnode4 **wide, int **src,
                              int *nwide);
/* Copy the boxes of a refit binary tree into the wide nodes. */
WF_INTERNAL void wf_bvh4_refit(wf_gnode4 *wide, int nwide, const int *src, const wf_gnode *nodes);

#endif
