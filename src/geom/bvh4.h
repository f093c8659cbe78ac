/*
** bvh4.h -- the 4-wide BVH that every mesh query walks (query.h:
** wf_gnode4), made from the binary tree of bvh.c after its build (code in
** bvh4.c); refits then work on the wide nodes alone.
*/
#ifndef WF_GEOM_BVH4_H
#define WF_GEOM_BVH4_H

#include "geom/query.h"
#include "util/util.h"

/* Collapse the binary tree nodes[0 .. nnodes) (built by wf_bvh_build) into
** *wide (*nwide nodes, 64-byte aligned) in depth-first preorder, so that
** the wide nodes of every subtree are the range [w, (*end)[w]) and a
** refit can walk a range backwards, children before parents; lanes keep
** the binary tree's left-to-right order, so leaves come in slot order.
** Both malloc'd. Large trees collapse on two threads when nthreads > 1
** (the same nodes, numbered the same). 0, or -1 on out of memory or more
** than WF_GWIDE_MAX wide nodes. */
WF_INTERNAL int wf_bvh4_build(const wf_gnode *nodes, int nnodes, int nthreads, wf_gnode4 **wide,
                              int **end, int *nwide);

#endif
