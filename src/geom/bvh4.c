/*
** bvh4.c -- the 4-wide BVH of meshes (query.h: wf_gnode4), made from the
** binary tree of bvh.c.
**
** Collapse: every wide node stands for one inner node of the binary tree
** and takes its two children; while it has fewer than 4, the child with
** the largest surface area that is an inner node gives way to its two
** children. The inner nodes among the 4 become wide nodes in turn
** (numbered in the order they are made, so siblings sit side by side and
** the top of the tree is compact); leaves keep their slots in items[].
** Each binary node lands in at most one slot, so the work is O(nodes).
**
** Refit: after the binary refit, each binary node that stands in a lane
** copies its box there (lane[]).
*/
#include <stdlib.h>

#include "geom/bvh.h"
#include "geom/bvh4.h"

static float half_area(const wf_gnode *n) {
  float dx = n->hi[0] - n->lo[0], dy = n->hi[1] - n->lo[1], dz = n->hi[2] - n->lo[2];
  return dx * dy + dy * dz + dz * dx;
}

int wf_bvh4_build(const wf_gnode *nodes, int nnodes, wf_gnode4 **wide, int **lane, int *nwide) {
  /* one wide node per binary inner node at most, and one for a leaf root */
  int cap = nnodes / 2 + 1;
  wf_gnode4 *W = wf_bvh_big_alloc(sizeof(wf_gnode4) * (size_t)cap);
  int *L = malloc(sizeof(int) * (size_t)nnodes);
  int *root = malloc(sizeof(int) * (size_t)cap); /* the binary node of each wide node */
  *wide = NULL, *lane = NULL, *nwide = 0;
  if (!W || !L || !root) {
    free(W), free(L), free(root);
    return -1;
  }
  for (int i = 0; i < nnodes; i++)
    L[i] = -1;
  int n = 1;
  root[0] = 0;
  for (int i = 0; i < n; i++) {
    wf_gnode4 *w = &W[i];
    const wf_gnode *b = &nodes[root[i]];
    int kids[4], k = 0;
    float area[4];
    if (b->b < 0) { /* a leaf root: one lane */
      kids[k++] = root[i];
    } else {
      kids[k++] = b->a;
      kids[k++] = b->b;
    }
    for (int j = 0; j < k; j++)
      area[j] = nodes[kids[j]].b >= 0 ? half_area(&nodes[kids[j]]) : -1.0f;
    while (k < 4) {
      int best = 0;
      for (int j = 1; j < k; j++)
        if (area[j] > area[best]) best = j;
      if (area[best] < 0.0f) break;
      const wf_gnode *c = &nodes[kids[best]];
      kids[best] = c->a, kids[k] = c->b;
      area[best] = nodes[c->a].b >= 0 ? half_area(&nodes[c->a]) : -1.0f;
      area[k] = nodes[c->b].b >= 0 ? half_area(&nodes[c->b]) : -1.0f;
      k++;
    }
    for (int j = 0; j < 4; j++) {
      if (j >= k) { /* empty: a point box no query uses (child 0 marks it) */
        for (int c = 0; c < 3; c++)
          w->lo[c][j] = w->hi[c][j] = 0.0f;
        w->child[j] = 0, w->count[j] = 0;
        continue;
      }
      const wf_gnode *c = &nodes[kids[j]];
      L[kids[j]] = 4 * i + j;
      wf_bvh4_lane_box(W, 4 * i + j, c);
      if (c->b < 0) {
        w->child[j] = ~c->a;
        w->count[j] = -c->b;
      } else {
        root[n] = kids[j];
        w->child[j] = n++;
        w->count[j] = 0;
      }
    }
  }
  free(root);
  if (n > WF_GWIDE_MAX) { /* traversal stacks name lanes 4 w + j in an int */
    free(W), free(L);
    return -1;
  }
  *wide = W, *lane = L, *nwide = n;
  return 0;
}
