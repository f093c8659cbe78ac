/*
** bvh4.c -- the 4-wide BVH of meshes (query.h: wf_gnode4), made from the
** binary tree of bvh.c.
**
** Collapse: every wide node stands for one inner node of the binary tree
** and takes its two children; while it has fewer than 4, the child with
** the largest surface area that is an inner node gives way to its two
** children, in its place (the lanes stay in the binary tree's order).
** The inner nodes among the 4 become wide nodes in turn, depth first:
** a wide node's number is the count of nodes made before it, so each
** subtree is a range of numbers, and the binary nodes, which the build
** numbered depth first too, are read mostly in order (a breadth-first
** collapse, which read them all over the array, was bound by cache
** misses). Leaves keep their slots in items[]. Each binary node lands in
** at most one lane, so the work is O(nodes).
*/
#include <stdlib.h>

#include "geom/bvh.h"
#include "geom/bvh4.h"

static float half_area(const wf_gnode *n) {
  float dx = n->hi[0] - n->lo[0], dy = n->hi[1] - n->lo[1], dz = n->hi[2] - n->lo[2];
  return dx * dy + dy * dz + dz * dx;
}

/* the area that ranks binary node i for expansion; -1 for leaves */
static float rank(const wf_gnode *nodes, int i) {
  return nodes[i].b >= 0 ? half_area(&nodes[i]) : -1.0f;
}

/* Wide node w stands for binary node b: its lanes, and the binary inner
** nodes among them pushed on *stack (as b, lane 4 w + j pairs; the
** rightmost first, so the leftmost is made next). */
static void make_node(const wf_gnode *nodes, wf_gnode4 *W, int w, int b, int *stack, int *sp) {
  const wf_gnode *n = &nodes[b];
  int kids[4], k = 0;
  float area[4];
  if (n->b < 0) { /* a leaf root: one lane */
    kids[k++] = b;
  } else {
    kids[k++] = n->a;
    kids[k++] = n->b;
  }
  for (int j = 0; j < k; j++)
    area[j] = rank(nodes, kids[j]);
  while (k < 4) {
    int best = 0;
    for (int j = 1; j < k; j++)
      if (area[j] > area[best]) best = j;
    if (area[best] < 0.0f) break;
    const wf_gnode *c = &nodes[kids[best]];
    for (int j = k; j > best + 1; j--)
      kids[j] = kids[j - 1], area[j] = area[j - 1];
    kids[best] = c->a, kids[best + 1] = c->b;
    area[best] = rank(nodes, c->a), area[best + 1] = rank(nodes, c->b);
    k++;
  }
  wf_gnode4 *o = &W[w];
  for (int j = 0; j < 4; j++) {
    const wf_gnode *c = &nodes[kids[j < k ? j : 0]];
    for (int a = 0; a < 3; a++) { /* empty lanes: a point box no query uses */
      o->lo[a][j] = j < k ? c->lo[a] : 0.0f;
      o->hi[a][j] = j < k ? c->hi[a] : 0.0f;
    }
    o->child[j] = j >= k ? 0 : c->b < 0 ? ~c->a : 0; /* inner: set when made */
    o->count[j] = j < k && c->b < 0 ? -c->b : 0;
  }
  for (int j = k - 1; j >= 0; j--)
    if (nodes[kids[j]].b >= 0) {
      stack[(*sp)++] = kids[j];
      stack[(*sp)++] = 4 * w + j;
    }
}

int wf_bvh4_build(const wf_gnode *nodes, int nnodes, wf_gnode4 **wide, int **end, int *nwide) {
  /* one wide node per binary inner node at most, and one for a leaf root */
  int cap = nnodes / 2 + 1;
  wf_gnode4 *W = wf_bvh_big_alloc(sizeof(wf_gnode4) * (size_t)cap);
  int *E = malloc(sizeof(int) * (size_t)cap);
  /* pending binary nodes (pairs): at most 3 per level above a wide node
  ** and 4 for its own children; the built trees are at most WF_GSTACK
  ** deep (bvh.c) */
  int stack[2 * (3 * WF_GSTACK + 4)], sp = 0, n = 0;
  const int top = (int)(sizeof stack / sizeof stack[0]) - 8;
  *wide = NULL, *end = NULL, *nwide = 0;
  if (!W || !E) {
    free(W), free(E);
    return -1;
  }
  make_node(nodes, W, n++, 0, stack, &sp);
  while (sp && sp <= top && n <= WF_GWIDE_MAX) {
    int lane = stack[--sp], b = stack[--sp];
    W[lane >> 2].child[lane & 3] = n;
    make_node(nodes, W, n++, b, stack, &sp);
  }
  /* too deep, or more wide nodes than traversal stacks can name as lanes
  ** 4 w + j in an int */
  if (sp || n > WF_GWIDE_MAX) {
    free(W), free(E);
    return -1;
  }
  /* a subtree ends where its last child's ends (children come later) */
  for (int w = n - 1; w >= 0; w--) {
    E[w] = w + 1;
    for (int j = 0; j < 4; j++)
      if (W[w].child[j] > 0 && E[W[w].child[j]] > E[w]) E[w] = E[W[w].child[j]];
  }
  *wide = W, *end = E, *nwide = n;
  return 0;
}
