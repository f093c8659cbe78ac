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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* Asks for the pair of children of binary node i, if any, ahead of its
** expansion: nodes are read down the tree, each one a miss where its
** children were made long after it (the build makes a node's second
** child's children after the first child's whole subtree). */
static inline void fetch_kids(const wf_gnode *nodes, int i) {
#if defined(__GNUC__)
  if (nodes[i].b >= 0) __builtin_prefetch(&nodes[nodes[i].a]);
#else
  (void)nodes, (void)i;
#endif
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
    fetch_kids(nodes, kids[j]);
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
    fetch_kids(nodes, c->a), fetch_kids(nodes, c->b);
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

/* pending binary nodes (pairs): at most 3 per level above a wide node
** and 4 for its own children; the built trees are at most WF_GSTACK deep
** (bvh.c) */
#define STACK (2 * (3 * WF_GSTACK + 4))
#define PAR_NODES 32768 /* binary trees from this large collapse on two threads */

/* Wide nodes numbered from n on in W (room for cap), for the subtrees
** pending on stack[0, sp): drained depth first (the top pair first). */
typedef struct part {
  const wf_gnode *nodes;
  wf_gnode4 *W;
  size_t bytes;   /* of W, when it is a block of its own */
  int cap, sp, n; /* n: the count made; -1 when too deep or out of room */
  int stack[STACK];
} part;

static void *drain(void *p) {
  part *q = p;
  while (q->sp && q->sp <= STACK - 8 && q->n < q->cap) {
    int lane = q->stack[--q->sp], b = q->stack[--q->sp];
    q->W[lane >> 2].child[lane & 3] = q->n;
    make_node(q->nodes, q->W, q->n++, b, q->stack, &q->sp);
  }
  if (q->sp) q->n = -1;
  return NULL;
}

/* The primitives under binary node b: its subtree's leaves are one range
** of slots (the build partitions records in place). */
static int prims(const wf_gnode *nodes, int b) {
  int l = b, r = b;
  while (nodes[l].b >= 0)
    l = nodes[l].a;
  while (nodes[r].b >= 0)
    r = nodes[r].b;
  return nodes[r].a - nodes[r].b - nodes[l].a;
}

/* Hands the rightmost of the root's pending subtrees (A's stack bottom),
** about half its primitives, to B: B numbers them from 1 in a block of
** its own (the scratch's, which earlier collapses have faulted in), its
** node 0 standing in for the root's lanes (lane j is still j). 0, or -1
** when there is nothing to share or no memory. */
static int share(part *A, part *B, wf_bvh_scratch *s) {
  int k = A->sp / 2, size[4], total = 0, half = 0, m = 0;
  if (k < 2) return -1;
  for (int i = 0; i < k; i++)
    total += size[i] = prims(A->nodes, A->stack[2 * i]);
  while (m < k - 1 && 2 * (half + size[m]) <= total + size[m])
    half += size[m++];
  if (!m) return -1;
  B->nodes = A->nodes;
  B->cap = 1 + half; /* a wide node per binary inner node at most */
  B->bytes = sizeof(wf_gnode4) * (size_t)B->cap;
  B->W = wf_bvh_scratch_take(s, WF_BVH_WIDE, B->bytes);
  if (!B->W) return -1;
  memset(&B->W[0], 0, sizeof B->W[0]);
  memcpy(B->stack, A->stack, sizeof(int) * 2 * (size_t)m);
  B->sp = 2 * m, B->n = 1;
  memmove(A->stack, A->stack + 2 * m, sizeof(int) * (size_t)(A->sp - 2 * m));
  A->sp -= 2 * m;
  return 0;
}

/* B's nodes after A's, in W (numbers from A->n on): returns the total. */
static int join(part *A, part *B, wf_gnode4 *W) {
  int off = A->n - 1;
  for (int j = 0; j < 4; j++)
    if (B->W[0].child[j] > 0) W[0].child[j] = B->W[0].child[j] + off;
  for (int i = 1; i < B->n; i++) {
    wf_gnode4 *o = &W[i + off];
    *o = B->W[i];
    for (int j = 0; j < 4; j++)
      if (o->child[j] > 0) o->child[j] += off;
  }
  return A->n + B->n - 1;
}

int wf_bvh4_build(const wf_gnode *nodes, int nnodes, int nthreads, wf_bvh_scratch *s,
                  wf_gnode4 **wide, int *nwide) {
  /* one wide node per binary inner node at most, and one for a leaf root.
  ** The block lives with the tree: fresh memory on 4 KB pages, faulted in
  ** as the threads write (a fresh huge page cost 5 ms at times on the
  ** bench VM, which hands freed 2 MB blocks back to its host: 4 KB pages
  ** cost 0.34 ms a MB, every time) */
  int cap = nnodes / 2 + 1, n;
  wf_gnode4 *W = aligned_alloc(64, sizeof(wf_gnode4) * (size_t)cap);
  *wide = NULL, *nwide = 0;
  if (!W) return -1;
  part A = {.nodes = nodes, .W = W, .cap = cap, .n = 1}, B = {.W = NULL};
  make_node(nodes, W, 0, 0, A.stack, &A.sp);
  /* large trees: the root's subtrees in two groups on two threads, each
  ** numbered depth first as one thread would (the left group first) */
  pthread_t th;
  int threaded = nthreads > 1 && nnodes >= PAR_NODES && !share(&A, &B, s) &&
                 !pthread_create(&th, NULL, drain, &B);
  drain(&A);
  if (B.W && threaded) pthread_join(th, NULL);
  if (B.W && !threaded) drain(&B);
  n = A.n;
  if (B.W && A.n >= 0 && B.n >= 0) n = join(&A, &B, W);
  if (B.W && B.n < 0) n = -1;
  if (B.W) wf_bvh_scratch_give(s, WF_BVH_WIDE, B.W, B.bytes);
  /* too deep, or more wide nodes than traversal stacks can name as lanes
  ** 4 w + j in an int */
  if (n < 0 || n > WF_GWIDE_MAX) {
    free(W);
    return -1;
  }
  *wide = W, *nwide = n;
  return 0;
}
