/*
** bvh.c -- BVH build (binned surface area heuristic) and refit over
** primitive boxes, in the layout of query.h (wf_gnode, items).
**
** Build: top-down. A node's primitives are binned by centroid into
** NBINS slots (one per primitive in smaller nodes) along each axis;
** sweeping the bins from both ends gives the SAH cost area(L) * n(L) +
** area(R) * n(R) of every bin boundary, and the cheapest split
** partitions the node's slice of items[] in place. A node
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

#include "geom/bvh.h"
#include "geom/query.h"

#define NBINS 16
#define LEAF_MIN 4
#define LEAF_MAX 8
#define MAX_DEPTH 48
#define PAR_MIN 32768 /* subtrees at least this large may get a thread */
#define ONE_AXIS 64   /* nodes this large bin along one axis */

typedef struct box {
  float lo[3], hi[3];
} box;

static void box_empty(box *b) {
  for (int k = 0; k < 3; k++)
    b->lo[k] = FLT_MAX, b->hi[k] = -FLT_MAX;
}
/* unconditional stores of selects: minss/maxss, no branches (the boxes
** are finite: mesh.c checks) */
static void box_add(box *b, const float *lo, const float *hi) {
  for (int k = 0; k < 3; k++) {
    b->lo[k] = lo[k] < b->lo[k] ? lo[k] : b->lo[k];
    b->hi[k] = hi[k] > b->hi[k] ? hi[k] : b->hi[k];
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

/* A primitive's box and id, moved along with the partitions so that every
** pass over a node's primitives reads memory in order. */
typedef struct rec {
  float lo[3], hi[3];
  int id, pad;
} rec;

static float cen(const rec *r, int k) {
  return 0.5f * (r->lo[k] + r->hi[k]);
}

typedef struct build {
  rec *recs;
  wf_gnode *nodes;
  int nnodes;  /* __atomic */
  int threads; /* __atomic: threads still allowed to start */
} build;

typedef struct task {
  build *B;
  int node, begin, end, depth;
  box bb, cb; /* bounds of the boxes and of their centroids */
} task;

static void make_leaf(wf_gnode *n, int begin, int end) {
  n->a = begin;
  n->b = -(end - begin);
}

static void subtree(build *B, task *t);

static void *subtree_thread(void *p) {
  subtree(((task *)p)->B, p);
  return NULL;
}

/* Bounds of recs[begin, end) and of their centroids. */
static void bounds(const rec *r, int begin, int end, box *bb, box *cb) {
  box_empty(bb);
  box_empty(cb);
  for (int i = begin; i < end; i++) {
    float c[3] = {cen(&r[i], 0), cen(&r[i], 1), cen(&r[i], 2)};
    box_add(bb, r[i].lo, r[i].hi);
    box_addpt(cb, c);
  }
}

/* The element of rank k on axis (quickselect), so the median split gives
** halves of equal size even when centroids repeat. */
static void select_kth(rec *r, int begin, int end, int k, int axis) {
  while (end - begin > 1) {
    float piv = cen(&r[begin + (end - begin) / 2], axis);
    int i = begin, lt = begin, gt = end; /* [begin,lt) < piv, [gt,end) > piv */
    while (i < gt) {
      float c = cen(&r[i], axis);
      if (c < piv) {
        rec t = r[i];
        r[i++] = r[lt];
        r[lt++] = t;
      } else if (c > piv) {
        rec t = r[i];
        r[i] = r[--gt];
        r[gt] = t;
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

typedef struct bin {
  box b; /* the boxes whose centroids fall in the bin */
  int n;
} bin;

static int bin_of(const rec *r, int a, float lo, float scale, int nb) {
  int b = (int)((cen(r, a) - lo) * scale);
  return b < 0 ? 0 : b >= nb ? nb - 1 : b;
}

/* Bins the n records at r by centroid along axis a (one axis per pass:
** a short loop the compiler keeps in registers). */
static void bin_axis(const rec *r, int n, int a, float lo, float scale, int nb, bin *bins) {
  for (int i = 0; i < n; i++) {
    bin *x = &bins[bin_of(&r[i], a, lo, scale, nb)];
    x->n++;
    box_add(&x->b, r[i].lo, r[i].hi);
  }
}

static void subtree(build *B, task *t) {
  wf_gnode *n = &B->nodes[t->node];
  rec *R = B->recs;
  int begin = t->begin, end = t->end, count = end - begin;
  memcpy(n->lo, t->bb.lo, sizeof n->lo);
  memcpy(n->hi, t->bb.hi, sizeof n->hi);
  if (count <= LEAF_MIN || t->depth >= MAX_DEPTH) {
    make_leaf(n, begin, end);
    return;
  }
  /* bin along the three axes in one pass */
  bin bins[3][NBINS];
  float scale[3];
  /* small nodes: a bin per primitive at most (the sweeps cost per bin) */
  const int nb = count < NBINS ? count : NBINS;
  /* large nodes bin along their widest centroid axis only (a third of
  ** the work where most of it is; the trees trace as fast) */
  int wide = 0;
  for (int a = 1; a < 3; a++)
    if (t->cb.hi[a] - t->cb.lo[a] > t->cb.hi[wide] - t->cb.lo[wide]) wide = a;
  for (int a = 0; a < 3; a++) {
    float ext = t->cb.hi[a] - t->cb.lo[a];
    scale[a] = ext > 0 && (count < ONE_AXIS || a == wide) ? (float)nb / ext : 0;
    for (int b = 0; b < nb; b++) {
      box_empty(&bins[a][b].b);
      bins[a][b].n = 0;
    }
  }
  for (int a = 0; a < 3; a++)
    if (scale[a] > 0) bin_axis(R + begin, count, a, t->cb.lo[a], scale[a], nb, bins[a]);
  /* the cheapest boundary: area(L) n(L) + area(R) n(R) */
  float best = FLT_MAX;
  int baxis = -1, bbin = 0;
  for (int a = 0; a < 3; a++) {
    if (!(scale[a] > 0)) continue;
    float rarea[NBINS];
    int rcnt[NBINS];
    box acc;
    box_empty(&acc);
    int c = 0;
    for (int b = nb - 1; b > 0; b--) {
      box_add(&acc, bins[a][b].b.lo, bins[a][b].b.hi);
      c += bins[a][b].n;
      rarea[b] = box_area(&acc);
      rcnt[b] = c;
    }
    box_empty(&acc);
    c = 0;
    for (int b = 0; b < nb - 1; b++) {
      box_add(&acc, bins[a][b].b.lo, bins[a][b].b.hi);
      c += bins[a][b].n;
      if (!c || !rcnt[b + 1]) continue;
      float cost = box_area(&acc) * (float)c + rarea[b + 1] * (float)rcnt[b + 1];
      if (cost < best) best = cost, baxis = a, bbin = b;
    }
  }
  task l = {.B = B, .begin = begin, .depth = t->depth + 1}, r = l;
  int mid;
  if (baxis >= 0) {
    /* a leaf when splitting costs more than testing everything here
    ** (a traversal step costs about one primitive test) */
    float area = box_area(&t->bb);
    if (count <= LEAF_MAX && best + area >= area * (float)count) {
      make_leaf(n, begin, end);
      return;
    }
    /* partition by bin: the same arithmetic as the binning */
    int i = begin, j = end - 1;
    float lo = t->cb.lo[baxis], sc = scale[baxis];
    while (i <= j) {
      if (bin_of(&R[i], baxis, lo, sc, nb) <= bbin) {
        i++;
      } else {
        rec x = R[i];
        R[i] = R[j];
        R[j--] = x;
      }
    }
    mid = i;
    box_empty(&l.bb), box_empty(&l.cb), box_empty(&r.bb), box_empty(&r.cb);
    for (int b = 0; b < nb; b++) {
      task *side = b <= bbin ? &l : &r;
      box_add(&side->bb, bins[baxis][b].b.lo, bins[baxis][b].b.hi);
    }
    /* the children bin over their boxes (which hold their centroids):
    ** no centroid bounds to keep per bin */
    l.cb = l.bb, r.cb = r.bb;
  } else { /* centroids all equal: halves by count along the widest axis */
    int axis = 0;
    for (int k = 1; k < 3; k++)
      if (t->bb.hi[k] - t->bb.lo[k] > t->bb.hi[axis] - t->bb.lo[axis]) axis = k;
    mid = begin + count / 2;
    select_kth(R, begin, end, mid, axis);
    bounds(R, begin, mid, &l.bb, &l.cb);
    bounds(R, mid, end, &r.bb, &r.cb);
  }
  int c0 = __atomic_fetch_add(&B->nnodes, 2, __ATOMIC_RELAXED);
  n->a = c0;
  n->b = c0 + 1;
  l.node = c0, l.end = mid;
  r.node = c0 + 1, r.begin = mid, r.end = end;
  /* the larger half on a new thread while threads remain */
  task *big = (mid - begin) >= (end - mid) ? &l : &r, *small = big == &l ? &r : &l;
  pthread_t th;
  int threaded = 0;
  if (big->end - big->begin >= PAR_MIN && __atomic_sub_fetch(&B->threads, 1, __ATOMIC_RELAXED) >= 0)
    threaded = pthread_create(&th, NULL, subtree_thread, big) == 0;
  if (!threaded) subtree(B, big);
  subtree(B, small);
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
  B.recs = malloc(sizeof(rec) * (size_t)n);
  int *it = malloc(sizeof(int) * (size_t)n);
  /* 2n nodes: the root, a pad, n - 1 pairs; 64-byte aligned, so that
  ** each pair of children (even index) fills one cache line */
  size_t nbytes = sizeof(wf_gnode) * (size_t)(2 * n + 2);
  B.nodes = aligned_alloc(64, (nbytes + 63) & ~(size_t)63);
  if (!B.recs || !it || !B.nodes) {
    free(B.recs);
    free(it);
    free(B.nodes);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    memcpy(B.recs[i].lo, lo + 3 * i, sizeof B.recs[i].lo);
    memcpy(B.recs[i].hi, hi + 3 * i, sizeof B.recs[i].hi);
    B.recs[i].id = i;
    B.recs[i].pad = 0;
  }
  /* node 1 pads the pairs to even indices: a one-item leaf no parent
  ** names (refit gives it a box; traversal never reaches it) */
  B.nodes[1] = (wf_gnode){{0, 0, 0}, 0, {0, 0, 0}, -1};
  B.nnodes = 2;
  B.threads = nthreads > 1 ? nthreads - 1 : 0;
  task root = {.B = &B, .end = n};
  bounds(B.recs, 0, n, &root.bb, &root.cb);
  subtree(&B, &root);
  for (int i = 0; i < n; i++)
    it[i] = B.recs[i].id;
  free(B.recs);
  *nodes = B.nodes;
  *items = it;
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
