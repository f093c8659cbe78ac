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
** Refit: every slot copies the box of the binary node it stands for
** (src[]), after the binary refit.
*/
#include <stdlib.h>
#include <string.h>

#include "geom/bvh4.h"

static float half_area(const wf_gnode *n) {
  float dx = n->hi[0] - n->lo[0], dy = n->hi[1] - n->lo[1], dz = n->hi[2] - n->lo[2];
  return dx * dy + dy * dz + dz * dx;
}

static void set_slot(wf_gnode4 *w, int j, const wf_gnode *n) {
  for (int c = 0; c < 3; c++) {
    w->lo[c][j] = n->lo[c];
    w->hi[c][j] = n->hi[c];
  }
}

int wf_bvh4_build(const wf_gnode *nodes, int nnodes, wf_gnode4 **wide, int **src, int *nwide) {
  /* one wide node per binary inner node at most, and one for a leaf root */
  int cap = nnodes / 2 + 1;
  size_t bytes = ((size_t)cap * sizeof(wf_gnode4) + 63) & ~(size_t)63;
  wf_gnode4 *W = aligned_alloc(64, bytes);
  int *S = malloc(sizeof(int) * 4 * (size_t)cap);
  int *root = malloc(sizeof(int) * (size_t)cap); /* the binary node of each wide node */
  *wide = NULL, *src = NULL, *nwide = 0;
  if (!W || !S || !root) {
    free(W), free(S), free(root);
    return -1;
  }
  int n = 1;
  root[0] = 0;
  for (int i = 0; i < n; i++) {
    wf_gnode4 *w = &W[i];
    const wf_gnode *b = &nodes[root[i]];
    int kids[4], k = 0;
    if (b->b < 0) { /* a leaf root: one slot */
      kids[k++] = root[i];
    } else {
      kids[k++] = b->a;
      kids[k++] = b->b;
    }
    while (k < 4) {
      int best = -1;
      float area = -1.0f;
      for (int j = 0; j < k; j++) {
        const wf_gnode *c = &nodes[kids[j]];
        if (c->b >= 0 && half_area(c) > area) area = half_area(c), best = j;
      }
      if (best < 0) break;
      const wf_gnode *c = &nodes[kids[best]];
      kids[best] = c->a;
      kids[k++] = c->b;
    }
    for (int j = 0; j < 4; j++) {
      if (j >= k) { /* empty: a point box no query uses (child 0 marks it) */
        for (int c = 0; c < 3; c++)
          w->lo[c][j] = w->hi[c][j] = 0.0f;
        w->child[j] = 0, w->count[j] = 0;
        S[4 * i + j] = -1;
        continue;
      }
      const wf_gnode *c = &nodes[kids[j]];
      set_slot(w, j, c);
      S[4 * i + j] = kids[j];
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
  *wide = W, *src = S, *nwide = n;
  return 0;
}

void wf_bvh4_refit(wf_gnode4 *wide, int nwide, const int *src, const wf_gnode *nodes) {
  for (int i = 0; i < nwide; i++)
    for (int j = 0; j < 4; j++)
      if (src[4 * i + j] >= 0) set_slot(&wide[i], j, &nodes[src[4 * i + j]]);
}
