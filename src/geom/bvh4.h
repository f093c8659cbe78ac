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
** children come after their parents and a refit can walk the nodes
** backwards, children first; lanes keep the binary tree's left-to-right
** order, so leaves come in slot order. Large trees collapse on two threads
** when nthreads > 1, numbered as on one, the second thread's nodes in the
** WF_BVH_WIDE block of s (may be NULL). malloc'd. 0, or -1 on out of
** memory or more than WF_GWIDE_MAX wide nodes. */
struct wf_bvh_scratch;
WF_INTERNAL int wf_bvh4_build(const wf_gnode *nodes, int nnodes, int nthreads,
                              struct wf_bvh_scratch *s, wf_gnode4 **wide, int *nwide);

#endif
