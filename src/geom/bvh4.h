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
** *wide (*nwide nodes, 64-byte aligned), and give in *lane, for each binary
** node, the lane 4 * w + j of the wide node w it stands in (-1: none), for
** refits to copy its box there (wf_bvh4_lane_box). Both malloc'd. 0, or -1
** on out of memory or more than WF_GWIDE_MAX wide nodes. */
WF_INTERNAL int wf_bvh4_build(const wf_gnode *nodes, int nnodes, wf_gnode4 **wide, int **lane,
                              int *nwide);

/* Lane l (4 * w + j) of the wide nodes takes the box of binary node n. */
static inline void wf_bvh4_lane_box(wf_gnode4 *wide, int l, const wf_gnode *n) {
  wf_gnode4 *w = &wide[l >> 2];
  for (int c = 0; c < 3; c++) {
    w->lo[c][l & 3] = n->lo[c];
    w->hi[c][l & 3] = n->hi[c];
  }
}

#endif
