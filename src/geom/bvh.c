/*
** bvh.c -- BVH build (binned surface area heuristic) and refit over
** primitive boxes, in the layout of query.h (wf_gnode, items).
**
** Build: top-down. A node's primitives are binned by centroid into
** NBINS slots along each axis; sweeping the bins from both ends gives the
** SAH cost area(L) * n(L) + area(R) * n(R) of every bin boundary, and the
** cheapest split partitions the node's slice of items[] in place. A node
** becomes a leaf when it holds at most LEAF_MIN primitives, when no split
** beats the cost of intersecting them all (up to LEAF_MAX), or at
** MAX_DEPTH (so traversal stacks of WF_GSTACK entries never overflow).
** Centroids that coincide (no binning possible) split at the median.
** The two children of a node are allocated side by side after it, with an
** atomic counter, so the large subtrees near the root build on several
** threads and every child still has a larger index than its parent.
**
** Refit: the nodes backwards (children first).
*/
#include <float.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "geom/geom.h"
#include "geom/query.h"

#define NBINS 16
#define LEAF_MIN 2
#define LEAF_MAX 8
#define MAX_DEPTH 48
#define PAR_MIN 32768 /* subtrees at least this large may get a thread */

typedef struct box {
  float lo[3], hi[3];
} box;

static void box_empty(box *b) {
  for (int k = 0; k < 3; k++)
    b->lo[k] = FLT_MAX, b->hi[k] = -FLT_MAX;
}
static void box_add(box *b, const float *lo, const float *hi) {
  for (int k = 0; k < 3; k++) {
    if (lo[k] < b->lo[k]) b->lo[k] = lo[k];
    if (hi[k] > b->hi[k]) b->hi[k] = hi[k];
  }
}
static void box_addpt(box *b, const float *p) {
  box_add(b, p, p);
}
static float box_area(const box *b) {
  float dx = b->hi[0] - b->lo[0], dy = b->hi[1] - b->lo[1], dz = b->hi[2] - b->lo[2];
  if (!(dx >= 0 && dy >= 0 && dz >= 0)) return 0;
  return dx * dy + dy * dz + dz * dx;
}

typedef struct build {
  const float *lo, *hi; /* per primitive */
  float *cen;           /* centroids, 3 per primitive */
  int *items;
  wf_gnode *nodes;
  int nnodes;  /* __atomic */
  int threads; /* __atomic: threads still allowed to start */
} build;

typedef struct task {
  build *B;
  int node, begin, end, depth;
} task;

static void make_leaf(wf_gnode *n, int begin, int end) {
  n->a = begin;
  n->b = -(end - begin);
}

static void subtree(build *B, int node, int begin, int end, int depth);

static void *subtree_thread(void *p) {
  task *t = p;
  subtree(t->B, t->node, t->begin, t->end, t->depth);
  return NULL;
}

/* Partition items[begin, end) by centroid on axis below `split`; returns
** the first index of the right part. */
static int partition(build *B, int begin, int end, int axis, float split) {
  int i = begin, j = end - 1;
  while (i <= j) {
    if (B->cen[3 * B->items[i] + axis] < split) {
      i++;
    } else {
      int t = B->items[i];
      B->items[i] = B->items[j];
      B->items[j--] = t;
    }
  }
  return i;
}

/* The element of rank k on axis (quickselect), so the median split gives
** halves of equal size even when centroids repeat. */
static void select_kth(build *B, int begin, int end, int k, int axis) {
  int *it = B->items;
  while (end - begin > 1) {
    float piv = B->cen[3 * it[begin + (end - begin) / 2] + axis];
    int i = begin, lt = begin, gt = end; /* [begin,lt) < piv, [gt,end) > piv */
    while (i < gt) {
      float c = B->cen[3 * it[i] + axis];
      if (c < piv) {
        int t = it[i];
        it[i++] = it[lt];
        it[lt++] = t;
      } else if (c > piv) {
        int t = it[i];
        it[i] = it[--gt];
        it[gt] = t;
      } else {
        i++;
      }
    }
    if (k < lt)
      end = lt;
    else if (k >= gt)
      begin = gt;
    else
      return;
  }
}

static void subtree(build *B, int node, int begin, int end, int depth) {
  wf_gnode *n = &B->nodes[node];
  box bb, cb;
  box_empty(&bb);
  box_empty(&cb);
  for (int i = begin; i < end; i++) {
    int p = B->items[i];
    box_add(&bb, B->lo + 3 * p, B->hi + 3 * p);
    box_addpt(&cb, B->cen + 3 * p);
  }
  memcpy(n->lo, bb.lo, sizeof n->lo);
  memcpy(n->hi, bb.hi, sizeof n->hi);
  int count = end - begin;
  if (count <= LEAF_MIN || depth >= MAX_DEPTH) {
    make_leaf(n, begin, end);
    return;
  }
  /* best SAH split over the three axes */
  float best = FLT_MAX, split = 0;
  int baxis = -1;
  for (int axis = 0; axis < 3; axis++) {
    float ext = cb.hi[axis] - cb.lo[axis];
    if (!(ext > 0)) continue;
    float scale = NBINS / ext;
    box bins[NBINS];
    int cnt[NBINS] = {0};
    for (int b = 0; b < NBINS; b++)
      box_empty(&bins[b]);
    for (int i = begin; i < end; i++) {
      int p = B->items[i];
      int b = (int)((B->cen[3 * p + axis] - cb.lo[axis]) * scale);
      b = b < 0 ? 0 : b >= NBINS ? NBINS - 1 : b;
      cnt[b]++;
      box_add(&bins[b], B->lo + 3 * p, B->hi + 3 * p);
    }
    float rarea[NBINS];
    int rcnt[NBINS];
    box acc;
    box_empty(&acc);
    int c = 0;
    for (int b = NBINS - 1; b > 0; b--) {
      box_add(&acc, bins[b].lo, bins[b].hi);
      c += cnt[b];
      rarea[b] = box_area(&acc);
      rcnt[b] = c;
    }
    box_empty(&acc);
    c = 0;
    for (int b = 0; b < NBINS - 1; b++) {
      box_add(&acc, bins[b].lo, bins[b].hi);
      c += cnt[b];
      if (!c || !rcnt[b + 1]) continue;
      float cost = box_area(&acc) * (float)c + rarea[b + 1] * (float)rcnt[b + 1];
      if (cost < best) {
        best = cost;
        baxis = axis;
        split = cb.lo[axis] + (float)(b + 1) / scale;
      }
    }
  }
  int mid = -1;
  if (baxis >= 0) {
    /* a leaf when splitting costs more than testing everything here
    ** (traversal step ~ one primitive test) */
    if (count <= LEAF_MAX && best + box_area(&bb) >= box_area(&bb) * (float)count) {
      make_leaf(n, begin, end);
      return;
    }
    mid = partition(B, begin, end, baxis, split);
  }
  if (mid <= begin || mid >= end) { /* no usable split: halves by count */
    int axis = 0;
    for (int k = 1; k < 3; k++)
      if (bb.hi[k] - bb.lo[k] > bb.hi[axis] - bb.lo[axis]) axis = k;
    mid = begin + count / 2;
    select_kth(B, begin, end, mid, axis);
  }
  int l = __atomic_fetch_add(&B->nnodes, 2, __ATOMIC_RELAXED);
  n->a = l;
  n->b = l + 1;
  /* the larger half on a new thread while threads remain */
  int big = (mid - begin) > (end - mid) ? 0 : 1;
  pthread_t th;
  int threaded = 0;
  task t = {B, big ? l + 1 : l, big ? mid : begin, big ? end : mid, depth + 1};
  if (t.end - t.begin >= PAR_MIN && __atomic_sub_fetch(&B->threads, 1, __ATOMIC_RELAXED) >= 0)
    threaded = pthread_create(&th, NULL, subtree_thread, &t) == 0;
  if (!threaded) subtree(B, t.node, t.begin, t.end, t.depth);
  if (big)
    subtree(B, l, begin, mid, depth + 1);
  else
    subtree(B, l + 1, mid, end, depth + 1);
  if (threaded) pthread_join(th, NULL);
}

int wf_bvh_build(int n, const float *lo, const float *hi, int nthreads, wf_gnode **nodes,
                 int **items, int *nnodes) {
  *nodes = NULL;
  *items = NULL;
  *nnodes = 0;
  if (n <= 0) return 0;
  build B;
  memset(&B, 0, sizeof B);
  B.lo = lo;
  B.hi = hi;
  B.cen = malloc(sizeof(float) * 3 * (size_t)n);
  B.items = malloc(sizeof(int) * (size_t)n);
  B.nodes = malloc(sizeof(wf_gnode) * (size_t)(2 * n));
  if (!B.cen || !B.items || !B.nodes) {
    free(B.cen);
    free(B.items);
    free(B.nodes);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    B.items[i] = i;
    for (int k = 0; k < 3; k++)
      B.cen[3 * i + k] = 0.5f * (lo[3 * i + k] + hi[3 * i + k]);
  }
  B.nnodes = 1;
  B.threads = nthreads > 1 ? nthreads - 1 : 0;
  subtree(&B, 0, 0, n, 0);
  free(B.cen);
  *nodes = B.nodes;
  *items = B.items;
  *nnodes = B.nnodes;
  return 0;
}

void wf_bvh_refit(wf_gnode *nodes, int nnodes, const int *items, const float *lo, const float *hi) {
  for (int i = nnodes - 1; i >= 0; i--) {
    wf_gnode *n = &nodes[i];
    box b;
    box_empty(&b);
    if (n->b < 0) {
      for (int k = n->a; k < n->a - n->b; k++)
        box_add(&b, lo + 3 * items[k], hi + 3 * items[k]);
    } else {
      box_add(&b, nodes[n->a].lo, nodes[n->a].hi);
      box_add(&b, nodes[n->b].lo, nodes[n->b].hi);
    }
    memcpy(n->lo, b.lo, sizeof n->lo);
    memcpy(n->hi, b.hi, sizeof n->hi);
  }
}
