/*
** mesh.c -- meshes and Bvh objects: checked construction from arrays,
** the BVH over their primitives, refit, the winding-number data, and
** their registration as live ids.
**
**   wf_geom  +----------------------------------------------+
**            | d: wf_gmesh or wf_gboxes  <- the id points here|
**            | kind, reg (one reference)                     |
**            | nodes or wide, items, wind (owned)            |
**            | lo, hi: primitive boxes (refit scratch)       |
**            +----------------------------------------------+
*/
#include <math.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/geom.h"
#include "geom/bvh4.h"
#include "geom/query.h"
#include "runtime/device.h"
#include "runtime/rt.h"
#include "runtime/wf_launch.h"

struct wf_geom {
  union {
    wf_gmesh mesh;
    wf_gboxes boxes;
  } d; /* first: the id is the object's address */
  int kind;
  int nprims;
  wf_georeg *reg;
  wf_gnode *nodes; /* Bvh objects (meshes: while building) */
  int *items;
  wf_gwind *wind;  /* meshes: per wide lane (4 w + j) */
  wf_gnode4 *wide; /* meshes: the tree 4-wide (bvh4.c) */
  wf_gdisc4 *disc; /* meshes: the lanes' surface bounds (query.h), per wide node */
  float *nsum;     /* meshes: per lane (4 w + j), its faces' summed normals ab x ac */
  int *leaves;     /* meshes: the leaf lanes in slot order (refit) */
  int *lk0;        /* meshes: their first slots, and one past the last (refit_plan) */
  int *inner;      /* meshes: the inner lanes refit takes, in pairs (refit_plan) */
  int *ioff;       /* meshes: where each item's pairs start in inner (refit_plan) */
  int *istart;     /* meshes: each item's first leaf, and one past the last (refit_plan) */
  int nleaves, nitems;
  int w8;     /* meshes: refit takes 8 leaves at a time (AVX2) */
  int stream; /* meshes: refit streams the triangles to memory (fill_window) */
  int nnodes, nwide;
  int nthreads;   /* the runtime's, for refit */
  float *lo, *hi; /* 3 per primitive (meshes: while building) */
  float *tris;    /* meshes: triangles and bounds in leaf order (query.h) */
  uint32_t *sidx; /* meshes: each slot's 3 vertices as offsets 3 i in the points' floats,
                  ** in leaf order (a load each, no index arithmetic) */
  uint64_t *slow; /* meshes: per block of slots, a bit: one past the last slot or with the
                  ** last point (refit reads those vertex by vertex) */
  /* objects on a CUDA device: the descriptor above reads host copies of
  ** the arrays (host[]); the kernels' copy of it, the nodes, items,
  ** triangles and winding data live in dbuf (uploaded after build and
  ** refit), pointing at the device arrays (dev[]) */
  int32_t device;
  void *host[3];
  void *dev[3];
  void *dev_grads[2];
  void *dev_tans[2];
  wf_buffer *dbuf;
};

static const char *what(int kind) {
  return kind == WF_GEOM_MESH ? "weft.Mesh" : "weft.Bvh";
}

static int bad(wf_rt *rt, int kind, const char *fmt, const char *a, long long x, long long y) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, a, x, y);
  return wf_rt_seterr(rt, WEFT_ERRARG, "%s: %s", what(kind), msg);
}

/* A 1-D compact host array of n elements of elsize bytes (n < 2^31). */
static int check_array(wf_rt *rt, int kind, const wf_array *a, const char *name, int elsize) {
  if (!a) return bad(rt, kind, "%s is missing", name, 0, 0);
  if (a->elsize != elsize)
    return bad(rt, kind, "%s has %lld-byte elements, expected %lld", name, a->elsize, elsize);
  if (a->size >= 0x7fffffff) return bad(rt, kind, "%s has too many elements", name, 0, 0);
  if (a->size > 1 && (a->ndim != 1 || a->strides[0] != elsize) &&
      !(a->ndim == 2 && a->strides[1] == 4 && a->strides[0] == elsize))
    return bad(rt, kind, "%s must be a compact array (not a strided view)", name, 0, 0);
  return 0;
}

/* The largest meshes: the points' floats indexed by 32-bit offsets, and
** faces counted in ints (with room for the BVH's node numbers). */
#define MESH_MAX_POINTS ((long long)(UINT32_MAX / 3))
#define MESH_MAX_FACES ((long long)(INT32_MAX / 4))

/* Meshes: the boxes of faces [begin, end) (for the build, on its threads). */
static void face_boxes(void *ctx, int begin, int end, float *lo, float *hi) {
  const wf_gmesh *m = &((const wf_geom *)ctx)->d.mesh;
  for (int f = begin; f < end; f++, lo += 3, hi += 3) {
    wf_g3 a, b, c;
    gtri(m, f, &a, &b, &c);
    lo[0] = gmin(a.x, gmin(b.x, c.x)), hi[0] = gmax(a.x, gmax(b.x, c.x));
    lo[1] = gmin(a.y, gmin(b.y, c.y)), hi[1] = gmax(a.y, gmax(b.y, c.y));
    lo[2] = gmin(a.z, gmin(b.z, c.z)), hi[2] = gmax(a.z, gmax(b.z, c.z));
  }
}

/* Meshes: refit. The leaves in slot order (the leaf lanes 4 w + j in
** g->leaves, their first slots in g->lk0), items of up to REFIT_ITEM of
** them on the runtime's thread pool. An item reads its slots' vertices
** from the points a window of slots at a time, in blocks of WF_GTB slots
** (query.h: gtri_at), into rows of a scratch on its stack, one row per
** coordinate (a.x a.y a.z b.x ... c.z) with the slots side by side; it
** writes the blocks that start in it to the mesh's triangles too, so
** every block is written once, by one thread, in whole rows. (A block
** that starts in the item before it is read again for the scratch, not
** from the triangles, which another thread may be writing.) Each leaf
** then takes its box, its summed normals and its surface bound
** (wf_gdisc4) from the scratch, and after the item's leaves come the
** inner lanes whose subtrees lie in the item (g->inner), lower subtrees
** first: a lane over child node c is the union of c's lanes, box and
** bound. The lanes over subtrees across items come last, the same way.
**
** Leaves of at most 4 slots in the window and inner lanes go four at a
** time, a vector lane each (leaf_batch, inner_batch; eight with AVX2,
** leaf_batch8, inner_batch8): one lane at a time, most of the work was
** horizontal (reductions over a leaf's slots or a node's lanes,
** broadcasts, stores lane by lane) and the steps of one lane, a chain of
** dependent ones, hardly overlapped. Side by side they take the same
** operations in the same order as one would (a reduction over 4 pairs
** lanes 0 and 2, 1 and 3, then the two), so the results are bit for bit
** those of one at a time, on any number of threads. */
#define REFIT_ITEM 256 /* leaves per item of the pool's work, at most */
#define REFIT_WIN 256  /* slots per window of the scratch */
#define REFIT_ROW (REFIT_WIN + 8)
#define REFIT_AHEAD 64   /* slots of points prefetched ahead */
#define REFIT_POOL 65536 /* triangles from which refits use the thread pool */

/* the refit's vector code in one function, its values in registers */
#if defined(__GNUC__)
#define WF_REFIT_INLINE inline __attribute__((always_inline))
#else
#define WF_REFIT_INLINE inline
#endif
/* The refit's entry points twice on x86-64 (GCC or clang, ELF: an ifunc
** picks one at load time): for AVX2 and for the baseline. Only the
** encoding changes, the operations do not: VEX instructions take 3
** operands, which saves the register copies SSE's 2-operand forms need
** (39 -> 31 M instructions per refit of 200k triangles, 12% off its
** time), and no FMA is enabled, so no product and sum fuse and the
** results stay bit for bit those of the baseline (-DWEFT_NO_CLONES
** builds the baseline alone). */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(WEFT_NO_CLONES)
#define WF_REFIT_CLONES __attribute__((target_clones("avx2", "default")))
#define WF_REFIT_AVX2 1
#include <immintrin.h>
#else
#define WF_REFIT_CLONES
#endif

/* 4 floats (the refit's own lanes, whatever WF_GL is) */
typedef float rf4 __attribute__((vector_size(16)));
typedef int rm4 __attribute__((vector_size(16)));
#if defined(__clang__)
#define RF_SHUF(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define RF_SHUF(a, b, i, j, k, l) __builtin_shuffle(a, b, (rm4){i, j, k, l})
#endif
static WF_REFIT_INLINE rf4 rk(float x) {
  return (rf4){x, x, x, x};
}
static WF_REFIT_INLINE rf4 rld(const float *p) {
  rf4 v;
  memcpy(&v, p, sizeof v);
  return v;
}
static WF_REFIT_INLINE void rst(float *p, rf4 v) {
  memcpy(p, &v, sizeof v);
}
static WF_REFIT_INLINE rf4 rsel(rm4 m, rf4 a, rf4 b) {
  return (rf4)((m & (rm4)a) | (~m & (rm4)b));
}
static WF_REFIT_INLINE rf4 rand4(rm4 m, rf4 a) {
  return (rf4)(m & (rm4)a);
}
static WF_REFIT_INLINE rf4 rmin(rf4 a, rf4 b) {
#if defined(__SSE__)
  return (rf4)_mm_min_ps((__m128)a, (__m128)b);
#else
  return rsel(a < b, a, b);
#endif
}
static WF_REFIT_INLINE rf4 rmax(rf4 a, rf4 b) {
#if defined(__SSE__)
  return (rf4)_mm_max_ps((__m128)a, (__m128)b);
#else
  return rsel(a > b, a, b);
#endif
}
static WF_REFIT_INLINE rf4 radd(rf4 a, rf4 b) {
  return a + b;
}
static WF_REFIT_INLINE rf4 rsqrt(rf4 a) { /* of non-negative lanes */
#if defined(__SSE__)
  return (rf4)_mm_sqrt_ps((__m128)a);
#else
  for (int l = 0; l < 4; l++)
    a[l] = sqrtf(a[l]);
  return a;
#endif
}
static WF_REFIT_INLINE rf4 rabs(rf4 a) {
  return (rf4)((rm4)a & (rm4){0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff});
}
/* lanes below n; lanes x, y, z */
static WF_REFIT_INLINE rm4 rfirst(int n) {
  return (rm4){0, 1, 2, 3} < (rm4){n, n, n, n};
}
static const rm4 rxyz = {-1, -1, -1, 0};
/* lane l of v in every lane */
#define RF_LANE(v, l) RF_SHUF(v, v, l, l, l, l)
/* the lanes' maximum, sum */
static WF_REFIT_INLINE float rhmax(rf4 v) {
  v = rmax(v, RF_SHUF(v, v, 2, 3, 0, 1));
  return rmax(v, RF_SHUF(v, v, 1, 0, 3, 2))[0];
}
static WF_REFIT_INLINE float rhsum(rf4 v) {
  v = v + RF_SHUF(v, v, 2, 3, 0, 1);
  return (v + RF_SHUF(v, v, 1, 0, 3, 2))[0];
}
/* (op over a's lanes, b's, c's, d's), in one go: (a0 a1 a2 a3) (b0 ...)
** (c0 ...) (d0 ...) give (a0 b0 a1 b1) (a2 b2 a3 b3) ... that reduce
** pairwise to (a b c d) */
#define RF_TRED(name, op)                                                                          \
  static WF_REFIT_INLINE rf4 name(rf4 a, rf4 b, rf4 c, rf4 d) {                                    \
    rf4 t0 = op(RF_SHUF(a, b, 0, 4, 1, 5), RF_SHUF(a, b, 2, 6, 3, 7));                             \
    rf4 t1 = op(RF_SHUF(c, d, 0, 4, 1, 5), RF_SHUF(c, d, 2, 6, 3, 7));                             \
    return op(RF_SHUF(t0, t1, 0, 1, 4, 5), RF_SHUF(t0, t1, 2, 3, 6, 7));                           \
  }
RF_TRED(rtmin, rmin)
RF_TRED(rtmax, rmax)
RF_TRED(rtsum, radd)
/* (x0, y0, z0, 0): lane 0 of each */
static WF_REFIT_INLINE rf4 rlane0(rf4 x, rf4 y, rf4 z) {
  rf4 t = RF_SHUF(x, y, 0, 4, 0, 4), u = RF_SHUF(z, rk(0.0f), 0, 4, 0, 4);
  return RF_SHUF(t, u, 0, 1, 4, 5);
}
/* The 4 x 4 transpose: o[l] = (a[l], b[l], c[l], d[l]). */
static WF_REFIT_INLINE void rtrans(rf4 a, rf4 b, rf4 c, rf4 d, rf4 *o0, rf4 *o1, rf4 *o2, rf4 *o3) {
  rf4 t0 = RF_SHUF(a, b, 0, 4, 1, 5), t1 = RF_SHUF(c, d, 0, 4, 1, 5);
  rf4 t2 = RF_SHUF(a, b, 2, 6, 3, 7), t3 = RF_SHUF(c, d, 2, 6, 3, 7);
  *o0 = RF_SHUF(t0, t1, 0, 1, 4, 5), *o1 = RF_SHUF(t0, t1, 2, 3, 6, 7);
  *o2 = RF_SHUF(t2, t3, 0, 1, 4, 5), *o3 = RF_SHUF(t2, t3, 2, 3, 6, 7);
}

/* The n floats from x all finite (4 at a time). */
static int all_finite(const float *x, long long n) {
  const rm4 e = {0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000};
  rm4 inf = {0, 0, 0, 0};
  long long i = 0;
  for (; i + 4 <= n; i += 4)
    inf |= ((rm4)rld(x + i) & e) == e;
  for (; i < n; i++)
    inf[0] |= !isfinite(x[i]);
  return !(inf[0] | inf[1] | inf[2] | inf[3]);
}

/* The n points from p all finite (every refit checks them), else an
** error naming the point at fault. */
static int check_finite(wf_rt *rt, int kind, const wf_g3 *p, long long n, const char *name) {
  if (all_finite(&p->x, 3 * n)) return 0;
  long long i = 0;
  for (; i < n; i++)
    if (!isfinite(p[i].x) || !isfinite(p[i].y) || !isfinite(p[i].z)) break;
  return bad(rt, kind, "%s[%lld] is not finite (NaN or infinity)", name, i, 0);
}

/* wf_pool_fn: the floats [FINITE_CHUNK begin, FINITE_CHUNK end) of a
** refit's points all finite, else bad set (a large mesh's refit checks
** them on the pool: 40 us on one thread for 100k points, while the
** workers it woke would wait). */
#define FINITE_CHUNK 16384
typedef struct finite_job {
  const float *x;
  long long n;
  int bad;
} finite_job;

static void finite_chunk(void *p, int64_t begin, int64_t end) {
  finite_job *j = p;
  long long b = begin * FINITE_CHUNK, e = end * FINITE_CHUNK < j->n ? end * FINITE_CHUNK : j->n;
  if (!all_finite(j->x + b, e - b)) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* The 9 rows of block b (its WF_GTB slots' vertices; zeros past the last
** slot, as the padding is). Blocks without a slot past the last and
** without the last point (g->slow) read each vertex as 16 bytes, the next
** point's x in lane 3, and transpose 4 slots' at once. */
static WF_REFIT_INLINE void block_rows(const wf_geom *g, int64_t b, rf4 *v) {
  const float *P = &g->d.mesh.points->x;
  if (!(g->slow[b >> 6] >> (b & 63) & 1)) {
    const uint32_t *ix = g->sidx + 12 * b;
    for (int i = 0; i < 3; i++) {
      rf4 q0 = rld(P + ix[i]), q1 = rld(P + ix[3 + i]), q2 = rld(P + ix[6 + i]),
          q3 = rld(P + ix[9 + i]);
      rf4 t0 = RF_SHUF(q0, q1, 0, 4, 1, 5), t1 = RF_SHUF(q2, q3, 0, 4, 1, 5);
      rf4 t2 = RF_SHUF(q0, q1, 2, 6, 3, 7), t3 = RF_SHUF(q2, q3, 2, 6, 3, 7);
      v[3 * i] = RF_SHUF(t0, t1, 0, 1, 4, 5);
      v[3 * i + 1] = RF_SHUF(t0, t1, 2, 3, 6, 7);
      v[3 * i + 2] = RF_SHUF(t2, t3, 0, 1, 4, 5);
    }
    return;
  }
  float t[9][4];
  for (int l = 0; l < 4; l++) {
    int64_t k = 4 * b + l;
    for (int i = 0; i < 3; i++) {
      const float *p = k < g->nprims ? P + g->sidx[3 * k + i] : NULL;
      for (int a = 0; a < 3; a++)
        t[3 * i + a][l] = p ? p[a] : 0.0f;
    }
  }
  for (int r = 0; r < 9; r++)
    v[r] = rld(t[r]);
}

/* The scratch rows R (row r from R + r REFIT_ROW, slot k at k - base) of
** the blocks from slot base (a multiple of 4) to end, and 4 zeros after
** them; the blocks from slot w0 on go to the triangles too. The first
** vertices of the slots REFIT_AHEAD on are prefetched (the points come in
** no order the hardware foresees: 8-11% off the refit's time on a busy
** machine, 1 M instructions more). Meshes of REFIT_POOL triangles or more
** (g->stream) write their triangles with streaming stores: the blocks,
** 36 bytes a triangle and written whole, need not be read for it first
** (7.2 MB fewer read for 200k triangles: 13% off a refit's time on one
** thread), and they would not stay in the caches past the refit anyway;
** refit_items fences the stores. Smaller meshes' blocks may, and their
** lines are prefetched instead, which the stores would otherwise wait
** for (perf put 7% of the refit's samples on the first store of a
** block). */
static WF_REFIT_INLINE void rstream(float *p, rf4 v) { /* p 16-byte aligned */
#if defined(__SSE__)
  _mm_stream_ps(p, (__m128)v);
#else
  rst(p, v);
#endif
}

static WF_REFIT_INLINE void fill_window(const wf_geom *g, float *R, int base, int w0, int end) {
  float *t = g->tris + gtri_at(base, 0);
  for (int k = base; k < end; k += 4, t += WF_GTROWS * WF_GTB) {
    rf4 v[9];
#if defined(__GNUC__)
    if (k + REFIT_AHEAD + 4 <= g->nprims) {
      for (int i = 0; i < 12; i += 3)
        __builtin_prefetch(&g->d.mesh.points->x + g->sidx[3 * (int64_t)(k + REFIT_AHEAD) + i]);
      if (!g->stream) {
        __builtin_prefetch(t + REFIT_AHEAD / 4 * WF_GTROWS * WF_GTB, 1);
        __builtin_prefetch(t + REFIT_AHEAD / 4 * WF_GTROWS * WF_GTB + 16, 1);
      }
    }
#endif
    block_rows(g, k >> 2, v);
    for (int r = 0; r < 9; r++)
      rst(R + r * REFIT_ROW + (k - base), v[r]);
    if (k < w0) continue;
    if (g->stream)
      for (int r = 0; r < 9; r++)
        rstream(t + r * WF_GTB, v[r]);
    else
      for (int r = 0; r < 9; r++)
        rst(t + r * WF_GTB, v[r]);
  }
  for (int r = 0; r < 9; r++)
    rst(R + r * REFIT_ROW + (end - base), rk(0.0f));
}

/* A normal s (lane 3 0) for a bound: s itself, or the z axis when s is 0
** (the slab is then as thick as the lane's points make it: any unit n
** bounds them), and 1 / |s| in every lane. The bounds take heights along
** s and scale them by 1 / |s| last: the square root and the division run
** beside the heights, not before them. */
static WF_REFIT_INLINE rf4 rnormal(rf4 *s) {
  float l2 = rhsum(*s * *s);
  if (l2 > 1e-30f && l2 < 3e38f) return rk(1.0f) / RF_LANE(rsqrt(rk(l2)), 0);
  *s = (rf4){0.0f, 0.0f, 1.0f, 0.0f};
  return rk(1.0f);
}

/* Lane j's bound: n (lane 3 0) and the slab's half thickness t about the
** lane box's centre o, at most the box's half diagonal r (any unit n
** bounds the ball), rounded up by a few ulps of the coordinates around o
** and of r. */
static WF_REFIT_INLINE void disc_set(wf_gdisc4 *D, int j, rf4 n, rf4 o, float r, float t) {
  float m = rhmax(rand4(rxyz, rabs(o)));
  for (int a = 0; a < 3; a++)
    D->n[a][j] = n[a];
  D->t[j] = gmin(t, r) + (m + r) * (1.0f / 262144.0f);
}

/* What a leaf's slots add up to: the box [lo, hi], the summed normals
** ab x ac (s), and the least and the largest height of a vertex over the
** plane n.x = d through the first vertex across the first triangle's
** normal n (near those of the leaf's few faces, and known before the
** others are read), in units of 1 / |n| (inv). The slab about the box's
** centre is then as thick as the vertices make it: bench/mesh_visits.lua's
** closest points visited 10.3 leaves a query when the largest absolute
** height plus the centre's took its place, 9.0 with this. */
typedef struct leaf_acc {
  rf4 lo, hi, s; /* lanes x, y, z; lo's and hi's lane 3: the heights */
  rf4 n, inv;    /* n's lane 3 0 */
  float d;
} leaf_acc;

/* The nin (1 to 4) slots from slot off of the scratch rows R into A, the
** leaf's first when first is set. */
static WF_REFIT_INLINE void leaf_add(const float *R, int off, int nin, int first, leaf_acc *A) {
  rf4 v[9];
  for (int r = 0; r < 9; r++)
    v[r] = rld(R + r * REFIT_ROW + off);
  rm4 in = rfirst(nin);
  rf4 ab[3], ac[3], x[3];
  for (int a = 0; a < 3; a++)
    ab[a] = v[3 + a] - v[a], ac[a] = v[6 + a] - v[a];
  x[0] = ab[1] * ac[2] - ab[2] * ac[1];
  x[1] = ab[2] * ac[0] - ab[0] * ac[2];
  x[2] = ab[0] * ac[1] - ab[1] * ac[0];
  if (first) {
    A->n = rlane0(x[0], x[1], x[2]);
    A->inv = rnormal(&A->n);
    A->d = rhsum(A->n * rlane0(v[0], v[1], v[2]));
  }
  rf4 nx = RF_LANE(A->n, 0), ny = RF_LANE(A->n, 1), nz = RF_LANE(A->n, 2), d = rk(A->d);
  rf4 h0 = nx * v[0] + ny * v[1] + nz * v[2] - d, h1 = nx * v[3] + ny * v[4] + nz * v[5] - d,
      h2 = nx * v[6] + ny * v[7] + nz * v[8] - d;
  rf4 hp = rmax(rmax(h0, h1), h2), hn = rmax(rmax(-h0, -h1), -h2);
  const rm4 big = (rm4)rk(3.4e38f) & ~in, nbig = (rm4)rk(-3.4e38f) & ~in;
  rf4 lo[3], hi[3];
  for (int a = 0; a < 3; a++) {
    lo[a] = (rf4)(((rm4)rmin(v[a], rmin(v[3 + a], v[6 + a])) & in) | big);
    hi[a] = (rf4)(((rm4)rmax(v[a], rmax(v[3 + a], v[6 + a])) & in) | nbig);
    x[a] = rand4(in, x[a]);
  }
  /* the heights: -hn, as c - lo's lane 3 below is c + hn, leaf_batch's */
  rf4 l = rtmin(lo[0], lo[1], lo[2], -rand4(in, hn)), u = rtmax(hi[0], hi[1], hi[2], rand4(in, hp));
  rf4 s = rtsum(x[0], x[1], x[2], rk(0.0f));
  if (first) {
    A->lo = l, A->hi = u, A->s = s;
  } else {
    A->lo = rmin(A->lo, l), A->hi = rmax(A->hi, u), A->s += s;
  }
}

/* Leaf lane 4 w + j from A: its box, its normal sum (g->nsum: rows of
** lanes per wide node) and its bound, the slab moved to the box's
** centre. */
static WF_REFIT_INLINE void leaf_done(wf_geom *g, int lane, const leaf_acc *A) {
  int w = lane >> 2, j = lane & 3;
  wf_gnode4 *N = &g->wide[w];
  float *s = g->nsum + 12 * (size_t)w + j;
  for (int a = 0; a < 3; a++)
    N->lo[a][j] = A->lo[a], N->hi[a][j] = A->hi[a], s[4 * a] = A->s[a];
  rf4 o = (A->lo + A->hi) * rk(0.5f), e = rand4(rxyz, (A->hi - A->lo) * rk(0.5f));
  float r = rsqrt(rk(rhsum(e * e)))[0];
  float c = rhsum(A->n * o) - A->d;
  disc_set(&g->disc[w], j, A->n * A->inv, o, r, gmax(A->hi[3] - c, c - A->lo[3]) * A->inv[0]);
}

/* rnormal of 4 normals side by side (rows x, y, z; |s|^2 sums x and z,
** then y, as rhsum does): the z axis where it is out of range, and 1 / |s|
** (1 there). */
static WF_REFIT_INLINE rf4 rnormal4(rf4 *n) {
  rf4 l2 = (n[0] * n[0] + n[2] * n[2]) + n[1] * n[1];
  rm4 ok = (l2 > rk(1e-30f)) & (l2 < rk(3e38f));
  n[0] = rand4(ok, n[0]), n[1] = rand4(ok, n[1]), n[2] = rsel(ok, n[2], rk(1.0f));
  return rsel(ok, rk(1.0f) / rsqrt(l2), rk(1.0f));
}

/* The centres o and half extents e of 4 boxes [lo, hi] side by side, and
** their half diagonals (leaf_done's r). */
static WF_REFIT_INLINE rf4 rhalf4(const rf4 *lo, const rf4 *hi, rf4 *o, rf4 *e) {
  for (int a = 0; a < 3; a++)
    o[a] = (lo[a] + hi[a]) * rk(0.5f), e[a] = (hi[a] - lo[a]) * rk(0.5f);
  return rsqrt((e[0] * e[0] + e[2] * e[2]) + e[1] * e[1]);
}

/* Stores 4 lanes side by side, vector lane q wide lane l[q] = 4 w + j:
** boxes, summed normals and bounds (disc_set's, from the normals n, 1 / |n|
** and the slabs' t about the centres o, at most the half diagonals r). */
static WF_REFIT_INLINE void lanes_put(wf_geom *g, const int *l, const rf4 *lo, const rf4 *hi,
                                      const rf4 *s, const rf4 *dn, rf4 dt) {
  for (int q = 0; q < 4; q++) {
    int w = l[q] >> 2, j = l[q] & 3;
    wf_gnode4 *N = &g->wide[w];
    wf_gdisc4 *D = &g->disc[w];
    float *ns = g->nsum + 12 * (size_t)w + j;
    for (int a = 0; a < 3; a++) {
      N->lo[a][j] = lo[a][q], N->hi[a][j] = hi[a][q], ns[4 * a] = s[a][q];
      D->n[a][j] = dn[a][q];
    }
    D->t[j] = dt[q];
  }
}

static WF_REFIT_INLINE void store4(wf_geom *g, const int *l, const rf4 *lo, const rf4 *hi,
                                   const rf4 *s, const rf4 *n, rf4 inv, const rf4 *o, rf4 r,
                                   rf4 t) {
  rf4 m = rmax(rmax(rabs(o[0]), rabs(o[2])), rabs(o[1]));
  rf4 dn[3] = {n[0] * inv, n[1] * inv, n[2] * inv};
  lanes_put(g, l, lo, hi, s, dn, rmin(t, r) + (m + r) * rk(1.0f / 262144.0f));
}

/* What a slot adds to 4 leaves side by side (vector lane q leaf q's slot:
** its rows v, in use where in is set): leaf_add's box, summed normals ab x
** ac (x) and heights over the planes n.x = d, joined as its reductions
** join them (slots 0 and 2, 1 and 3, then the two). */
typedef struct slot4 {
  rf4 lo[3], hi[3], x[3], hp, hn; /* the largest height and the largest negated */
} slot4;

static WF_REFIT_INLINE void slot_cross(const rf4 *v, rf4 *x) {
  rf4 ab[3], ac[3];
  for (int a = 0; a < 3; a++)
    ab[a] = v[3 + a] - v[a], ac[a] = v[6 + a] - v[a];
  x[0] = ab[1] * ac[2] - ab[2] * ac[1];
  x[1] = ab[2] * ac[0] - ab[0] * ac[2];
  x[2] = ab[0] * ac[1] - ab[1] * ac[0];
}

static WF_REFIT_INLINE void slot_add(const rf4 *v, const rf4 *x, rm4 in, const rf4 *n, rf4 d,
                                     slot4 *S) {
  rf4 h0 = n[0] * v[0] + n[1] * v[1] + n[2] * v[2] - d,
      h1 = n[0] * v[3] + n[1] * v[4] + n[2] * v[5] - d,
      h2 = n[0] * v[6] + n[1] * v[7] + n[2] * v[8] - d;
  const rm4 big = (rm4)rk(3.4e38f) & ~in, nbig = (rm4)rk(-3.4e38f) & ~in;
  for (int a = 0; a < 3; a++) {
    S->lo[a] = (rf4)(((rm4)rmin(v[a], rmin(v[3 + a], v[6 + a])) & in) | big);
    S->hi[a] = (rf4)(((rm4)rmax(v[a], rmax(v[3 + a], v[6 + a])) & in) | nbig);
    S->x[a] = rand4(in, x[a]);
  }
  S->hp = rand4(in, rmax(rmax(h0, h1), h2)), S->hn = rand4(in, rmax(rmax(-h0, -h1), -h2));
}

static WF_REFIT_INLINE void slot_join(slot4 *S, const slot4 *T) {
  for (int a = 0; a < 3; a++) {
    S->lo[a] = rmin(S->lo[a], T->lo[a]), S->hi[a] = rmax(S->hi[a], T->hi[a]);
    S->x[a] = S->x[a] + T->x[a];
  }
  S->hp = rmax(S->hp, T->hp), S->hn = rmax(S->hn, T->hn);
}

/* Four leaves side by side, vector lane q the leaf of lane l[q], its c[q]
** (1 to 4) slots from slot o[q] of the scratch rows R: leaf_add's and
** leaf_done's operations, on the rows of the 4 leaves' slot s (T[s],
** transposed from the scratch), slot 0 first for the normals. */
static WF_REFIT_INLINE void leaf_batch(wf_geom *g, const float *R, const int *l, const int *o,
                                       const int *c) {
  rf4 T[4][9];
  for (int r = 0; r < 9; r++) {
    const float *row = R + r * REFIT_ROW;
    rtrans(rld(row + o[0]), rld(row + o[1]), rld(row + o[2]), rld(row + o[3]), &T[0][r], &T[1][r],
           &T[2][r], &T[3][r]);
  }
  const rm4 cnt = {c[0], c[1], c[2], c[3]};
  rf4 n[3], x[3];
  slot_cross(T[0], n);
  x[0] = n[0], x[1] = n[1], x[2] = n[2];
  rf4 inv = rnormal4(n);
  rf4 d = (n[0] * T[0][0] + n[2] * T[0][2]) + (n[1] * T[0][1] + rk(0.0f));
  slot4 A, B;
  slot_add(T[0], x, cnt > (rm4){0, 0, 0, 0}, n, d, &A);
  slot_cross(T[2], x);
  slot_add(T[2], x, cnt > (rm4){2, 2, 2, 2}, n, d, &B);
  slot_join(&A, &B);
  slot4 C, D;
  slot_cross(T[1], x);
  slot_add(T[1], x, cnt > (rm4){1, 1, 1, 1}, n, d, &C);
  slot_cross(T[3], x);
  slot_add(T[3], x, cnt > (rm4){3, 3, 3, 3}, n, d, &D);
  slot_join(&C, &D);
  slot_join(&A, &C);
  rf4 O[3], E[3], r = rhalf4(A.lo, A.hi, O, E);
  /* leaf_done's rhsum(n * o) has n's lane 3, 0, times o's, the centre of
  ** the heights */
  rf4 no = (n[0] * O[0] + n[2] * O[2]) + (n[1] * O[1] + rk(0.0f) * ((A.hp - A.hn) * rk(0.5f)));
  rf4 hc = no - d;
  store4(g, l, A.lo, A.hi, A.x, n, inv, O, r, rmax(A.hp - hc, hc + A.hn) * inv);
}

#if defined(WF_REFIT_AVX2)
/* Eight leaves side by side, on CPUs with AVX2 (g->w8): leaf_batch's
** operations in 8 vector lanes, each lane's the same as leaf_batch's
** (the transposes and the reductions run in the two halves as in 4
** lanes), so the results are leaf_batch's, bit for bit, for about half
** the instructions. The baseline build has no 8-lane code: generic
** vectors of 8 floats cost more than two of 4 on SSE (no minps, shuffles
** lane by lane), so these take AVX2 intrinsics, in functions for AVX2. */
typedef float rf8 __attribute__((vector_size(32)));
typedef int rm8 __attribute__((vector_size(32)));
#define WF_AVX2 __attribute__((target("avx2")))
static WF_REFIT_INLINE WF_AVX2 rf8 r8k(float x) {
  return (rf8){x, x, x, x, x, x, x, x};
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8min(rf8 a, rf8 b) {
  return (rf8)_mm256_min_ps((__m256)a, (__m256)b);
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8max(rf8 a, rf8 b) {
  return (rf8)_mm256_max_ps((__m256)a, (__m256)b);
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8sqrt(rf8 a) {
  return (rf8)_mm256_sqrt_ps((__m256)a);
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8and(rm8 m, rf8 a) {
  return (rf8)(m & (rm8)a);
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8sel(rm8 m, rf8 a, rf8 b) {
  return (rf8)((m & (rm8)a) | (~m & (rm8)b));
}
static WF_REFIT_INLINE WF_AVX2 rf8 r8abs(rf8 a) {
  return (rf8)((rm8)a & (rm8)_mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}
/* lanes 0-3 from p, 4-7 from q */
static WF_REFIT_INLINE WF_AVX2 rf8 r8cat(const float *p, const float *q) {
  return (rf8)_mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(q), 1);
}
/* RF_SHUF in each half: (a b) index i < 4 is a's lane i, i >= 4 b's i - 4 */
#define R8_I(i) ((i) < 4 ? (i) : (i) + 4)
#if defined(__clang__)
#define R8_SHUF(a, b, i, j, k, l)                                                                  \
  __builtin_shufflevector(a, b, R8_I(i), R8_I(j), R8_I(k), R8_I(l), R8_I(i) + 4, R8_I(j) + 4,      \
                          R8_I(k) + 4, R8_I(l) + 4)
#else
#define R8_SHUF(a, b, i, j, k, l)                                                                  \
  __builtin_shuffle(a, b,                                                                          \
                    (rm8){R8_I(i), R8_I(j), R8_I(k), R8_I(l), R8_I(i) + 4, R8_I(j) + 4,            \
                          R8_I(k) + 4, R8_I(l) + 4})
#endif
static WF_REFIT_INLINE WF_AVX2 void rtrans8(rf8 a, rf8 b, rf8 c, rf8 d, rf8 *o0, rf8 *o1, rf8 *o2,
                                            rf8 *o3) {
  rf8 t0 = R8_SHUF(a, b, 0, 4, 1, 5), t1 = R8_SHUF(c, d, 0, 4, 1, 5);
  rf8 t2 = R8_SHUF(a, b, 2, 6, 3, 7), t3 = R8_SHUF(c, d, 2, 6, 3, 7);
  *o0 = R8_SHUF(t0, t1, 0, 1, 4, 5), *o1 = R8_SHUF(t0, t1, 2, 3, 6, 7);
  *o2 = R8_SHUF(t2, t3, 0, 1, 4, 5), *o3 = R8_SHUF(t2, t3, 2, 3, 6, 7);
}

typedef struct slot8 {
  rf8 lo[3], hi[3], x[3], hp, hn;
} slot8;

/* slot_cross, slot_add, slot_join, rnormal4, rhalf4 and store4 in 8 lanes */
static WF_REFIT_INLINE WF_AVX2 void slot_cross8(const rf8 *v, rf8 *x) {
  rf8 ab[3], ac[3];
  for (int a = 0; a < 3; a++)
    ab[a] = v[3 + a] - v[a], ac[a] = v[6 + a] - v[a];
  x[0] = ab[1] * ac[2] - ab[2] * ac[1];
  x[1] = ab[2] * ac[0] - ab[0] * ac[2];
  x[2] = ab[0] * ac[1] - ab[1] * ac[0];
}

static WF_REFIT_INLINE WF_AVX2 void slot_add8(const rf8 *v, const rf8 *x, rm8 in, const rf8 *n,
                                              rf8 d, slot8 *S) {
  rf8 h0 = n[0] * v[0] + n[1] * v[1] + n[2] * v[2] - d,
      h1 = n[0] * v[3] + n[1] * v[4] + n[2] * v[5] - d,
      h2 = n[0] * v[6] + n[1] * v[7] + n[2] * v[8] - d;
  const rm8 big = (rm8)r8k(3.4e38f) & ~in, nbig = (rm8)r8k(-3.4e38f) & ~in;
  for (int a = 0; a < 3; a++) {
    S->lo[a] = (rf8)(((rm8)r8min(v[a], r8min(v[3 + a], v[6 + a])) & in) | big);
    S->hi[a] = (rf8)(((rm8)r8max(v[a], r8max(v[3 + a], v[6 + a])) & in) | nbig);
    S->x[a] = r8and(in, x[a]);
  }
  S->hp = r8and(in, r8max(r8max(h0, h1), h2)), S->hn = r8and(in, r8max(r8max(-h0, -h1), -h2));
}

static WF_REFIT_INLINE WF_AVX2 void slot_join8(slot8 *S, const slot8 *T) {
  for (int a = 0; a < 3; a++) {
    S->lo[a] = r8min(S->lo[a], T->lo[a]), S->hi[a] = r8max(S->hi[a], T->hi[a]);
    S->x[a] = S->x[a] + T->x[a];
  }
  S->hp = r8max(S->hp, T->hp), S->hn = r8max(S->hn, T->hn);
}

static WF_REFIT_INLINE WF_AVX2 rf8 rnormal8(rf8 *n) {
  rf8 l2 = (n[0] * n[0] + n[2] * n[2]) + n[1] * n[1];
  rm8 ok = (l2 > r8k(1e-30f)) & (l2 < r8k(3e38f));
  n[0] = r8and(ok, n[0]), n[1] = r8and(ok, n[1]), n[2] = r8sel(ok, n[2], r8k(1.0f));
  return r8sel(ok, r8k(1.0f) / r8sqrt(l2), r8k(1.0f));
}

static WF_REFIT_INLINE WF_AVX2 rf8 rhalf8(const rf8 *lo, const rf8 *hi, rf8 *o, rf8 *e) {
  for (int a = 0; a < 3; a++)
    o[a] = (lo[a] + hi[a]) * r8k(0.5f), e[a] = (hi[a] - lo[a]) * r8k(0.5f);
  return r8sqrt((e[0] * e[0] + e[2] * e[2]) + e[1] * e[1]);
}

/* (by halves of 4 lanes: lanes of 8 went through the stack one by one) */
static WF_REFIT_INLINE WF_AVX2 void store8(wf_geom *g, const int *l, const rf8 *lo, const rf8 *hi,
                                           const rf8 *s, const rf8 *n, rf8 inv, const rf8 *o, rf8 r,
                                           rf8 t) {
  rf8 m = r8max(r8max(r8abs(o[0]), r8abs(o[2])), r8abs(o[1]));
  rf8 v[13];
  for (int a = 0; a < 3; a++)
    v[a] = lo[a], v[3 + a] = hi[a], v[6 + a] = s[a], v[9 + a] = n[a] * inv;
  v[12] = r8min(t, r) + (m + r) * r8k(1.0f / 262144.0f);
  rf4 u[13];
  for (int k = 0; k < 13; k++)
    u[k] = (rf4)_mm256_castps256_ps128((__m256)v[k]);
  lanes_put(g, l, u, u + 3, u + 6, u + 9, u[12]);
  for (int k = 0; k < 13; k++)
    u[k] = (rf4)_mm256_extractf128_ps((__m256)v[k], 1);
  lanes_put(g, l + 4, u, u + 3, u + 6, u + 9, u[12]);
}

/* leaf_batch for 8 leaves (l, o, c as there) */
static WF_AVX2 void leaf_batch8(wf_geom *g, const float *R, const int *l, const int *o,
                                const int *c) {
  rf8 T[4][9];
  for (int r = 0; r < 9; r++) {
    const float *row = R + r * REFIT_ROW;
    rtrans8(r8cat(row + o[0], row + o[4]), r8cat(row + o[1], row + o[5]),
            r8cat(row + o[2], row + o[6]), r8cat(row + o[3], row + o[7]), &T[0][r], &T[1][r],
            &T[2][r], &T[3][r]);
  }
  const rm8 cnt = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]};
  rf8 n[3], x[3];
  slot_cross8(T[0], n);
  x[0] = n[0], x[1] = n[1], x[2] = n[2];
  rf8 inv = rnormal8(n);
  rf8 d = (n[0] * T[0][0] + n[2] * T[0][2]) + (n[1] * T[0][1] + r8k(0.0f));
  slot8 A, B;
  slot_add8(T[0], x, cnt > (rm8){0, 0, 0, 0, 0, 0, 0, 0}, n, d, &A);
  slot_cross8(T[2], x);
  slot_add8(T[2], x, cnt > (rm8){2, 2, 2, 2, 2, 2, 2, 2}, n, d, &B);
  slot_join8(&A, &B);
  slot8 C, D;
  slot_cross8(T[1], x);
  slot_add8(T[1], x, cnt > (rm8){1, 1, 1, 1, 1, 1, 1, 1}, n, d, &C);
  slot_cross8(T[3], x);
  slot_add8(T[3], x, cnt > (rm8){3, 3, 3, 3, 3, 3, 3, 3}, n, d, &D);
  slot_join8(&C, &D);
  slot_join8(&A, &C);
  rf8 O[3], E[3], r = rhalf8(A.lo, A.hi, O, E);
  rf8 no = (n[0] * O[0] + n[2] * O[2]) + (n[1] * O[1] + r8k(0.0f) * ((A.hp - A.hn) * r8k(0.5f)));
  rf8 hc = no - d;
  store8(g, l, A.lo, A.hi, A.x, n, inv, O, r, r8max(A.hp - hc, hc + A.hn) * inv);
}
#endif

/* Four inner lanes side by side, vector lane q lane E[2 q] = 4 w + j over
** child node E[2 q + 1] = c: the box, the summed normals and the bound of
** c's lanes in use. The bound: n from the summed normals, t the farthest
** reach along n of the children's cylinders (or of the box): a child
** lane's points x = o' + a n' + b, |a| <= t', |b| <= r', lie within
** |n.(o' - o)| + t' |n.n'| + r' |n x n'| of the plane through o (the sine
** from the cross product: 1 - cos^2 cancels for near-parallel normals), n
** the sum unscaled till the reaches take 1 / |n| last. The reaches of a
** child's lanes go side by side in vector lanes, one child after the
** other. */
static WF_REFIT_INLINE void inner_batch(wf_geom *g, const int *E) {
  const wf_gnode4 *W = g->wide;
  const rf4 half = rk(0.5f);
  rf4 ml[3][4], mh[3][4], ms[3][4];
  rm4 in[4];
  int l[4];
  /* (unrolled: lane q of a vector is then a constant) */
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    int c = E[2 * q + 1];
    const wf_gnode4 *C = &W[c];
    const float *cs = g->nsum + 12 * (size_t)c;
    l[q] = E[2 * q];
    memcpy(&in[q], C->child, sizeof in[q]);
    in[q] = in[q] != (rm4){0, 0, 0, 0};
    const rm4 big = (rm4)rk(3.4e38f) & ~in[q], nbig = (rm4)rk(-3.4e38f) & ~in[q];
    for (int a = 0; a < 3; a++) {
      ml[a][q] = (rf4)(((rm4)rld(C->lo[a]) & in[q]) | big);
      mh[a][q] = (rf4)(((rm4)rld(C->hi[a]) & in[q]) | nbig);
      ms[a][q] = rand4(in[q], rld(cs + 4 * a));
    }
  }
  rf4 L[3], U[3], S[3], n[3], O[3], X[3];
  for (int a = 0; a < 3; a++) {
    L[a] = rtmin(ml[a][0], ml[a][1], ml[a][2], ml[a][3]);
    U[a] = rtmax(mh[a][0], mh[a][1], mh[a][2], mh[a][3]);
    S[a] = rtsum(ms[a][0], ms[a][1], ms[a][2], ms[a][3]);
    n[a] = S[a];
  }
  rf4 inv = rnormal4(n), r = rhalf4(L, U, O, X), t[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    const wf_gnode4 *C = &W[E[2 * q + 1]];
    const wf_gdisc4 *Dc = &g->disc[E[2 * q + 1]];
    const rf4 nx = rk(n[0][q]), ny = rk(n[1][q]), nz = rk(n[2][q]), iq = rk(inv[q]);
    rf4 d[3], el[3];
    for (int a = 0; a < 3; a++) {
      rf4 cl = rld(C->lo[a]), ch = rld(C->hi[a]);
      d[a] = (cl + ch) * half - rk(O[a][q]), el[a] = (ch - cl) * half;
    }
    rf4 cx = rld(Dc->n[0]), cy = rld(Dc->n[1]), cz = rld(Dc->n[2]);
    rf4 rl = rsqrt(el[0] * el[0] + el[1] * el[1] + el[2] * el[2]), tl = rld(Dc->t);
    rf4 xx = ny * cz - nz * cy, xy = nz * cx - nx * cz, xz = nx * cy - ny * cx;
    rf4 cosv = nx * cx + ny * cy + nz * cz, hd = nx * d[0] + ny * d[1] + nz * d[2];
    rf4 reach = (tl * rabs(cosv) + rl * rsqrt(xx * xx + xy * xy + xz * xz)) * iq;
    t[q] = rand4(in[q], rabs(hd) * iq + rmin(rl, reach));
  }
  /* at most the box's reach (rhsum(|n| e) had lane 3 0) */
  rf4 tb = ((rabs(n[0]) * X[0] + rabs(n[2]) * X[2]) + (rabs(n[1]) * X[1] + rk(0.0f))) * inv;
  store4(g, l, L, U, S, n, inv, O, r, rmin(rtmax(t[0], t[1], t[2], t[3]), tb));
}

#if defined(WF_REFIT_AVX2)
#define R8_TRED(name, op)                                                                          \
  static WF_REFIT_INLINE WF_AVX2 rf8 name(rf8 a, rf8 b, rf8 c, rf8 d) {                            \
    rf8 t0 = op(R8_SHUF(a, b, 0, 4, 1, 5), R8_SHUF(a, b, 2, 6, 3, 7));                             \
    rf8 t1 = op(R8_SHUF(c, d, 0, 4, 1, 5), R8_SHUF(c, d, 2, 6, 3, 7));                             \
    return op(R8_SHUF(t0, t1, 0, 1, 4, 5), R8_SHUF(t0, t1, 2, 3, 6, 7));                           \
  }
static WF_REFIT_INLINE WF_AVX2 rf8 r8add(rf8 a, rf8 b) {
  return a + b;
}
R8_TRED(r8tmin, r8min)
R8_TRED(r8tmax, r8max)
R8_TRED(r8tsum, r8add)
/* lane q of each half in all of that half's lanes */
static WF_REFIT_INLINE WF_AVX2 rf8 r8lane(rf8 v, int q) {
  return (rf8)_mm256_permutevar8x32_ps((__m256)v,
                                       _mm256_setr_epi32(q, q, q, q, q + 4, q + 4, q + 4, q + 4));
}

/* inner_batch for 8 inner lanes (E as there): the vectors over a child's
** lanes hold two children, E's q in the low half and q + 4 in the high */
static WF_AVX2 void inner_batch8(wf_geom *g, const int *E) {
  const wf_gnode4 *W = g->wide;
  const rf8 half = r8k(0.5f);
  rf8 ml[3][4], mh[3][4], ms[3][4];
  rm8 in[4];
  int l[8];
  for (int q = 0; q < 8; q++)
    l[q] = E[2 * q];
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    const wf_gnode4 *C0 = &W[E[2 * q + 1]], *C1 = &W[E[2 * q + 9]];
    const float *s0 = g->nsum + 12 * (size_t)E[2 * q + 1],
                *s1 = g->nsum + 12 * (size_t)E[2 * q + 9];
    in[q] = (rm8)r8cat((const float *)C0->child, (const float *)C1->child) != (rm8){0};
    const rm8 big = (rm8)r8k(3.4e38f) & ~in[q], nbig = (rm8)r8k(-3.4e38f) & ~in[q];
    for (int a = 0; a < 3; a++) {
      ml[a][q] = (rf8)(((rm8)r8cat(C0->lo[a], C1->lo[a]) & in[q]) | big);
      mh[a][q] = (rf8)(((rm8)r8cat(C0->hi[a], C1->hi[a]) & in[q]) | nbig);
      ms[a][q] = r8and(in[q], r8cat(s0 + 4 * a, s1 + 4 * a));
    }
  }
  rf8 L[3], U[3], S[3], n[3], O[3], X[3];
  for (int a = 0; a < 3; a++) {
    L[a] = r8tmin(ml[a][0], ml[a][1], ml[a][2], ml[a][3]);
    U[a] = r8tmax(mh[a][0], mh[a][1], mh[a][2], mh[a][3]);
    S[a] = r8tsum(ms[a][0], ms[a][1], ms[a][2], ms[a][3]);
    n[a] = S[a];
  }
  rf8 inv = rnormal8(n), r = rhalf8(L, U, O, X), t[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    const wf_gnode4 *C0 = &W[E[2 * q + 1]], *C1 = &W[E[2 * q + 9]];
    const wf_gdisc4 *D0 = &g->disc[E[2 * q + 1]], *D1 = &g->disc[E[2 * q + 9]];
    const rf8 nx = r8lane(n[0], q), ny = r8lane(n[1], q), nz = r8lane(n[2], q);
    const rf8 iq = r8lane(inv, q);
    rf8 d[3], el[3];
    for (int a = 0; a < 3; a++) {
      rf8 cl = r8cat(C0->lo[a], C1->lo[a]), ch = r8cat(C0->hi[a], C1->hi[a]);
      d[a] = (cl + ch) * half - r8lane(O[a], q), el[a] = (ch - cl) * half;
    }
    rf8 cx = r8cat(D0->n[0], D1->n[0]), cy = r8cat(D0->n[1], D1->n[1]);
    rf8 cz = r8cat(D0->n[2], D1->n[2]), tl = r8cat(D0->t, D1->t);
    rf8 rl = r8sqrt(el[0] * el[0] + el[1] * el[1] + el[2] * el[2]);
    rf8 xx = ny * cz - nz * cy, xy = nz * cx - nx * cz, xz = nx * cy - ny * cx;
    rf8 cosv = nx * cx + ny * cy + nz * cz, hd = nx * d[0] + ny * d[1] + nz * d[2];
    rf8 reach = (tl * r8abs(cosv) + rl * r8sqrt(xx * xx + xy * xy + xz * xz)) * iq;
    t[q] = r8and(in[q], r8abs(hd) * iq + r8min(rl, reach));
  }
  rf8 tb = ((r8abs(n[0]) * X[0] + r8abs(n[2]) * X[2]) + (r8abs(n[1]) * X[1] + r8k(0.0f))) * inv;
  store8(g, l, L, U, S, n, inv, O, r, r8min(r8tmax(t[0], t[1], t[2], t[3]), tb));
}
#endif

/* A batch of leaves, 8 with AVX2 (g->w8), else 4. */
static WF_REFIT_INLINE void leaf_batches(wf_geom *g, const float *R, const int *l, const int *o,
                                         const int *c) {
#if defined(WF_REFIT_AVX2)
  if (g->w8) {
    leaf_batch8(g, R, l, o, c);
    return;
  }
#endif
  leaf_batch(g, R, l, o, c);
}

/* The leaves [begin, end) of g->leaves: those of at most 4 slots in the
** window four or eight at a time, after the window's others, one at a
** time, slots [k0, k1) of the leaf in hand (a leaf across windows keeps
** its sums). The window's batched leaves are listed first (lanes,
** offsets, counts, with copies of the last one to fill the last batch,
** which store the same again), then taken in batches. */
static WF_REFIT_INLINE void refit_leaves(wf_geom *g, int begin, int end) {
  float R[9 * REFIT_ROW] __attribute__((aligned(64)));
  int bl[REFIT_WIN + 8], bo[REFIT_WIN + 8], bc[REFIT_WIN + 8]; /* a leaf has a slot at least */
  const int *k0s = g->lk0;
  int K1 = k0s[end], i = begin, nbatch = g->w8 ? 8 : 4;
  leaf_acc A;
  memset(&A, 0, sizeof A);
  for (int w0 = k0s[begin]; w0 < K1;) {
    /* windows end at multiples of REFIT_WIN: the sums of a leaf they cut
    ** come in the same order on any number of threads */
    int base = w0 & ~3, w1 = (w0 & -REFIT_WIN) + REFIT_WIN;
    w1 = K1 < w1 ? K1 : w1;
    fill_window(g, R, base, w0, (w1 + 3) & ~3);
    int nb = 0;
    for (; i < end; i++) {
      int k0 = k0s[i], k1 = k0s[i + 1];
      if (k0 >= w1) break;
      if (k0 >= w0 && k1 <= w1 && k1 - k0 <= 4) {
        bl[nb] = g->leaves[i], bo[nb] = k0 - base, bc[nb++] = k1 - k0;
        continue;
      }
      int a = k0 > w0 ? k0 : w0, b = k1 < w1 ? k1 : w1;
      for (int k = a; k < b; k += 4)
        leaf_add(R, k - base, b - k < 4 ? b - k : 4, k == k0, &A);
      if (k1 > w1) break; /* the leaf goes on in the next window */
      leaf_done(g, g->leaves[i], &A);
    }
    for (int q = nb; q % nbatch; q++)
      bl[q] = bl[nb - 1], bo[q] = bo[nb - 1], bc[q] = bc[nb - 1];
    for (int q = 0; q < nb; q += nbatch)
      leaf_batches(g, R, bl + q, bo + q, bc + q);
    w0 = w1;
  }
}

/* The inner lanes of g->inner's pairs [begin, end) (a multiple of the
** batch, 8 with AVX2 (g->w8), else 4); ahead set: the child nodes of the
** lanes two batches on are prefetched (the lanes above the items read
** nodes refit long before, or by another thread). */
static WF_REFIT_INLINE void refit_inner(wf_geom *g, int begin, int end, int ahead) {
  int nb = g->w8 ? 8 : 4;
  for (int k = begin; k < end; k += nb) {
#if defined(__GNUC__)
    if (ahead && k + 3 * nb <= end)
      for (int q = 0; q < nb; q++) {
        int c = g->inner[2 * (size_t)(k + 2 * nb + q) + 1];
        __builtin_prefetch(&g->wide[c]);
        __builtin_prefetch((const char *)&g->wide[c] + 64);
        __builtin_prefetch(&g->disc[c]);
        __builtin_prefetch(g->nsum + 12 * (size_t)c);
        __builtin_prefetch(g->nsum + 12 * (size_t)c + 11);
      }
#endif
#if defined(WF_REFIT_AVX2)
    if (nb == 8) {
      inner_batch8(g, g->inner + 2 * (size_t)k);
      continue;
    }
#endif
    inner_batch(g, g->inner + 2 * (size_t)k);
  }
}

/* wf_pool_fn: items [begin, end), each its leaves of g->leaves and then
** the inner lanes over its subtrees. */
WF_REFIT_CLONES static void refit_items(void *p, int64_t begin, int64_t end) {
  wf_geom *g = p;
  for (int64_t t = begin; t < end; t++) {
    refit_leaves(g, g->istart[t], g->istart[t + 1]);
    refit_inner(g, g->ioff[t], g->ioff[t + 1], 0);
  }
#if defined(__SSE__)
  if (g->stream) _mm_sfence(); /* the triangles' streaming stores before the job ends */
#endif
}

/* The lanes above the items, lower subtrees first. */
WF_REFIT_CLONES static void refit_upper(wf_geom *g) {
  refit_inner(g, g->ioff[g->nitems], g->ioff[g->nitems + 1], 1);
}

static void mesh_refit(wf_rt *rt, wf_geom *g) {
  wf_pool *pool = g->nprims >= REFIT_POOL ? wf_launch_pool(rt) : NULL;
  if (pool)
    wf_pool_run(pool, g->nitems, 1, refit_items, g, NULL);
  else
    refit_items(g, 0, g->nitems);
  refit_upper(g);
}

/* What refit walks, from the wide nodes: the leaf lanes 4 w + j in slot
** order (g->leaves) and their first slots (g->lk0, one past the last
** slot at the end), in depth-first lane order (bvh4.c keeps the
** binary tree's order, so the leaves come in slot order and cover the
** slots one after the other: -1 if not); g->nitems items of at most
** REFIT_ITEM leaves, item t from leaf g->istart[t]; and the inner lanes as
** pairs (lane 4 w + j, its child node c) in g->inner: for item t from
** g->ioff[t] those whose subtree's leaves lie in the item, and from
** g->ioff[nitems] to g->ioff[nitems + 1] the others. Items end where no
** subtree of at most REFIT_ITEM leaves goes on (a node's lanes over
** subtrees in one item are refit with the item, in parallel): only the
** lanes over bigger subtrees come after the items, on one thread (~100
** lanes for the 200k-triangle torus, not ~950 with items cut every
** REFIT_ITEM leaves). Each part goes by the height of c's subtree (1 +
** the highest child's, 0 over leaves only): a lane then comes after the
** lanes of c it reads, and a batch in a row of one height (each height
** padded to a multiple of the batch, 4 or 8 (g->w8), with copies of its
** last pair) read none of each other's. 0, or -1 when out of memory. */
static int refit_plan(wf_geom *g) {
  const wf_gnode4 *W = g->wide;
  int nw = g->nwide, rc = -1, nh = 1;
  size_t nwz = (size_t)nw;
  /* node nw: a stand-in for the lanes without a child node */
  int *first = malloc(sizeof(int) * (nwz + 1)), *end = malloc(sizeof(int) * (nwz + 1));
  int *lane = malloc(sizeof(int) * (nwz + 1)), *ht = malloc(sizeof(int) * (nwz + 1));
  int *key = malloc(sizeof(int) * nwz), *at = NULL, *item = NULL;
  unsigned char *cut = NULL;
  g->leaves = malloc(sizeof(int) * (4 * nwz + 1)); /* slot 4 nw: a stand-in too */
  g->lk0 = malloc(sizeof(int) * (4 * nwz + 1));
  if (!first || !end || !lane || !ht || !key || !g->leaves || !g->lk0) goto done;
  /* lane[c]: c's lane in its parent; c's leaves from first[c] to end[c].
  ** Two passes in node order, not a walk: wide nodes come after their
  ** parents (bvh4.c), so backwards every node's children are counted
  ** (end[w]: its leaves; ht[w]: 1 + its highest child's, 0 over leaves
  ** only) before it, and forwards every node is placed (first[w]) before
  ** its children, which then start where the lanes before them end: the
  ** leaves at the positions of a depth-first walk in lane order, whose
  ** three-way branch per lane mispredicted. The lanes go without
  ** branches: lanes without a child node read and write node nw (no
  ** leaves, height -1), lanes that are no leaf slot 4 nw. */
  int next = 0, nl = 0, none = nw;
  end[none] = 0, ht[none] = -1;
  for (int w = nw - 1; w >= 0; w--) {
    int cnt = 0, h = 0;
    for (int j = 0; j < 4; j++) {
      int c = W[w].child[j], ci = c > 0 ? c : none;
      cnt += (c < 0) + end[ci];
      h = ht[ci] + 1 > h ? ht[ci] + 1 : h;
    }
    end[w] = cnt, ht[w] = h;
  }
  nl = end[0];
  lane[0] = -1, first[0] = 0;
  for (int w = 0; w < nw; w++) {
    int pos = first[w];
    end[w] += pos;
    for (int j = 0; j < 4; j++) {
      int c = W[w].child[j], ci = c > 0 ? c : none, k = c < 0 ? pos : 4 * nw;
      g->leaves[k] = 4 * w + j, g->lk0[k] = ~c;
      first[ci] = pos, lane[ci] = 4 * w + j;
      pos += (c < 0) + end[ci];
    }
  }
  /* the leaves cover the slots one after the other */
  for (int k = 0; k < nl; k++) {
    int l = g->leaves[k];
    if (g->lk0[k] != next) goto done;
    next += W[l >> 2].count[l & 3];
  }
  if (next != g->nprims) goto done;
  g->nleaves = nl, g->lk0[nl] = next, g->stream = g->nprims >= REFIT_POOL;
#if defined(WF_REFIT_AVX2)
  g->w8 = __builtin_cpu_supports("avx2");
#endif
  /* the cuts: leaf positions inside no subtree of at most REFIT_ITEM
  ** leaves; each item ends at the last cut within REFIT_ITEM leaves (one
  ** past the end of the subtree it starts with, at least) */
  cut = malloc((size_t)nl + 1);
  item = malloc(sizeof(int) * ((size_t)nl + 1));
  g->istart = malloc(sizeof(int) * ((size_t)nl + 2));
  if (!cut || !item || !g->istart) goto done;
  memset(cut, 1, (size_t)nl + 1);
  for (int w = 0; w < nw; w++)
    if (end[w] - first[w] <= REFIT_ITEM)
      for (int k = first[w] + 1; k < end[w]; k++)
        cut[k] = 0;
  g->nitems = 0;
  for (int b = 0; b < nl;) {
    int e = b + REFIT_ITEM < nl ? b + REFIT_ITEM : nl;
    while (e > b + 1 && !cut[e])
      e--;
    for (int k = b; k < e; k++)
      item[k] = g->nitems;
    g->istart[g->nitems++] = b, b = e;
  }
  g->istart[g->nitems] = nl;
  /* key: a node's item, or nitems (after the items) when it spans items */
  for (int c = 1; c < nw; c++)
    nh = ht[c] + 1 > nh ? ht[c] + 1 : nh;
  for (int c = 1; c < nw; c++) {
    int t = item[first[c]];
    key[c] = (item[end[c] - 1] == t ? t : g->nitems) * nh + ht[c];
  }
  /* counting sort by (part, height), each padded to a multiple of the
  ** batch of inner lanes */
  int pad = g->w8 ? 8 : 4;
  size_t nkeys = ((size_t)g->nitems + 1) * (size_t)nh;
  at = calloc(nkeys + 1, sizeof(int));
  g->ioff = malloc(sizeof(int) * ((size_t)g->nitems + 2));
  if (!at || !g->ioff) goto done;
  for (int c = 1; c < nw; c++)
    at[key[c] + 1]++;
  int total = 0;
  for (size_t k = 1; k <= nkeys; k++) {
    int cnt = at[k];
    at[k] = total; /* at[k]: where key k - 1's pairs go next */
    total += (cnt + pad - 1) / pad * pad;
  }
  for (int t = 0; t <= g->nitems; t++)
    g->ioff[t] = at[(size_t)t * nh + 1];
  g->ioff[g->nitems + 1] = total;
  g->inner = malloc(sizeof(int) * 2 * (size_t)(total ? total : 1));
  if (!g->inner) goto done;
  for (int c = 1; c < nw; c++) {
    int k = at[key[c] + 1]++;
    g->inner[2 * k] = lane[c], g->inner[2 * k + 1] = c;
  }
  /* pad: at[k + 1] now ends key k's pairs, the next key's start at the
  ** multiple of pad above */
  for (size_t k = 0; k < nkeys; k++)
    for (int e = at[k + 1]; e % pad; e++) {
      g->inner[2 * e] = g->inner[2 * (e - 1)];
      g->inner[2 * e + 1] = g->inner[2 * (e - 1) + 1];
    }
  rc = 0;
  int *shrunk = realloc(g->leaves, sizeof(int) * (size_t)(nl ? nl : 1));
  if (shrunk) g->leaves = shrunk;
  shrunk = realloc(g->lk0, sizeof(int) * ((size_t)nl + 1));
  if (shrunk) g->lk0 = shrunk;
  shrunk = realloc(g->istart, sizeof(int) * ((size_t)g->nitems + 1));
  if (shrunk) g->istart = shrunk;
done:
  free(first);
  free(end);
  free(lane);
  free(ht);
  free(key);
  free(at);
  free(item);
  free(cut);
  return rc;
}

/* After the collapse, on the pool (n >= 65536): refit_plan (item 0)
** beside the zeroing of the lanes' bounds (g->disc, refit sets the lanes
** in use), ZERO_ITEM wide nodes an item; both first touch fresh memory
** (0.7 ms each for the bench torus, one after the other). */
#define ZERO_ITEM 4096
typedef struct tail_job {
  wf_geom *g;
  int rc;
} tail_job;

static void tail_items(void *p, int64_t begin, int64_t end) {
  tail_job *j = p;
  for (int64_t t = begin; t < end; t++) {
    if (!t) {
      j->rc = refit_plan(j->g);
      continue;
    }
    int64_t w0 = (t - 1) * ZERO_ITEM,
            w1 = w0 + ZERO_ITEM < j->g->nwide ? w0 + ZERO_ITEM : j->g->nwide;
    memset(&j->g->disc[w0], 0, sizeof(wf_gdisc4) * (size_t)(w1 - w0));
  }
}

/* The faces' vertices in slot order (g->sidx: offsets 3 i in the points'
** floats), and g->slow: the blocks of slots that refit reads vertex by
** vertex; for slots [begin,
** end), on the build's threads (wf_bvh_slots_fn) as their leaves are
** made: the random reads of the indices spread over the cores, beside the
** build's work (a pass after the build took 1.6 ms of the bench torus's
** build). Two threads may own slots of one word of g->slow, but only the
** few faces with the last point set a bit. */
#define FACE_AHEAD 16
static void face_slots(void *ctx, int begin, int end, const int *items) {
  wf_geom *g = ctx;
  int last = g->d.mesh.npoints - 1;
  for (int k = begin; k < end; k++) {
#if defined(__GNUC__)
    /* the faces are spread over the indices: ask for one ahead */
    if (k + FACE_AHEAD < end)
      __builtin_prefetch(g->d.mesh.indices + 3 * (size_t)items[k + FACE_AHEAD]);
#endif
    const int *f = g->d.mesh.indices + 3 * (size_t)items[k];
    uint32_t *s = g->sidx + 3 * (size_t)k;
    s[0] = 3 * (uint32_t)f[0], s[1] = 3 * (uint32_t)f[1], s[2] = 3 * (uint32_t)f[2];
    if ((f[0] == last) | (f[1] == last) | (f[2] == last))
      __atomic_fetch_or(&g->slow[k / WF_GTB / 64], 1ull << (k / WF_GTB % 64), __ATOMIC_RELAXED);
  }
}

/* Winding-number data (query.h: wf_gwind) of the leaf of slots [k0, k1). */
static void wind_leaf(const wf_geom *g, int k0, int k1, wf_gwind *w) {
  const wf_gmesh *m = &g->d.mesh;
  double c[3] = {0, 0, 0}, nn[3] = {0, 0, 0}, area = 0;
  float r = 0;
  for (int k = k0; k < k1; k++) {
    wf_g3 a, b, cc;
    gtri(m, g->items[k], &a, &b, &cc);
    wf_g3 an = g3mul(g3cross(g3sub(b, a), g3sub(cc, a)), 0.5f);
    double ar = sqrt((double)g3dot(an, an)) + 1e-30;
    wf_g3 cen = g3mul(g3add(g3add(a, b), cc), 1.0f / 3.0f);
    c[0] += ar * cen.x, c[1] += ar * cen.y, c[2] += ar * cen.z;
    nn[0] += an.x, nn[1] += an.y, nn[2] += an.z;
    area += ar;
  }
  wf_g3 cf = g3((float)(c[0] / area), (float)(c[1] / area), (float)(c[2] / area));
  for (int k = k0; k < k1; k++) {
    wf_g3 v[3];
    gtri(m, g->items[k], &v[0], &v[1], &v[2]);
    for (int j = 0; j < 3; j++) {
      wf_g3 d = g3sub(v[j], cf);
      r = gmax(r, sqrtf(g3dot(d, d)));
    }
  }
  w->c[0] = cf.x, w->c[1] = cf.y, w->c[2] = cf.z;
  w->n[0] = (float)nn[0], w->n[1] = (float)nn[1], w->n[2] = (float)nn[2];
  w->r = r * 1.0001f;
  w->pad = (float)area;
}

/* The data of an inner lane from the used lanes of its child (l, n of
** them): area-weighted centroid, summed normals, a ball holding theirs. */
static void wind_join(const wf_gwind *l, int n, wf_gwind *w) {
  double c[3] = {0, 0, 0}, nn[3] = {0, 0, 0}, area = 0;
  for (int i = 0; i < n; i++) {
    area += (double)l[i].pad;
    for (int k = 0; k < 3; k++)
      c[k] += (double)l[i].pad * l[i].c[k], nn[k] += (double)l[i].n[k];
  }
  wf_g3 cf = g3((float)(c[0] / area), (float)(c[1] / area), (float)(c[2] / area));
  float r = 0;
  for (int i = 0; i < n; i++) {
    wf_g3 d = g3sub(cf, g3(l[i].c[0], l[i].c[1], l[i].c[2]));
    r = gmax(r, sqrtf(g3dot(d, d)) + l[i].r);
  }
  w->c[0] = cf.x, w->c[1] = cf.y, w->c[2] = cf.z;
  w->n[0] = (float)nn[0], w->n[1] = (float)nn[1], w->n[2] = (float)nn[2];
  w->r = r * 1.0001f;
  w->pad = (float)area;
}

/* Winding-number data of every lane (4 w + j), children before parents
** (wide nodes come after their parents). */
static void wind_refit(wf_geom *g) {
  for (int w = g->nwide - 1; w >= 0; w--) {
    const wf_gnode4 *n = &g->wide[w];
    for (int j = 0; j < 4; j++) {
      int c = n->child[j];
      if (c < 0) wind_leaf(g, ~c, ~c + n->count[j], &g->wind[4 * w + j]);
      if (c <= 0) continue;
      /* a wide node's used lanes come first */
      int used = 0;
      while (used < 4 && g->wide[c].child[used])
        used++;
      wind_join(&g->wind[4 * c], used, &g->wind[4 * w + j]);
    }
  }
}

/* ---- objects on a CUDA device: build on the host, upload ---- */
/* A host copy of array a (slot k of g->host), or a's own data on the host. */
static const void *host_view(wf_rt *rt, wf_geom *g, int k, const wf_array *a, int *rc) {
  *rc = 0;
  if (!a) return NULL;
  if (a->device == WF_DEVICE_CPU) return a->data;
  size_t n = (size_t)a->size * (size_t)a->elsize;
  const wf_device_ops *ops = wf_device_ops_for(rt, a->device);
  if (!ops) {
    *rc = WEFT_ERRDEVICE;
    return NULL;
  }
  if (!g->host[k] && !(g->host[k] = malloc(n ? n : 1))) {
    *rc = wf_rt_seterr(rt, WEFT_ERRMEM, "%s: out of memory", what(g->kind));
    return NULL;
  }
  g->dev[k] = a->data;
  if ((*rc = ops->copy(rt, WF_DEVICE_CPU, g->host[k], a->device, a->data, n))) return NULL;
  return g->host[k];
}

#define ALIGN64(x) (((x) + 63) & ~(size_t)63)

/* The kernels' image: descriptor, nodes, items, triangles, winding data,
** wide nodes and their bounds, with every pointer a device address. */
static int upload(wf_rt *rt, wf_geom *g) {
  if (g->device == WF_DEVICE_CPU) return 0;
  const wf_device_ops *ops = wf_device_ops_for(rt, g->device);
  if (!ops) return WEFT_ERRDEVICE;
  size_t n = (size_t)g->nprims, nn = (size_t)g->nnodes;
  size_t o_nodes = ALIGN64(sizeof g->d), o_items = o_nodes + ALIGN64(nn * sizeof(wf_gnode));
  size_t o_tris = o_items + ALIGN64(n * sizeof(int));
  size_t ntris = g->tris ? (size_t)gtri_floats(g->nprims) : 0;
  size_t o_wind = o_tris + ALIGN64(ntris * sizeof(float));
  size_t nw = (size_t)g->nwide,
         o_wide = o_wind + (g->wind ? ALIGN64(4 * nw * sizeof(wf_gwind)) : 0);
  size_t o_disc = o_wide + ALIGN64(nw * sizeof(wf_gnode4));
  size_t total = o_disc + (g->disc ? nw * sizeof(wf_gdisc4) : 0);
  int rc;
  if (!g->dbuf && (rc = ops->buffer_new(rt, g->device, total, &g->dbuf))) return rc;
  char *base = g->dbuf->ptr;
  wf_gbvh *bvh;
  union {
    wf_gmesh mesh;
    wf_gboxes boxes;
  } d;
  memcpy(&d, &g->d, sizeof d);
  if (g->kind == WF_GEOM_MESH) {
    d.mesh.points = g->dev[0];
    d.mesh.indices = g->dev[1];
    d.mesh.velocities = g->dev[2];
    d.mesh.tris = (const float *)(base + o_tris);
    d.mesh.points_grad = g->dev_grads[0];
    d.mesh.velocities_grad = g->dev_grads[1];
    d.mesh.points_tan = g->dev_tans[0];
    d.mesh.velocities_tan = g->dev_tans[1];
    bvh = &d.mesh.bvh;
  } else {
    d.boxes.lowers = g->dev[0];
    d.boxes.uppers = g->dev[1];
    bvh = &d.boxes.bvh;
  }
  bvh->nodes = g->nodes ? (const wf_gnode *)(base + o_nodes) : NULL;
  bvh->items = (const int *)(base + o_items);
  bvh->wind = g->wind ? (const wf_gwind *)(base + o_wind) : NULL;
  bvh->wide = g->wide ? (const wf_gnode4 *)(base + o_wide) : NULL;
  bvh->disc = g->disc ? (const wf_gdisc4 *)(base + o_disc) : NULL;
  if ((rc = ops->copy(rt, g->device, base, WF_DEVICE_CPU, &d, sizeof d)) ||
      (rc = ops->copy(rt, g->device, base + o_items, WF_DEVICE_CPU, g->items, n * sizeof(int))))
    return rc;
  if (g->nodes && (rc = ops->copy(rt, g->device, base + o_nodes, WF_DEVICE_CPU, g->nodes,
                                  nn * sizeof(wf_gnode))))
    return rc;
  if (g->tris &&
      (rc = ops->copy(rt, g->device, base + o_tris, WF_DEVICE_CPU, g->tris, ntris * sizeof(float))))
    return rc;
  if (g->wind && (rc = ops->copy(rt, g->device, base + o_wind, WF_DEVICE_CPU, g->wind,
                                 4 * nw * sizeof(wf_gwind))))
    return rc;
  if (g->wide && (rc = ops->copy(rt, g->device, base + o_wide, WF_DEVICE_CPU, g->wide,
                                 nw * sizeof(wf_gnode4))))
    return rc;
  if (g->disc && (rc = ops->copy(rt, g->device, base + o_disc, WF_DEVICE_CPU, g->disc,
                                 nw * sizeof(wf_gdisc4))))
    return rc;
  return 0;
}

static int finish(wf_rt *rt, wf_geom *g, int winding, wf_geom **out) {
  int n = g->nprims, kind = g->kind;
  wf_georeg *reg = wf_georeg_of(rt);
  wf_bvh_scratch mine = {{NULL}, {0}};
  g->nthreads = rt->num_threads;
  if (kind == WF_GEOM_MESH) {
    /* blocks on cache lines; zeros in the padding block and the lanes of
    ** a last partial block (gtri_floats counts whole blocks of 64 bytes;
    ** refit writes every row of slots below n, and faults the pages in
    ** on the pool's threads) */
    size_t tb = (size_t)gtri_floats(n) * sizeof(float),
           t0 = (size_t)gtri_at(n / WF_GTB * WF_GTB, 0);
    g->tris = aligned_alloc(64, tb);
    /* offsets 3 i fit 32 bits (MESH_MAX_POINTS) */
    g->sidx = malloc(sizeof(uint32_t) * 3 * (size_t)n);
    g->slow = calloc((size_t)n / WF_GTB / 64 + 1, sizeof(uint64_t));
    if (!g->tris || !g->sidx || !g->slow) goto oom;
    memset(g->tris + t0, 0, tb - t0 * sizeof(float));
    /* a last partial block: past the last slot */
    if (n % WF_GTB) g->slow[n / WF_GTB / 64] |= 1ull << (n / WF_GTB % 64);
  }
  /* meshes: the face boxes as the build fills its records, and the
  ** slots' indices as it makes the leaves, on its threads, in the records
  ** and nodes of the last build (their binary nodes live until the
  ** collapse) */
  wf_bvh_scratch *scratch = reg ? &mine : NULL;
  if (reg) wf_georeg_scratch_lend(reg, &mine);
  size_t nodes_bytes = 0;
  if (kind == WF_GEOM_BVH
          ? wf_bvh_build(n, (const float *)g->d.boxes.lowers, (const float *)g->d.boxes.uppers,
                         rt->num_threads, &g->nodes, &g->items, &g->nnodes)
          : wf_bvh_build_fn(n, face_boxes, face_slots, g, rt->num_threads, scratch, &g->nodes,
                            &g->items, &g->nnodes, &nodes_bytes))
    goto oom;
  if (kind == WF_GEOM_MESH) {
    /* the wide nodes (from the build's boxes; on two threads for large
    ** trees), what refit walks and the lanes' bounds, then a refit fills
    ** the triangles in leaf order */
    if (wf_bvh4_build(g->nodes, g->nnodes, g->nthreads, scratch, &g->wide, &g->nwide)) goto oom;
    g->disc = aligned_alloc(64, (size_t)g->nwide * sizeof(wf_gdisc4));
    g->nsum = malloc(12 * sizeof(float) * (size_t)g->nwide);
    if (!g->disc || !g->nsum) goto oom;
    tail_job tail = {g, 0};
    wf_pool *pool = n >= 65536 ? wf_launch_pool(rt) : NULL;
    int64_t items = 1 + (g->nwide + ZERO_ITEM - 1) / ZERO_ITEM;
    if (pool)
      wf_pool_run(pool, items, 1, tail_items, &tail, NULL);
    else
      tail_items(&tail, 0, items);
    if (tail.rc) goto oom;
    /* every mesh query walks the wide nodes */
    wf_bvh_scratch_give(scratch, WF_BVH_NODES, g->nodes, nodes_bytes);
    g->nodes = NULL, g->nnodes = 0;
    g->d.mesh.tris = g->tris;
    mesh_refit(rt, g);
  }
  if (winding) {
    g->wind = calloc(4 * (size_t)g->nwide, sizeof *g->wind);
    if (!g->wind) goto oom;
    wind_refit(g);
  }
  wf_gbvh *bvh = g->kind == WF_GEOM_MESH ? &g->d.mesh.bvh : &g->d.boxes.bvh;
  bvh->nodes = g->nodes;
  bvh->items = g->items;
  bvh->wind = g->wind;
  bvh->wide = g->wide;
  bvh->disc = g->disc;
  bvh->nnodes = g->nnodes;
  bvh->nwide = g->nwide;
  bvh->nitems = n;
  if (upload(rt, g)) {
    if (reg) wf_georeg_scratch_keep(reg, &mine);
    wf_geom_free(g);
    return WEFT_ERRDEVICE;
  }
  g->reg = reg;
  if (!g->reg) goto oom;
  wf_georeg_retain(g->reg);
  /* device objects: the ordinal + 1 from bit 8 on (rtlib.c tells them apart) */
  int rkind = g->kind | (g->device == WF_DEVICE_CPU ? 0 : (g->device + 1) << 8);
  if (wf_georeg_add(g->reg, wf_geom_id(g), rkind)) {
    wf_georeg_release(g->reg);
    g->reg = NULL;
    goto oom;
  }
  /* kept for the next build now that this mesh is registered */
  wf_georeg_scratch_keep(reg, &mine);
  *out = g;
  return 0;
oom:
  if (reg) wf_georeg_scratch_keep(reg, &mine);
  wf_geom_free(g);
  return wf_rt_seterr(rt, WEFT_ERRMEM, "%s: out of memory", what(kind));
}

int wf_geom_mesh_new(wf_rt *rt, const wf_array *points, const wf_array *indices,
                     const wf_array *velocities, int winding, wf_geom **out) {
  *out = NULL;
  int K = WF_GEOM_MESH, rc;
  if ((rc = check_array(rt, K, points, "points", 12)) ||
      (rc = check_array(rt, K, indices, "indices", 4)))
    return rc;
  if (velocities && (rc = check_array(rt, K, velocities, "velocities", 12))) return rc;
  long long np = points->size, ni = indices->size;
  if (np == 0) return bad(rt, K, "points is empty: a mesh needs at least 3 points", NULL, 0, 0);
  if (ni == 0)
    return bad(rt, K, "indices is empty: a mesh needs at least one triangle", NULL, 0, 0);
  if (ni % 3) return bad(rt, K, "indices has %s%lld entries, not a multiple of 3", "", ni, 0);
  /* sizes the descriptor's ints and refit's 32-bit vertex offsets (3 i,
  ** g->sidx) hold; checked before anything reads the arrays */
  if (np > MESH_MAX_POINTS)
    return bad(rt, K, "points has %s%lld entries, more than a mesh takes (%lld)", "", np,
               MESH_MAX_POINTS);
  if (ni / 3 > MESH_MAX_FACES)
    return bad(rt, K, "indices has %s%lld triangles, more than a mesh takes (%lld)", "", ni / 3,
               MESH_MAX_FACES);
  if (velocities && velocities->size != np)
    return bad(rt, K, "velocities has %s%lld entries but points has %lld", "", velocities->size,
               np);
  wf_geom *g = calloc(1, sizeof *g);
  if (!g) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft.Mesh: out of memory");
  g->kind = K;
  g->device = points->device;
  const wf_g3 *hp = host_view(rt, g, 0, points, &rc);
  const int *idx = rc ? NULL : host_view(rt, g, 1, indices, &rc);
  const wf_g3 *hv = rc ? NULL : host_view(rt, g, 2, velocities, &rc);
  if (rc) {
    wf_geom_free(g);
    return rc;
  }
  for (long long i0 = 0; i0 < ni; i0 += 1024) {
    /* a block at a time without a branch (the compiler's vectors: the
    ** loop that left at the first bad index took 10 instructions an
    ** index, 0.6 M indices serially before each build of the bench
    ** torus), then the first bad one in it */
    long long i1 = ni - i0 < 1024 ? ni : i0 + 1024;
    unsigned out = 0;
    for (long long i = i0; i < i1; i++)
      out |= (uint32_t)idx[i] >= (uint32_t)np;
    for (long long i = i0; out && i < i1; i++)
      if (idx[i] < 0 || idx[i] >= np)
        return wf_geom_free(g), bad(rt, K, "indices[%s%lld] = %lld is out of range for the points",
                                    "", i, (long long)idx[i]);
  }
  if ((rc = check_finite(rt, K, hp, np, "points"))) return wf_geom_free(g), rc;
  g->nprims = (int)(ni / 3);
  wf_gmesh *m = &g->d.mesh;
  m->kind = K;
  m->npoints = (int)np;
  m->nfaces = (int)(ni / 3);
  m->points = hp;
  m->velocities = hv;
  m->indices = idx;
  return finish(rt, g, winding, out);
}

int wf_geom_bvh_new(wf_rt *rt, const wf_array *lowers, const wf_array *uppers, wf_geom **out) {
  *out = NULL;
  int K = WF_GEOM_BVH, rc;
  if ((rc = check_array(rt, K, lowers, "lowers", 12)) ||
      (rc = check_array(rt, K, uppers, "uppers", 12)))
    return rc;
  if (lowers->size != uppers->size)
    return bad(rt, K, "lowers has %s%lld boxes but uppers has %lld", "", lowers->size,
               uppers->size);
  if (lowers->size == 0) return bad(rt, K, "no boxes: lowers and uppers are empty", NULL, 0, 0);
  wf_geom *g = calloc(1, sizeof *g);
  if (!g) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft.Bvh: out of memory");
  g->kind = K;
  g->device = lowers->device;
  const wf_g3 *hl = host_view(rt, g, 0, lowers, &rc);
  const wf_g3 *hh = rc ? NULL : host_view(rt, g, 1, uppers, &rc);
  if (rc || (rc = check_finite(rt, K, hl, lowers->size, "lowers")) ||
      (rc = check_finite(rt, K, hh, uppers->size, "uppers"))) {
    wf_geom_free(g);
    return rc;
  }
  g->nprims = (int)lowers->size;
  wf_gboxes *b = &g->d.boxes;
  b->kind = K;
  b->n = g->nprims;
  b->lowers = hl;
  b->uppers = hh;
  return finish(rt, g, 0, out);
}

/* Device objects: fresh host copies of the moving arrays. */
static int download(wf_rt *rt, wf_geom *g) {
  if (g->device == WF_DEVICE_CPU) return 0;
  const wf_device_ops *ops = wf_device_ops_for(rt, g->device);
  if (!ops) return WEFT_ERRDEVICE;
  size_t n = g->kind == WF_GEOM_MESH ? (size_t)g->d.mesh.npoints : (size_t)g->nprims;
  int rc = ops->copy(rt, WF_DEVICE_CPU, g->host[0], g->device, g->dev[0], n * 12);
  if (!rc && g->kind == WF_GEOM_BVH)
    rc = ops->copy(rt, WF_DEVICE_CPU, g->host[1], g->device, g->dev[1], n * 12);
  return rc;
}

int wf_geom_refit(wf_rt *rt, wf_geom *g) {
  int rc;
  /* the pool's workers wake while the points are checked (mesh_refit) */
  wf_pool *pool = g->kind == WF_GEOM_MESH && g->nprims >= REFIT_POOL ? wf_launch_pool(rt) : NULL;
  wf_pool_wake(pool);
  if ((rc = download(rt, g))) return rc;
  if (g->kind == WF_GEOM_MESH) {
    const wf_gmesh *m = &g->d.mesh;
    finite_job j = {&m->points->x, 3 * (long long)m->npoints, 0};
    if (pool) wf_pool_run(pool, (j.n + FINITE_CHUNK - 1) / FINITE_CHUNK, 1, finite_chunk, &j, NULL);
    if ((!pool || j.bad) && (rc = check_finite(rt, g->kind, m->points, m->npoints, "points")))
      return rc;
  } else if ((rc = check_finite(rt, g->kind, g->d.boxes.lowers, g->nprims, "lowers")) ||
             (rc = check_finite(rt, g->kind, g->d.boxes.uppers, g->nprims, "uppers"))) {
    return rc;
  }
  if (g->kind == WF_GEOM_MESH) {
    mesh_refit(rt, g);
  } else {
    wf_bvh_refit(g->nodes, g->nnodes, g->items, (const float *)g->d.boxes.lowers,
                 (const float *)g->d.boxes.uppers);
  }
  if (g->wind) wind_refit(g);
  return upload(rt, g);
}

/* The derivative buffers a mesh's element readers use: which 0 the
** adjoints (points_grad, velocities_grad), 1 the tangents. They hold
** npoints vec3 on the mesh's device, or a kernel would read or write past
** them. A device object patches just those four pointers in its uploaded
** descriptor (stream-ordered like every copy), not the whole tree. */
_Static_assert(
    offsetof(wf_gmesh, velocities_grad) == offsetof(wf_gmesh, points_grad) + sizeof(void *) &&
        offsetof(wf_gmesh, points_tan) == offsetof(wf_gmesh, points_grad) + 2 * sizeof(void *) &&
        offsetof(wf_gmesh, velocities_tan) == offsetof(wf_gmesh, points_grad) + 3 * sizeof(void *),
    "set_derivs copies the four derivative pointers as one block");
static int set_derivs(wf_rt *rt, wf_geom *g, int which, const wf_array *pa, const wf_array *va) {
  static const char *const names[2] = {"gradients", "tangents"};
  if (g->kind != WF_GEOM_MESH)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft.Bvh has no %s", names[which]);
  const wf_array *arr[2] = {pa, va};
  void *ptr[2];
  for (int k = 0; k < 2; k++) {
    const wf_array *a = arr[k];
    ptr[k] = a ? a->data : NULL;
    if (!a) continue;
    if (a->device != g->device ||
        (size_t)a->size * (size_t)a->elsize < 12 * (size_t)g->d.mesh.npoints)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft.Mesh: the %s of its %s must be %d vec3 on its device", names[which],
                          k ? "velocities" : "points", g->d.mesh.npoints);
  }
  wf_gmesh *m = &g->d.mesh;
  if (g->device == WF_DEVICE_CPU) {
    if (which) {
      m->points_tan = ptr[0];
      m->velocities_tan = ptr[1];
    } else {
      m->points_grad = ptr[0];
      m->velocities_grad = ptr[1];
    }
    return 0;
  }
  void **dst = which ? g->dev_tans : g->dev_grads;
  dst[0] = ptr[0];
  dst[1] = ptr[1];
  if (!g->dbuf) return upload(rt, g);
  const wf_device_ops *ops = wf_device_ops_for(rt, g->device);
  if (!ops) return WEFT_ERRDEVICE;
  void *block[4] = {g->dev_grads[0], g->dev_grads[1], g->dev_tans[0], g->dev_tans[1]};
  return ops->copy(rt, g->device, (char *)g->dbuf->ptr + offsetof(wf_gmesh, points_grad),
                   WF_DEVICE_CPU, block, sizeof block);
}

int wf_geom_set_grads(wf_rt *rt, wf_geom *g, const wf_array *pg, const wf_array *vg) {
  return set_derivs(rt, g, 0, pg, vg);
}

int wf_geom_set_tangents(wf_rt *rt, wf_geom *g, const wf_array *pt, const wf_array *vt) {
  return set_derivs(rt, g, 1, pt, vt);
}

size_t wf_geom_bytes(const wf_geom *g) {
  if (!g) return 0;
  size_t n = (size_t)g->nprims, w = (size_t)g->nwide, b = sizeof *g;
  b += (size_t)g->nnodes * sizeof(wf_gnode) + n * sizeof(int);           /* nodes, items */
  b += w * (sizeof(wf_gnode4) + sizeof(wf_gdisc4) + 12 * sizeof(float)); /* wide, disc, nsum */
  b += g->wind ? 4 * w * sizeof(wf_gwind) : 0;
  b +=
      (g->lk0 ? 2 * (size_t)g->nleaves + 1 : 0) * sizeof(int) + (g->sidx ? 3 * n * sizeof(int) : 0);
  b += g->ioff ? (2 * (size_t)g->ioff[g->nitems + 1] + 2 * (size_t)g->nitems + 3) * sizeof(int) : 0;
  b += g->slow ? (n / WF_GTB / 64 + 1) * sizeof(uint64_t) : 0;
  b += g->tris ? (size_t)gtri_floats(g->nprims) * sizeof(float) : 0;
  b += g->lo ? 6 * n * sizeof(float) : 0;
  /* host copies of a device object's points and indices (or boxes) */
  size_t np = g->kind == WF_GEOM_MESH ? (size_t)g->d.mesh.npoints : n;
  return b + (g->host[0] ? 12 * np : 0) + (g->host[1] ? 12 * n : 0);
}

uint64_t wf_geom_id(const wf_geom *g) {
  if (g && g->dbuf) return (uint64_t)(uintptr_t)g->dbuf->ptr;
  return g ? (uint64_t)(uintptr_t)&g->d : 0;
}

void wf_geom_free(wf_geom *g) {
  if (!g) return;
  if (g->reg) {
    wf_georeg_remove(g->reg, wf_geom_id(g));
    wf_georeg_release(g->reg);
  }
  free(g->nodes);
  free(g->items);
  free(g->wind);
  free(g->wide);
  free(g->disc);
  free(g->nsum);
  free(g->leaves);
  free(g->lk0);
  free(g->inner);
  free(g->ioff);
  free(g->istart);
  free(g->lo);
  free(g->hi);
  free(g->tris);
  free(g->sidx);
  free(g->slow);
  for (int k = 0; k < 3; k++)
    free(g->host[k]);
  if (g->dbuf) wf_buffer_release(g->dbuf);
  free(g);
}
