/*
** bvh.c -- BVH build (binned surface area heuristic) and refit over
** primitive boxes, in the layout of query.h (wf_gnode, items).
**
** Build: top-down. A node's primitives are binned by centroid into
** NBINS slots along its widest centroid axis (large nodes) or into
** count / 2 + 2 slots, SMALL_BINS at most, along each axis (nodes under
** ONE_AXIS primitives: the sweeps cost per bin, and trees over a torus,
** a sphere and a box soup kept their SAH cost within 0.05%); sweeping
** the bins from both ends gives the SAH cost area(L) * n(L) + area(R) *
** n(R) of every bin boundary (small nodes sweep their three axes at
** once, one per vector lane), and the cheapest split partitions the
** node's slice of the records in place (the bins give both halves' box
** bounds, and large nodes' bins their centroid bounds). A node becomes
** a leaf when it holds at most LEAF_MIN primitives, when no split beats
** the cost of intersecting them all (up to LEAF_MAX), or at MAX_DEPTH (so
** traversal stacks of WF_GSTACK entries never overflow). Centroids that
** no bin boundary separates split at the median.
** The two children of a node are allocated side by side after it, with an
** atomic counter, so subtrees build on several threads and every child
** still has a larger index than its parent. A thread that waits for
** another lends its core back (B->idle), so a large subtree left alone
** splits over the idle cores again. The caller's work on the primitives
** in slot order (B->slots) runs on those threads too, a subtree of up to
** SLOTS_BATCH primitives at a time once it is built.
**
** The box arithmetic runs on 4-lane vectors (SSE on x86-64, the
** compiler's vector extensions elsewhere); lane 3 is never read back.
**
** Refit: the nodes backwards (children first).
*/
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "geom/bvh.h"
#include "geom/query.h"

#define NBINS 16
#define SMALL_BINS 12
#define LEAF_MIN 4
#define LEAF_MAX 8
#define MAX_DEPTH 48
#define PAR_MIN 4096   /* subtrees at least this large may get a thread */
#define ONE_AXIS 64    /* nodes this large bin along one axis */
#define PAR_INIT 65536 /* primitives from which the records fill on two threads */
#define PAR_BIN 65536  /* nodes from which the binning may take a second core */

/* ---- 4-lane float vectors ---- */
#if defined(__SSE2__)
#include <emmintrin.h>
typedef __m128 v4;
static inline v4 v4_ld(const float *p) {
  return _mm_load_ps(p);
}
static inline void v4_st(float *p, v4 a) {
  _mm_store_ps(p, a);
}
static inline v4 v4_set(float x) {
  return _mm_set1_ps(x);
}
static inline v4 v4_add(v4 a, v4 b) {
  return _mm_add_ps(a, b);
}
static inline v4 v4_sub(v4 a, v4 b) {
  return _mm_sub_ps(a, b);
}
static inline v4 v4_mul(v4 a, v4 b) {
  return _mm_mul_ps(a, b);
}
/* a < b ? a : b per lane (b when either is NaN), as minps */
static inline v4 v4_min(v4 a, v4 b) {
  return _mm_min_ps(a, b);
}
static inline v4 v4_max(v4 a, v4 b) {
  return _mm_max_ps(a, b);
}
/* lanes 0-2 of a, lane 3 zero */
static inline v4 v4_xyz(v4 a) {
  return _mm_and_ps(a, _mm_castsi128_ps(_mm_set_epi32(0, -1, -1, -1)));
}
/* a > 0 ? a : 0 (0 for NaN), as maxss */
static inline float max0(float a) {
  return _mm_cvtss_f32(_mm_max_ss(_mm_set_ss(a), _mm_setzero_ps()));
}
/* truncated to int: lanes 0-3 to out, lanes 0-2 to i (from registers,
** not reloaded from out: a load of a lane of a vector just stored waited
** on the store, a sixth of bin_three's time) */
static inline void v4_int(v4 a, int *out, int *i) {
  __m128i v = _mm_cvttps_epi32(a);
  _mm_storeu_si128((__m128i *)out, v);
  i[0] = _mm_cvtsi128_si32(v);
  i[1] = _mm_cvtsi128_si32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 1, 1)));
  i[2] = _mm_cvtsi128_si32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)));
}
/* x, y, z: lanes 0, 1, 2 of a, b and c side by side (lane 3: c's) */
static inline void v4_t3(v4 a, v4 b, v4 c, v4 *x, v4 *y, v4 *z) {
  v4 ab0 = _mm_unpacklo_ps(a, b), ab2 = _mm_unpackhi_ps(a, b);
  v4 cc0 = _mm_unpacklo_ps(c, c), cc2 = _mm_unpackhi_ps(c, c);
  *x = _mm_movelh_ps(ab0, cc0), *y = _mm_movehl_ps(cc0, ab0), *z = _mm_movelh_ps(ab2, cc2);
}
/* 4 ints as floats */
static inline v4 v4_ints(const int *p) {
  return _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)p));
}
/* a < b ? x : y per lane (y when either is NaN) */
static inline v4 v4_lt_sel(v4 a, v4 b, v4 x, v4 y) {
  v4 m = _mm_cmplt_ps(a, b);
  return _mm_or_ps(_mm_and_ps(m, x), _mm_andnot_ps(m, y));
}
/* a > 0 ? a : 0 per lane (0 for NaN) */
static inline v4 v4_max0(v4 a) {
  return _mm_max_ps(a, _mm_setzero_ps());
}
/* m ? a : b (m 0 or 1) */
static inline v4 v4_pick(int m, v4 a, v4 b) {
  v4 k = _mm_castsi128_ps(_mm_set1_epi32(-m));
  return _mm_or_ps(_mm_and_ps(k, a), _mm_andnot_ps(k, b));
}
/* the half area dx dy + dy dz + dz dx of the box lo..hi */
static inline float v4_area(v4 lo, v4 hi) {
  v4 d = _mm_sub_ps(hi, lo);
  v4 p = _mm_mul_ps(d, _mm_shuffle_ps(d, d, _MM_SHUFFLE(3, 0, 2, 1)));
  v4 s = _mm_add_ss(p, _mm_shuffle_ps(p, p, _MM_SHUFFLE(1, 1, 1, 1)));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehl_ps(p, p)));
}
#else /* GCC/Clang vector extensions: NEON, or whatever the target has */
typedef float v4 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
static inline v4 v4_ld(const float *p) {
  v4 r;
  memcpy(&r, p, sizeof r);
  return r;
}
static inline void v4_st(float *p, v4 a) {
  memcpy(p, &a, sizeof a);
}
static inline v4 v4_set(float x) {
  return (v4){x, x, x, x};
}
static inline v4 v4_add(v4 a, v4 b) {
  return a + b;
}
static inline v4 v4_sub(v4 a, v4 b) {
  return a - b;
}
static inline v4 v4_mul(v4 a, v4 b) {
  return a * b;
}
/* m ? a : b per lane */
static inline v4 v4_sel(v4i m, v4 a, v4 b) {
  return (v4)((m & (v4i)a) | (~m & (v4i)b));
}
static inline v4 v4_min(v4 a, v4 b) {
  return v4_sel(a < b, a, b);
}
static inline v4 v4_max(v4 a, v4 b) {
  return v4_sel(a > b, a, b);
}
static inline v4 v4_xyz(v4 a) {
  return (v4)((v4i)a & (v4i){-1, -1, -1, 0});
}
static inline float max0(float a) {
  return a > 0 ? a : 0;
}
static inline void v4_int(v4 a, int *out, int *i) {
  for (int k = 0; k < 4; k++)
    out[k] = (int)a[k];
  for (int k = 0; k < 3; k++)
    i[k] = (int)a[k];
}
static inline void v4_t3(v4 a, v4 b, v4 c, v4 *x, v4 *y, v4 *z) {
  *x = (v4){a[0], b[0], c[0], c[0]}, *y = (v4){a[1], b[1], c[1], c[1]};
  *z = (v4){a[2], b[2], c[2], c[2]};
}
static inline v4 v4_ints(const int *p) {
  return (v4){(float)p[0], (float)p[1], (float)p[2], (float)p[3]};
}
static inline v4 v4_lt_sel(v4 a, v4 b, v4 x, v4 y) {
  return v4_sel(a < b, x, y);
}
static inline v4 v4_max0(v4 a) {
  return v4_sel(a > 0, a, (v4){0, 0, 0, 0});
}
static inline v4 v4_pick(int m, v4 a, v4 b) {
  return v4_sel((v4i){-m, -m, -m, -m}, a, b);
}
static inline float v4_area(v4 lo, v4 hi) {
  v4 d = hi - lo;
  return d[0] * d[1] + d[1] * d[2] + d[2] * d[0];
}
#endif

/* A box as two vectors; empty: lo = FLT_MAX, hi = -FLT_MAX. */
typedef struct vbox {
  v4 lo, hi;
} vbox;

static inline vbox vbox_empty(void) {
  return (vbox){v4_set(FLT_MAX), v4_set(-FLT_MAX)};
}
static inline void vbox_add(vbox *b, v4 lo, v4 hi) {
  b->lo = v4_min(lo, b->lo);
  b->hi = v4_max(hi, b->hi);
}
static inline void vbox_join(vbox *b, const vbox *o) {
  vbox_add(b, o->lo, o->hi);
}
/* 0 for an empty (or NaN) box */
static inline float vbox_area(const vbox *b) {
  return max0(v4_area(b->lo, b->hi));
}

/* A primitive's box and id, moved along with the partitions so that every
** pass over a node's primitives reads memory in order. lo[3] is 0 and
** hi[3] the id (masked off before any arithmetic). */
typedef struct rec {
  float lo[4];
  float hi[4];
} rec;

static int rec_id(const rec *r) {
  int id;
  memcpy(&id, &r->hi[3], sizeof id);
  return id;
}
static v4 rec_lo(const rec *r) {
  return v4_ld(r->lo);
}
static v4 rec_hi(const rec *r) {
  return v4_xyz(v4_ld(r->hi));
}

/* The counters that the threads write on cache lines of their own, not
** on the line of the fields every node reads. */
typedef struct build {
  rec *recs;
  wf_gnode *nodes;
  int *items;
  wf_bvh_slots_fn slots;
  void *ctx;
  _Alignas(64) int nnodes; /* __atomic */
  _Alignas(64) int idle;   /* __atomic: cores with no thread working on them */
  char pad[60];
} build;

/* A node to build: its slice of the records, the bounds of their boxes
** (bb) and of their centroids times 2 (cb: lo + hi of each box); covered:
** an ancestor hands its slots to B->slots. */
typedef struct task {
  build *B;
  int node, begin, end, depth, covered;
  vbox bb, cb;
} task;

/* Subtrees of at most this many primitives hand their slots to B->slots
** in one call (larger leaves on their own). */
#define SLOTS_BATCH 256

static void store_box(wf_gnode *n, const vbox *b) {
  float lo[4], hi[4];
  v4_st(lo, b->lo);
  v4_st(hi, b->hi);
  memcpy(n->lo, lo, sizeof n->lo);
  memcpy(n->hi, hi, sizeof n->hi);
}

static void make_leaf(build *B, wf_gnode *n, int begin, int end) {
  n->a = begin;
  n->b = -(end - begin);
  for (int i = begin; i < end; i++)
    B->items[i] = rec_id(&B->recs[i]);
}

static void subtree(build *B, task *t);

static void *subtree_thread(void *p) {
  task *t = p;
  subtree(t->B, t);
  __atomic_add_fetch(&t->B->idle, 1, __ATOMIC_RELAXED);
  return NULL;
}

/* Bounds of recs[begin, end) and of their centroids (times 2). */
static void bounds(const rec *r, int begin, int end, vbox *bb, vbox *cb) {
  vbox b = vbox_empty(), c = vbox_empty();
  for (int i = begin; i < end; i++) {
    v4 lo = rec_lo(&r[i]), hi = rec_hi(&r[i]);
    vbox_add(&b, lo, hi);
    v4 c2 = v4_add(lo, hi);
    vbox_add(&c, c2, c2);
  }
  *bb = b, *cb = c;
}

static float axis_cen(const rec *r, int axis) {
  return r->lo[axis] + r->hi[axis];
}

/* The element of rank k on axis (quickselect), so the median split gives
** halves of equal size even when centroids repeat. */
static void select_kth(rec *r, int begin, int end, int k, int axis) {
  while (end - begin > 1) {
    float piv = axis_cen(&r[begin + (end - begin) / 2], axis);
    int i = begin, lt = begin, gt = end; /* [begin,lt) < piv, [gt,end) > piv */
    while (i < gt) {
      float c = axis_cen(&r[i], axis);
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

/* Bins of one axis: the boxes whose centroids fall in each, and counts
** (the sides' centroid bounds come from the partition, which reads every
** record anyway, in registers: two updates in memory less a record). */
typedef struct bin {
  vbox b;
} bin;
typedef struct bins {
  bin k[NBINS];
  int n[NBINS];
} bins;

static void bins_clear(bins *x, int nb) {
  for (int b = 0; b < nb; b++) {
    x->k[b].b = vbox_empty();
    x->n[b] = 0;
  }
}

/* The bin of centroid (times 2) c: the same float arithmetic in the
** binning loops (vectors) and in the partition (here), so both agree on
** every primitive; NaN goes to bin 0 (as maxps does). The selects are
** maxss and minss on SSE (the intrinsics, which zero the upper lanes,
** cost two moves through an integer register a call). */
static int bin_of(float c, float lo, float scale, float top) {
  float f = (c - lo) * scale;
  f = f > 0 ? f : 0;
  f = f < top ? f : top;
  return (int)f;
}

/* Bins n records along axis a. SETS sets of bins, one per record in
** turn: neighbours often share a bin, and one set would chain every
** update on the previous one's store. */
#define SETS 4
static void bin_one(const rec *r, int n, int a, float lo, float scale, int nb, bins *out) {
  bins x[SETS];
  for (int k = 0; k < SETS; k++)
    bins_clear(&x[k], nb);
  float top = (float)(nb - 1);
#define BIN_ONE(y, q)                                                                              \
  do {                                                                                             \
    int b_ = bin_of(axis_cen(q, a), lo, scale, top);                                               \
    vbox_add(&(y)->k[b_].b, rec_lo(q), rec_hi(q));                                                 \
    (y)->n[b_]++;                                                                                  \
  } while (0)
  int i = 0;
  for (; i + SETS <= n; i += SETS) {
    BIN_ONE(&x[0], &r[i]);
    BIN_ONE(&x[1], &r[i + 1]);
    BIN_ONE(&x[2], &r[i + 2]);
    BIN_ONE(&x[3], &r[i + 3]);
  }
  for (; i < n; i++)
    BIN_ONE(&x[0], &r[i]);
#undef BIN_ONE
  *out = x[0];
  for (int k = 1; k < SETS; k++)
    for (int b = 0; b < nb; b++) {
      vbox_join(&out->k[b].b, &x[k].k[b].b);
      out->n[b] += x[k].n[b];
    }
}

/* A core for a new thread, if one is idle: 1 when claimed (given back
** to B->idle when the thread is done). */
static int claim(build *B) {
  if (__atomic_load_n(&B->idle, __ATOMIC_RELAXED) <= 0) return 0;
  if (__atomic_sub_fetch(&B->idle, 1, __ATOMIC_RELAXED) >= 0) return 1;
  __atomic_add_fetch(&B->idle, 1, __ATOMIC_RELAXED);
  return 0;
}

typedef struct bin_job {
  const rec *r;
  int n, a, nb;
  float lo, scale;
  bins out;
} bin_job;

static void *bin_thread(void *p) {
  bin_job *j = p;
  bin_one(j->r, j->n, j->a, j->lo, j->scale, j->nb, &j->out);
  return NULL;
}

/* bin_one over a large node's records, the second half on another core
** while one is idle (the root: the other core has nothing to do yet).
** Joining the halves' bins gives bin_one's bins for NaN-free boxes. */
static void bin_large(build *B, const rec *r, int n, int a, float lo, float scale, int nb,
                      bins *out) {
  bin_job j = {.r = r + n / 2, .n = n - n / 2, .a = a, .nb = nb, .lo = lo, .scale = scale};
  pthread_t th;
  int threaded = n >= PAR_BIN && claim(B);
  if (threaded && pthread_create(&th, NULL, bin_thread, &j)) {
    __atomic_add_fetch(&B->idle, 1, __ATOMIC_RELAXED);
    threaded = 0;
  }
  bin_one(r, threaded ? n / 2 : n, a, lo, scale, nb, out);
  if (!threaded) return;
  pthread_join(th, NULL);
  __atomic_add_fetch(&B->idle, 1, __ATOMIC_RELAXED);
  for (int b = 0; b < nb; b++) {
    vbox_join(&out->k[b].b, &j.out.k[b].b);
    out->n[b] += j.out.n[b];
  }
}

/* Bins n records along all three axes in one pass (small nodes; no
** centroid bounds: the children take theirs when they start). The counts
** go to cnt[bin][axis] (sweep3 reads the axes side by side), not out;
** each record's bins to at[i] (its axis a: bin_of's, the same
** arithmetic), which the partition reads. */
static void bin_three(const rec *r, int n, v4 lo, v4 scale, int nb, bins *out, int (*cnt)[4],
                      int (*at)[4]) {
  for (int a = 0; a < 3; a++)
    bins_clear(&out[a], nb);
  memset(cnt, 0, sizeof(int) * 4 * (size_t)nb);
  v4 zero = v4_set(0), top = v4_set((float)(nb - 1));
  for (int i = 0; i < n; i++) {
    v4 l = rec_lo(&r[i]), h = rec_hi(&r[i]);
    v4 f = v4_mul(v4_sub(v4_add(l, h), lo), scale);
    int b[3];
    v4_int(v4_min(v4_max(f, zero), top), at[i], b);
    /* the axes written out: three chains of updates side by side */
    vbox_add(&out[0].k[b[0]].b, l, h);
    vbox_add(&out[1].k[b[1]].b, l, h);
    vbox_add(&out[2].k[b[2]].b, l, h);
    cnt[b[0]][0]++;
    cnt[b[1]][1]++;
    cnt[b[2]][2]++;
  }
}

/* A box per lane, by components (sweep3). */
typedef struct vbox3 {
  v4 lx, ly, lz, hx, hy, hz;
} vbox3;

static inline vbox3 vbox3_empty(void) {
  v4 lo = v4_set(FLT_MAX), hi = v4_set(-FLT_MAX);
  return (vbox3){lo, lo, lo, hi, hi, hi};
}
/* the arithmetic of vbox_join, lane by lane */
static inline void vbox3_join(vbox3 *b, const vbox3 *o) {
  b->lx = v4_min(o->lx, b->lx), b->ly = v4_min(o->ly, b->ly), b->lz = v4_min(o->lz, b->lz);
  b->hx = v4_max(o->hx, b->hx), b->hy = v4_max(o->hy, b->hy), b->hz = v4_max(o->hz, b->hz);
}
/* the arithmetic of vbox_area, lane by lane */
static inline v4 vbox3_area(const vbox3 *b) {
  v4 dx = v4_sub(b->hx, b->lx), dy = v4_sub(b->hy, b->ly), dz = v4_sub(b->hz, b->lz);
  return v4_max0(v4_add(v4_add(v4_mul(dx, dy), v4_mul(dy, dz)), v4_mul(dz, dx)));
}

/* What sweep does for each axis of a small node's bins (x[3], counts
** cnt), with the three axes side by side in vector lanes (lane 3 is never
** read): the same costs to the bit, and the same winner (the cheapest
** below *best; ties to the lower axis, then the lower boundary). */
static int sweep3(const bins *x, const int (*cnt)[4], int nb, float *best, int *axis, int *bin) {
  vbox3 T[SMALL_BINS];
  v4 rcost[SMALL_BINS];
  for (int b = 0; b < nb; b++) {
    v4_t3(x[0].k[b].b.lo, x[1].k[b].b.lo, x[2].k[b].b.lo, &T[b].lx, &T[b].ly, &T[b].lz);
    v4_t3(x[0].k[b].b.hi, x[1].k[b].b.hi, x[2].k[b].b.hi, &T[b].hx, &T[b].hy, &T[b].hz);
  }
  const v4 zero = v4_set(0);
  vbox3 acc = vbox3_empty();
  v4 c = zero;
  for (int b = nb - 1; b > 0; b--) {
    vbox3_join(&acc, &T[b]);
    c = v4_add(c, v4_ints(cnt[b]));
    rcost[b] = v4_mul(vbox3_area(&acc), c);
  }
  acc = vbox3_empty();
  c = zero;
  v4 top = v4_set(*best), at = v4_set(-1);
  for (int b = 0; b < nb - 1; b++) {
    vbox3_join(&acc, &T[b]);
    c = v4_add(c, v4_ints(cnt[b]));
    /* NaN where a side holds no records (the empty box's area, inf,
    ** times a count of 0), which never wins: boundaries with records on
    ** both sides only (all of an axis without extent are in bin 0) */
    v4 cost = v4_add(v4_mul(vbox3_area(&acc), c), rcost[b + 1]);
    at = v4_lt_sel(cost, top, v4_set((float)b), at);
    top = v4_min(cost, top);
  }
  float tops[4], ats[4];
  v4_st(tops, top);
  v4_st(ats, at);
  int found = 0;
  for (int a = 0; a < 3; a++)
    if (ats[a] >= 0 && tops[a] < *best) *best = tops[a], *axis = a, *bin = (int)ats[a], found = 1;
  return found;
}

/* The cheapest boundary of x's nb bins: cost area(L) n(L) + area(R) n(R)
** below *best, which it lowers (and sets *bin: the last bin on the left). */
static int sweep(const bins *x, int nb, float *best, int *bin) {
  /* boundaries between the first and the last bin holding anything */
  int first = 0, last = nb - 1;
  while (first < last && !x->n[first])
    first++;
  while (last > first && !x->n[last])
    last--;
  float rcost[NBINS];
  vbox acc = vbox_empty();
  int c = 0;
  for (int b = last; b > first; b--) {
    vbox_join(&acc, &x->k[b].b);
    c += x->n[b];
    rcost[b] = vbox_area(&acc) * (float)c;
  }
  acc = vbox_empty();
  c = 0;
  float top = *best;
  int at = -1;
  for (int b = first; b < last; b++) {
    vbox_join(&acc, &x->k[b].b);
    c += x->n[b];
    float cost = vbox_area(&acc) * (float)c + rcost[b + 1];
    /* selects, not branches: which boundary wins is a coin toss */
    int better = cost < top;
    top = better ? cost : top;
    at = better ? b : at;
  }
  if (at < 0) return 0;
  *best = top, *bin = at;
  return 1;
}

/* The floats' order as unsigned integers (NaN aside) and back. */
static uint32_t f_key(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u >> 31 ? ~u : u | 0x80000000u;
}
static float key_f(uint32_t k) {
  uint32_t u = k >> 31 ? k & 0x7fffffffu : ~k;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* The split of a large node's partition: records of bins <= bin on its
** axis go left, which is a cut, the least float t in bin + 1 or above
** (bin_of is monotone in the centroid: -inf lands in bin 0 and +inf in
** the top one): one comparison a record where bin_of takes six
** operations, the same sides (NaN, which bin_of puts in bin 0, fails
** c >= t: left). t is a few floats up or down from where (t - lo) scale
** is bin + 1 (a bisection over the floats' order, whose 32 steps each
** wait on the last, took 4% of a build), or that bisection when it is
** far off. */
static float cut_of(float lo, float scale, int nb, int bin) {
  float top = (float)(nb - 1), g = lo + (float)(bin + 1) / scale;
  if (isfinite(g)) {
    uint32_t k = f_key(g);
    int i = 0;
    if (bin_of(g, lo, scale, top) > bin) /* down to the least that bins right */
      while (i < 8 && bin_of(key_f(k - 1), lo, scale, top) > bin)
        k--, i++;
    else /* up to the first that bins right */
      while (i < 8 && bin_of(key_f(k), lo, scale, top) <= bin)
        k++, i++;
    if (i < 8) return key_f(k);
  }
  uint32_t l = f_key(-INFINITY), h = f_key(INFINITY); /* bin_of(l) <= bin < bin_of(h) */
  while (h - l > 1) {
    uint32_t m = l + (h - l) / 2;
    if (bin_of(key_f(m), lo, scale, top) > bin)
      h = m;
    else
      l = m;
  }
  return key_f(h);
}

/* Whether record x goes left of the cut t on axis a. */
static inline int goes_left(const rec *x, int a, float t) {
  return !(axis_cen(x, a) >= t);
}

/* Moves the records of bins <= bin on axis a to the front of r[begin,
** end) (large nodes), the rest after; returns where the right side
** starts. The bounds of both sides' centroids (times 2) to cb[0], cb[1]
** (the same as from bins of them: min and max of the same floats).
**
** Faces in mesh order fall on the sides in long runs: then two scans
** from the ends (branches that mostly predict) swap only the records on
** the wrong side. When SAMPLES pairs of neighbours spread over the node
** show that the sides change often (and under SCAN_MIN primitives),
** branch free: every record swaps with the first one not known to be
** on the left. On the bench torus the scans take 4% fewer instructions
** (callgrind) and one-thread builds 0.2-2.7 ms of 63 less (5 of 5
** alternating runs); with its faces shuffled, scans in every large node
** made builds 15-30% slower, and the sampled choice costs nothing. */
#define SCAN_MIN 256
#define SAMPLES 32
static inline v4 rec_cen(const rec *r) {
  return v4_add(rec_lo(r), rec_hi(r));
}
static inline void cen_add(vbox *b, const rec *r) {
  v4 c = rec_cen(r);
  vbox_add(b, c, c);
}
static int partition(rec *R, int begin, int end, int a, float lo, float scale, int nb, int bin,
                     vbox *cb) {
  float t = cut_of(lo, scale, nb, bin);
  vbox L = vbox_empty(), G = L;
  int count = end - begin, changes = SAMPLES;
  if (count >= SCAN_MIN) {
    changes = 0;
    for (int k = 0; k < SAMPLES; k++) {
      const rec *x = &R[begin + (int)((int64_t)count * k / SAMPLES)];
      changes += goes_left(x, a, t) != goes_left(x + 1, a, t);
    }
  }
  if (changes <= SAMPLES / 8) {
    /* [begin, i) left, (j, end) right, their centroids in L, G */
    int i = begin, j = end - 1;
    for (;;) {
      while (i <= j && goes_left(&R[i], a, t))
        cen_add(&L, &R[i++]);
      while (i < j && !goes_left(&R[j], a, t))
        cen_add(&G, &R[j--]);
      if (i >= j) {
        if (i == j) cen_add(&G, &R[i]); /* the first loop stopped on it: right */
        cb[0] = L, cb[1] = G;
        return i;
      }
      rec x = R[i];
      R[i] = R[j];
      R[j] = x;
      cen_add(&L, &R[i++]);
      cen_add(&G, &R[j--]);
    }
  }
  int k = begin;
  for (int i = begin; i < end; i++) {
    int left = goes_left(&R[i], a, t);
    rec x = R[i];
    v4 c = rec_cen(&x);
    L.lo = v4_pick(left, v4_min(c, L.lo), L.lo), L.hi = v4_pick(left, v4_max(c, L.hi), L.hi);
    G.lo = v4_pick(left, G.lo, v4_min(c, G.lo)), G.hi = v4_pick(left, G.hi, v4_max(c, G.hi));
    R[i] = R[k];
    R[k] = x;
    k += left;
  }
  cb[0] = L, cb[1] = G;
  return k;
}

/* The best split of a node (axis -1: none found). */
typedef struct split {
  int axis, bin;
  float best;
  vbox bb[2], cb[2]; /* of the two sides */
} split;

/* The box bounds of both sides of the split from the bins, each side's
** in registers (the centroids' come from partition; small nodes' children
** take theirs when they start). */
static void sides(const bins *x, int nb, split *s) {
  for (int k = 0; k < 2; k++) {
    vbox b = vbox_empty();
    for (int i = k ? s->bin + 1 : 0; i < (k ? nb : s->bin + 1); i++)
      vbox_join(&b, &x->k[i].b);
    s->bb[k] = b, s->cb[k] = vbox_empty();
  }
}

/* The records of bins <= bin on axis a to the front of r[0, n), by the
** bins bin_three gave them (at[i]: record i's before any move; the
** branch-free loop of partition only moves records it has passed). */
static int partition_at(rec *r, int n, const int (*at)[4], int a, int bin) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    int left = at[i][a] <= bin;
    rec x = r[i];
    r[i] = r[k];
    r[k] = x;
    k += left;
  }
  return k;
}

/* Bins t's records, sweeps the bins and partitions the records (out of
** line: the bins stay off the stack of the recursion): where the right
** side starts, t->begin when no split was found, or -1 for a leaf (when
** splitting costs more than testing everything here: a traversal step
** costs about one primitive test). */
static __attribute__((noinline)) int split_node(rec *R, const task *t, split *s) {
  int count = t->end - t->begin;
  float clo[4], chi[4], ext[3], scale[3];
  vbox cb = t->cb;
  if (count < ONE_AXIS) { /* the centroid bounds: the parent has none */
    cb = vbox_empty();
    for (int i = t->begin; i < t->end; i++) {
      v4 c = v4_add(rec_lo(&R[i]), rec_hi(&R[i]));
      vbox_add(&cb, c, c);
    }
  }
  v4_st(clo, cb.lo);
  v4_st(chi, cb.hi);
  int nb = count < ONE_AXIS ? (count / 2 + 2 < SMALL_BINS ? count / 2 + 2 : SMALL_BINS) : NBINS;
  for (int a = 0; a < 3; a++) {
    ext[a] = chi[a] - clo[a];
    scale[a] = ext[a] > 0 ? (float)nb / ext[a] : 0;
  }
  s->axis = -1, s->bin = 0, s->best = FLT_MAX;
  float area = vbox_area(&t->bb);
  if (count >= ONE_AXIS) {
    /* large nodes bin along their widest centroid axis only (a third of
    ** the work where most of it is; the trees trace as fast) */
    int a = ext[1] > ext[0] ? 1 : 0;
    a = ext[2] > ext[a] ? 2 : a;
    if (scale[a] <= 0) return t->begin;
    bins x;
    bin_large(t->B, R + t->begin, count, a, clo[a], scale[a], nb, &x);
    if (!sweep(&x, nb, &s->best, &s->bin)) return t->begin;
    s->axis = a;
    sides(&x, nb, s);
    if (count <= LEAF_MAX && s->best + area >= area * (float)count) return -1;
    return partition(R, t->begin, t->end, a, clo[a], scale[a], nb, s->bin, s->cb);
  }
  bins x[3];
  int cnt[SMALL_BINS][4], at[ONE_AXIS][4];
  float sc[4] = {scale[0], scale[1], scale[2], 0};
  bin_three(R + t->begin, count, cb.lo, v4_ld(sc), nb, x, cnt, at);
  if (!sweep3(x, (const int(*)[4])cnt, nb, &s->best, &s->axis, &s->bin)) return t->begin;
  sides(&x[s->axis], nb, s);
  if (count <= LEAF_MAX && s->best + area >= area * (float)count) return -1;
  return t->begin + partition_at(R + t->begin, count, (const int(*)[4])at, s->axis, s->bin);
}

/* A leaf of t's primitives, its slots to B->slots unless an ancestor
** hands them over. */
static void leaf_of(build *B, const task *t, wf_gnode *n) {
  make_leaf(B, n, t->begin, t->end);
  if (B->slots && !t->covered) B->slots(B->ctx, t->begin, t->end, B->items);
}

static void subtree(build *B, task *t) {
  wf_gnode *n = &B->nodes[t->node];
  rec *R = B->recs;
  int begin = t->begin, end = t->end, count = end - begin;
  store_box(n, &t->bb);
  if (count <= LEAF_MIN || t->depth >= MAX_DEPTH) {
    leaf_of(B, t, n);
    return;
  }
  split s;
  int mid = split_node(R, t, &s);
  if (mid < 0) {
    leaf_of(B, t, n);
    return;
  }
  /* this subtree's slots in one call once it is built */
  int report = !t->covered && count <= SLOTS_BATCH;
  task l = {.B = B, .begin = begin, .depth = t->depth + 1, .covered = t->covered || report}, r = l;
  if (s.axis >= 0) l.bb = s.bb[0], l.cb = s.cb[0], r.bb = s.bb[1], r.cb = s.cb[1];
  if (mid == begin || mid == end) {
    /* no bin boundary separates the centroids: halves by count along
    ** the widest axis of the boxes */
    float lo[4], hi[4];
    v4_st(lo, t->bb.lo);
    v4_st(hi, t->bb.hi);
    int axis = hi[1] - lo[1] > hi[0] - lo[0] ? 1 : 0;
    axis = hi[2] - lo[2] > hi[axis] - lo[axis] ? 2 : axis;
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
  /* the larger half on a new thread while a core is idle */
  task *big = (mid - begin) >= (end - mid) ? &l : &r, *small = big == &l ? &r : &l;
  pthread_t th;
  int threaded = big->end - big->begin >= PAR_MIN && claim(B);
  if (threaded && pthread_create(&th, NULL, subtree_thread, big)) {
    __atomic_add_fetch(&B->idle, 1, __ATOMIC_RELAXED);
    threaded = 0;
  }
  if (!threaded) subtree(B, big);
  subtree(B, small);
  if (threaded) {
    /* this core idles while it waits: lend it out */
    __atomic_add_fetch(&B->idle, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    __atomic_sub_fetch(&B->idle, 1, __ATOMIC_RELAXED);
  }
  if (B->slots && report) B->slots(B->ctx, begin, end, B->items);
}

/* bytes rounded up to 64, 64-byte aligned; large blocks on transparent
** huge pages where the system gives them on request (fresh 4 KB pages
** cost a fault each: a millisecond or more per 200k-triangle build). */
void *wf_bvh_big_alloc(size_t bytes) {
  bytes = (bytes + 63) & ~(size_t)63;
#ifdef MADV_HUGEPAGE
  const size_t huge = (size_t)2 << 20;
  if (bytes >= huge) {
    bytes = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, bytes);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);
    return p;
  }
#endif
  return aligned_alloc(64, bytes);
}

/* The records of boxes [begin, end) and their bounds; the boxes from the
** arrays lo, hi or, when fn is set, from fn a chunk at a time. */
#define CHUNK 256
typedef struct fill {
  rec *recs;
  const float *lo, *hi;
  wf_bvh_boxes_fn fn;
  void *ctx;
  int begin, end;
  vbox bb, cb;
} fill;

static void *fill_recs(void *p) {
  fill *f = p;
  float lo[3 * CHUNK], hi[3 * CHUNK];
  vbox bb = vbox_empty(), cb = vbox_empty();
  for (int i0 = f->begin; i0 < f->end; i0 += CHUNK) {
    int i1 = f->end - i0 < CHUNK ? f->end : i0 + CHUNK;
    const float *l = lo, *h = hi;
    if (f->fn)
      f->fn(f->ctx, i0, i1, lo, hi);
    else
      l = f->lo + 3 * (size_t)i0, h = f->hi + 3 * (size_t)i0;
    for (int i = i0; i < i1; i++, l += 3, h += 3) {
      rec *r = &f->recs[i];
      memcpy(r->lo, l, 3 * sizeof(float));
      memcpy(r->hi, h, 3 * sizeof(float));
      r->lo[3] = 0;
      memcpy(&r->hi[3], &i, sizeof i);
    }
    /* the bounds while the chunk's records are in cache (no second pass
    ** over all of them from memory) */
    vbox b, c;
    bounds(f->recs, i0, i1, &b, &c);
    vbox_join(&bb, &b);
    vbox_join(&cb, &c);
  }
  f->bb = bb, f->cb = cb;
  return NULL;
}

void *wf_bvh_scratch_take(wf_bvh_scratch *s, int k, size_t bytes) {
  if (!s || s->size[k] < bytes) return wf_bvh_big_alloc(bytes);
  void *p = s->p[k];
  s->p[k] = NULL, s->size[k] = 0;
  return p;
}

void wf_bvh_scratch_give(wf_bvh_scratch *s, int k, void *p, size_t bytes) {
  if (s && bytes >= s->size[k]) {
    free(s->p[k]);
    s->p[k] = p, s->size[k] = bytes;
  } else {
    free(p);
  }
}

void wf_bvh_scratch_free(wf_bvh_scratch *s) {
  for (int k = 0; k < WF_BVH_NSCRATCH; k++)
    free(s->p[k]), s->p[k] = NULL, s->size[k] = 0;
}

static int build_tree(int n, const float *lo, const float *hi, wf_bvh_boxes_fn fn,
                      wf_bvh_slots_fn slots, void *ctx, int nthreads, wf_bvh_scratch *s,
                      wf_gnode **nodes, int **items, int *nnodes, size_t *nodes_bytes) {
  *nodes = NULL;
  *items = NULL;
  *nnodes = 0;
  if (n <= 0) return 0;
  build B;
  memset(&B, 0, sizeof B);
  size_t rbytes = sizeof(rec) * (size_t)n;
  B.recs = wf_bvh_scratch_take(s, WF_BVH_RECS, rbytes);
  B.items = malloc(sizeof(int) * (size_t)n);
  /* 2n nodes: the root, a pad, n - 1 pairs; 64-byte aligned, so that
  ** each pair of children (even index) fills one cache line */
  size_t nbytes = sizeof(wf_gnode) * (size_t)(2 * n + 2);
  B.nodes = s ? wf_bvh_scratch_take(s, WF_BVH_NODES, nbytes) : wf_bvh_big_alloc(nbytes);
  if (!B.recs || !B.items || !B.nodes) {
    wf_bvh_scratch_give(s, WF_BVH_RECS, B.recs, B.recs ? rbytes : 0);
    free(B.items);
    free(B.nodes);
    return -1;
  }
  if (nodes_bytes) *nodes_bytes = nbytes;
  /* the records, in two halves on two threads for large inputs */
  fill f[2] = {{.recs = B.recs, .lo = lo, .hi = hi, .fn = fn, .ctx = ctx, .end = n},
               {.recs = B.recs, .lo = lo, .hi = hi, .fn = fn, .ctx = ctx, .begin = n, .end = n}};
  pthread_t th;
  int threaded = 0;
  if (nthreads > 1 && n >= PAR_INIT) {
    f[0].end = f[1].begin = n / 2;
    threaded = pthread_create(&th, NULL, fill_recs, &f[1]) == 0;
  }
  fill_recs(&f[0]);
  if (threaded)
    pthread_join(th, NULL);
  else
    fill_recs(&f[1]);
  task root = {.B = &B, .end = n, .bb = f[0].bb, .cb = f[0].cb};
  vbox_join(&root.bb, &f[1].bb);
  vbox_join(&root.cb, &f[1].cb);
  /* node 1 pads the pairs to even indices: a one-item leaf no parent
  ** names (refit gives it a box; traversal never reaches it) */
  B.nodes[1] = (wf_gnode){{0, 0, 0}, 0, {0, 0, 0}, -1};
  B.nnodes = 2;
  B.idle = nthreads > 1 ? nthreads - 1 : 0;
  B.slots = slots, B.ctx = ctx;
  subtree(&B, &root);
  wf_bvh_scratch_give(s, WF_BVH_RECS, B.recs, rbytes);
  *nodes = B.nodes;
  *items = B.items;
  *nnodes = B.nnodes;
  return 0;
}

int wf_bvh_build(int n, const float *lo, const float *hi, int nthreads, wf_gnode **nodes,
                 int **items, int *nnodes) {
  return build_tree(n, lo, hi, NULL, NULL, NULL, nthreads, NULL, nodes, items, nnodes, NULL);
}

int wf_bvh_build_fn(int n, wf_bvh_boxes_fn fn, wf_bvh_slots_fn slots, void *ctx, int nthreads,
                    wf_bvh_scratch *s, wf_gnode **nodes, int **items, int *nnodes,
                    size_t *nodes_bytes) {
  return build_tree(n, NULL, NULL, fn, slots, ctx, nthreads, s, nodes, items, nnodes, nodes_bytes);
}

/* Refit: children before parents; nodes a box of 4 floats each side */
void wf_bvh_refit(wf_gnode *nodes, int nnodes, const int *items, const float *lo, const float *hi) {
  for (int i = nnodes - 1; i >= 0; i--) {
    wf_gnode *n = &nodes[i];
    float l[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, h[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
    if (n->b < 0) {
      for (int k = n->a; k < n->a - n->b; k++) {
        const float *pl = lo + 3 * (size_t)items[k], *ph = hi + 3 * (size_t)items[k];
        for (int c = 0; c < 3; c++) {
          l[c] = pl[c] < l[c] ? pl[c] : l[c];
          h[c] = ph[c] > h[c] ? ph[c] : h[c];
        }
      }
    } else {
      for (int s = 0; s < 2; s++) {
        const wf_gnode *ch = &nodes[s ? n->b : n->a];
        for (int c = 0; c < 3; c++) {
          l[c] = ch->lo[c] < l[c] ? ch->lo[c] : l[c];
          h[c] = ch->hi[c] > h[c] ? ch->hi[c] : h[c];
        }
      }
    }
    memcpy(n->lo, l, sizeof l);
    memcpy(n->hi, h, sizeof h);
  }
}
