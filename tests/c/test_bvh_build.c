/* wf_bvh_build on good and bad boxes: empty, one primitive, coinciding
** centroids, flat and huge coordinates, NaN boxes, random soups and 1M
** boxes, on one and two threads. Every tree must hold each primitive in
** exactly one leaf, name children after their parents in pairs at even
** indices, stay within the traversal stack's depth, and give every node a
** box holding its children's (the union exactly, for finite input; refit
** recomputes the same boxes). The runtime refuses boxes that are not
** finite, but the build must not lose a primitive over them either. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "geom/bvh.h"
#include "geom/bvh4.h"
#include "wtest.h"

typedef struct boxes {
  int n;
  float *lo, *hi;
} boxes;

static boxes boxes_new(int n) {
  boxes b = {n, malloc(sizeof(float) * 3 * (size_t)(n ? n : 1)),
             malloc(sizeof(float) * 3 * (size_t)(n ? n : 1))};
  return b;
}

static uint32_t rng = 12345;
static float frand(void) { /* [0, 1) */
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / 16777216.0f;
}

/* a is b's lower bound / upper bound / equal on component k (NaN passes:
** no order to keep) */
static int le(float a, float b) {
  return !(a > b);
}

/* Checks the tree of b's boxes built on nthreads threads; returns its
** depth. exact: the boxes are finite, so every node box is the union. */
static int check_tree(const boxes *b, int nthreads, int exact) {
  wf_gnode *N = NULL;
  int *items = NULL, nn = -1;
  CHECK_INT(wf_bvh_build(b->n, b->lo, b->hi, nthreads, &N, &items, &nn), 0);
  if (b->n == 0) {
    CHECK(N == NULL && items == NULL && nn == 0);
    return 0;
  }
  CHECK(N != NULL && items != NULL);
  if (!N || !items) return 0;
  CHECK(nn >= 1 && nn <= 2 * b->n + 2);
  int n = b->n, *seen = calloc((size_t)n, sizeof(int)), *slot = calloc((size_t)n, sizeof(int));
  int *stack = malloc(sizeof(int) * 2 * (size_t)(nn + 1)), sp = 0, maxdepth = 0, bad = 0;
  char *visited = calloc((size_t)nn, 1);
  stack[sp++] = 0, stack[sp++] = 0;
  while (sp && !bad) {
    int depth = stack[--sp], i = stack[--sp];
    if (i < 0 || i >= nn || visited[i]) {
      bad = 1;
      break;
    }
    visited[i] = 1;
    maxdepth = depth > maxdepth ? depth : maxdepth;
    const wf_gnode *x = &N[i];
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    if (x->b < 0) {
      if (x->a < 0 || x->a - x->b > n) {
        bad = 2;
        break;
      }
      for (int k = x->a; k < x->a - x->b; k++) {
        slot[k]++;
        int p = items[k];
        if (p < 0 || p >= n) {
          bad = 3;
          break;
        }
        seen[p]++;
        for (int c = 0; c < 3; c++) {
          lo[c] = fminf(lo[c], b->lo[3 * p + c]);
          hi[c] = fmaxf(hi[c], b->hi[3 * p + c]);
        }
      }
    } else {
      if (x->a <= i || x->a % 2 || x->b != x->a + 1 || x->b >= nn) {
        bad = 4;
        break;
      }
      for (int s = 0; s < 2; s++) {
        const wf_gnode *ch = &N[s ? x->b : x->a];
        for (int c = 0; c < 3; c++) {
          lo[c] = fminf(lo[c], ch->lo[c]);
          hi[c] = fmaxf(hi[c], ch->hi[c]);
        }
        stack[sp++] = s ? x->b : x->a, stack[sp++] = depth + 1;
      }
    }
    for (int c = 0; c < 3; c++) {
      if (!le(x->lo[c], lo[c]) || !le(hi[c], x->hi[c])) bad = 5;
      if (exact && (x->lo[c] != lo[c] || x->hi[c] != hi[c])) bad = 6;
    }
  }
  CHECK_INT(bad, 0);
  int once = 1;
  for (int k = 0; k < n; k++)
    once &= seen[k] == 1 && slot[k] == 1;
  CHECK(once);
  CHECK(maxdepth < WF_GSTACK);
  if (exact && !bad) { /* refit from the same boxes: the same tree boxes */
    wf_gnode *R = malloc(sizeof(wf_gnode) * (size_t)nn);
    memcpy(R, N, sizeof(wf_gnode) * (size_t)nn);
    wf_bvh_refit(R, nn, items, b->lo, b->hi);
    int same = 1;
    for (int i = 0; i < nn; i++)
      if (visited[i])
        for (int c = 0; c < 3; c++)
          same &= R[i].lo[c] == N[i].lo[c] && R[i].hi[c] == N[i].hi[c];
    CHECK(same);
    free(R);
  }
  free(seen), free(slot), free(stack), free(visited), free(N), free(items);
  return maxdepth;
}

/* wf_bvh_boxes_fn over a boxes */
static void copy_boxes(void *ctx, int begin, int end, float *lo, float *hi) {
  const boxes *b = ctx;
  memcpy(lo, b->lo + 3 * begin, sizeof(float) * 3 * (size_t)(end - begin));
  memcpy(hi, b->hi + 3 * begin, sizeof(float) * 3 * (size_t)(end - begin));
}

/* What the slots callback saw: per slot, the calls over it and the item
** it read; per slot index, whether a call began or ended there. */
typedef struct slots_seen {
  const boxes *b;
  int *calls, *item;
  char *edge;
} slots_seen;

static void boxes_fn(void *ctx, int begin, int end, float *lo, float *hi) {
  copy_boxes((void *)((slots_seen *)ctx)->b, begin, end, lo, hi);
}

static void record_slots(void *ctx, int begin, int end, const int *items) {
  slots_seen *x = ctx;
  __atomic_store_n(&x->edge[begin], 1, __ATOMIC_RELAXED);
  __atomic_store_n(&x->edge[end], 1, __ATOMIC_RELAXED);
  for (int k = begin; k < end; k++) {
    __atomic_add_fetch(&x->calls[k], 1, __ATOMIC_RELAXED);
    x->item[k] = items[k];
  }
}

/* The build's slots callback (on nthreads threads) sees every slot once,
** with its final item, in ranges of whole leaves. */
static void check_slots(const boxes *b, int nthreads) {
  int n = b->n;
  slots_seen x = {b, calloc((size_t)n + 1, sizeof(int)), calloc((size_t)n + 1, sizeof(int)),
                  calloc((size_t)n + 1, 1)};
  wf_gnode *N = NULL;
  int *items = NULL, nn = 0;
  size_t bytes = 0;
  CHECK_INT(wf_bvh_build_fn(n, boxes_fn, record_slots, &x, nthreads, NULL, &N, &items, &nn, &bytes),
            0);
  char *start = calloc((size_t)n + 1, 1);
  for (int i = 0; i < nn; i++)
    if (N[i].b < 0 && i != 1) start[N[i].a] = 1;
  start[n] = 1;
  int ok = 1;
  for (int k = 0; k < n; k++)
    ok &= x.calls[k] == 1 && x.item[k] == items[k];
  for (int k = 0; k <= n; k++)
    ok &= !x.edge[k] || start[k];
  CHECK(ok);
  free(start), free(x.calls), free(x.item), free(x.edge), free(N), free(items);
}

static void check_both(const boxes *b, int exact) {
  check_tree(b, 1, exact);
  check_tree(b, 2, exact);
  check_slots(b, 1);
  check_slots(b, 2);
}

/* n random boxes of size up to s in the unit cube */
static boxes soup(int n, float s) {
  boxes b = boxes_new(n);
  for (int i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      b.lo[3 * i + c] = frand();
      b.hi[3 * i + c] = b.lo[3 * i + c] + s * frand();
    }
  return b;
}

/* The boxes from a function (in chunks) build the tree the arrays do,
** also in the reused (dirty) records and nodes of earlier builds. */
static void check_fn(const boxes *b) {
  wf_gnode *N, *M;
  int *it, *jt, nn, mm;
  wf_bvh_scratch s = {{NULL}, {0}};
  CHECK_INT(wf_bvh_build(b->n, b->lo, b->hi, 1, &N, &it, &nn), 0);
  for (int round = 0; round < 3; round++) {
    size_t bytes = 0;
    CHECK_INT(wf_bvh_build_fn(b->n, copy_boxes, NULL, (void *)b, 1, round ? &s : NULL, &M, &jt, &mm,
                              &bytes),
              0);
    CHECK_INT(mm, nn);
    CHECK(!memcmp(N, M, sizeof(wf_gnode) * (size_t)nn));
    CHECK(!memcmp(it, jt, sizeof(int) * (size_t)b->n));
    if (M) memset(M, 0x5a, bytes); /* what the next build finds there */
    wf_bvh_scratch_give(round ? &s : NULL, WF_BVH_NODES, M, bytes);
    free(jt);
  }
  wf_bvh_scratch_free(&s);
  free(N), free(it);
}

/* Built and collapsed into 4-wide nodes (bvh4.c) on two threads (the
** root's binning and the collapse split over them), b's tree is the one
** thread's: the same wide nodes and slots, byte for byte
** (the binary nodes are numbered in the order the threads make them).
** The second collapse thread's block comes from s, dirty from the calls
** before. */
static void check_wide(const boxes *b, wf_bvh_scratch *s) {
  wf_gnode *N[2];
  wf_gnode4 *W[2];
  int *it[2], nn[2], nw[2];
  for (int t = 0; t < 2; t++) {
    CHECK_INT(wf_bvh_build(b->n, b->lo, b->hi, t + 1, &N[t], &it[t], &nn[t]), 0);
    CHECK_INT(wf_bvh4_build(N[t], nn[t], t + 1, t ? s : NULL, &W[t], &nw[t]), 0);
  }
  CHECK_INT(nw[1], nw[0]);
  CHECK(nw[0] > 1 && nw[0] < nn[0]);
  CHECK(nw[0] == nw[1] && !memcmp(W[0], W[1], sizeof(wf_gnode4) * (size_t)nw[0]));
  CHECK(!memcmp(it[0], it[1], sizeof(int) * (size_t)b->n));
  for (int t = 0; t < 2; t++)
    free(W[t]), free(N[t]), free(it[t]);
}

static void boxes_free(boxes *b) {
  free(b->lo), free(b->hi);
}

/* Small nodes weigh the three axes' splits together (bvh.c: sweep3):
** 40 thin boxes in two slabs across axis a (at 0 and 5), spread over
** 10 x 10 on the others. Splitting the slabs apart costs the least SAH
** (2 * 20 * area(10 x 10 x 0.1) against 2 * 20 * area(5 x 10 x 5.1) for
** any other cut): the root's children are the slabs, on every axis. */
static void check_slabs(int a) {
  boxes b = boxes_new(40);
  for (int i = 0; i < b.n; i++)
    for (int c = 0; c < 3; c++) {
      b.lo[3 * i + c] = c == a ? (float)(5 * (i % 2)) : 10 * frand();
      b.hi[3 * i + c] = b.lo[3 * i + c] + (c == a ? 0.1f : 0.01f);
    }
  wf_gnode *N = NULL;
  int *items = NULL, nn = 0;
  CHECK_INT(wf_bvh_build(b.n, b.lo, b.hi, 1, &N, &items, &nn), 0);
  CHECK(N && N[0].b >= 0);
  for (int k = 0; N && N[0].b >= 0 && k < 2; k++) {
    const wf_gnode *c = &N[k ? N[0].b : N[0].a];
    CHECK(c->hi[a] - c->lo[a] < 0.2f);
  }
  free(N), free(items);
  boxes_free(&b);
}

int main(void) {
  boxes b = boxes_new(0); /* empty */
  check_both(&b, 1);
  boxes_free(&b);

  for (int n = 1; n <= 9; n++) { /* one primitive and small leaves */
    b = soup(n, 0.1f);
    check_both(&b, 1);
    boxes_free(&b);
  }

  b = boxes_new(5000); /* all the same box */
  for (int i = 0; i < 3 * b.n; i++)
    b.lo[i] = 0.25f, b.hi[i] = 0.5f;
  check_both(&b, 1);
  for (int i = 0; i < b.n; i++) /* one centroid, boxes of every size */
    for (int c = 0; c < 3; c++) {
      float r = frand();
      b.lo[3 * i + c] = 1 - r, b.hi[3 * i + c] = 1 + r;
    }
  check_both(&b, 1);
  for (int i = 0; i < b.n; i++) /* two centroids, ties everywhere */
    for (int c = 0; c < 3; c++)
      b.lo[3 * i + c] = b.hi[3 * i + c] = (float)(i % 2);
  check_both(&b, 1);
  for (int i = 0; i < b.n; i++) /* flat: points on a line */
    for (int c = 0; c < 3; c++)
      b.lo[3 * i + c] = b.hi[3 * i + c] = c == 1 ? frand() : 0;
  check_both(&b, 1);
  for (int i = 0; i < 3 * b.n; i++) /* huge: centroid sums overflow */
    b.lo[i] = b.hi[i] = (frand() - 0.5f) * 6e37f * 10;
  check_both(&b, 1);
  for (int i = 0; i < b.n; i++) /* a geometric row: SAH peels one off */
    for (int c = 0; c < 3; c++)
      b.lo[3 * i + c] = b.hi[3 * i + c] = c ? 0 : powf(1.5f, (float)(i % 200));
  check_both(&b, 1);
  for (int i = 0; i < 3 * b.n; i++) /* infinite (and 0 * inf: NaN) */
    b.lo[i] = b.hi[i] = (frand() - 0.5f) * INFINITY;
  check_both(&b, 0);
  boxes_free(&b);

  b = soup(20000, 0.01f); /* NaN boxes among good ones */
  for (int i = 0; i < b.n; i += 7)
    b.lo[3 * i + i % 3] = NAN;
  for (int i = 3; i < b.n; i += 11)
    b.hi[3 * i + 1] = NAN;
  check_both(&b, 0);
  for (int i = 0; i < 3 * b.n; i++) /* all NaN */
    b.lo[i] = b.hi[i] = NAN;
  check_both(&b, 0);
  boxes_free(&b);

  for (int a = 0; a < 3; a++)
    check_slabs(a);

  b = soup(100000, 0.01f); /* a soup, on the parallel path */
  check_both(&b, 1);
  check_fn(&b);
  wf_bvh_scratch s = {{NULL}, {0}};
  check_wide(&b, &s);
  if (s.p[WF_BVH_WIDE]) memset(s.p[WF_BVH_WIDE], 0x5a, s.size[WF_BVH_WIDE]);
  for (int i = 0; i < b.n; i++) /* in order along x, the widest: each half on one side */
    b.hi[3 * i] = (b.lo[3 * i] = 4.0f * (float)i / (float)b.n) + 0.01f;
  check_wide(&b, &s);
  for (int i = 0; i < 3 * b.n; i++) /* lopsided: one far box, the rest piled up */
    b.lo[i] = b.hi[i] = i < 3 ? 1e6f : frand() * (i % 3 ? 1e-3f : 1.0f);
  check_wide(&b, &s);
  CHECK(s.p[WF_BVH_WIDE] != NULL);
  wf_bvh_scratch_free(&s);
  boxes_free(&b);
  b = soup(1000000, 0.002f); /* 1M boxes */
  CHECK(check_tree(&b, 2, 1) > 10);
  boxes_free(&b);
  WTEST_DONE();
}
