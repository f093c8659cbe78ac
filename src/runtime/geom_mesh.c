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
#include <pthread.h>
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
  int nleaves;
  int nnodes, nwide;
  int nthreads;   /* the runtime's, for refit */
  float *lo, *hi; /* 3 per primitive (meshes: while building) */
  float *tris;    /* meshes: triangles and bounds in leaf order (query.h) */
  int *sidx;      /* meshes: each slot's 3 vertex indices, in leaf order */
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

static int check_finite(wf_rt *rt, int kind, const wf_g3 *p, long long n, const char *name) {
  for (long long i = 0; i < n; i++)
    if (!isfinite(p[i].x) || !isfinite(p[i].y) || !isfinite(p[i].z))
      return bad(rt, kind, "%s[%lld] is not finite (NaN or infinity)", name, i, 0);
  return 0;
}

/* Meshes: the boxes of faces [begin, end) (for the build, on its threads). */
static void face_boxes(void *ctx, int begin, int end, float *lo, float *hi) {
  const wf_gmesh *m = ctx;
  for (int f = begin; f < end; f++, lo += 3, hi += 3) {
    wf_g3 a, b, c;
    gtri(m, f, &a, &b, &c);
    lo[0] = gmin(a.x, gmin(b.x, c.x)), hi[0] = gmax(a.x, gmax(b.x, c.x));
    lo[1] = gmin(a.y, gmin(b.y, c.y)), hi[1] = gmax(a.y, gmax(b.y, c.y));
    lo[2] = gmin(a.z, gmin(b.z, c.z)), hi[2] = gmax(a.z, gmax(b.z, c.z));
  }
}

/* Meshes: refit in two passes. The leaves first, in slot order (the
** leaf lanes 4 w + j in g->leaves): each computes the blocks of
** triangles (query.h: gtri_at) that start at one of its slots, each
** whole, its triangles side by side in vector lanes as the block stores
** them, and takes its lane's box from their vertices; the slots of a
** block started by the leaf before it (at most WF_GTB - 1) it reads from
** the points again. So every block is written once, by one thread, in
** whole rows, the slots' vertex indices are read in order and the points
** they name are prefetched a few blocks ahead (read in leaf order, they
** missed the cache and the refit waited on them). Ranges of leaves run
** on the runtime's thread pool, each leaf lane also taking its surface
** bound (wf_gdisc4). Then the inner lanes, each the union of its child's
** lanes, box and bound: bvh4.c numbers the wide nodes depth first,
** children after their parents, so a walk backwards takes children
** first. */
#define REFIT_LEAVES 512 /* leaves per pool chunk */
#define REFIT_AHEAD 64   /* slots of points prefetched ahead */

/* Lanes' sums and maxima. */
static float glsum(wf_gl v) {
  float x = 0.0f;
  for (int l = 0; l < WF_GL; l++)
    x += gllane(v, l);
  return x;
}
static float glhmax(wf_gl v) {
  float x = gllane(v, 0);
  for (int l = 1; l < WF_GL; l++)
    x = gmax(x, gllane(v, l));
  return x;
}

/* the refit's vector code in one function, its accumulators in registers */
#if defined(__GNUC__)
#define WF_REFIT_INLINE inline __attribute__((always_inline))
#else
#define WF_REFIT_INLINE inline
#endif

/* What a leaf's slots add up to, in vector lanes: the box [lo, hi], the
** summed normals ab x ac (s), and the largest height t of a vertex over
** the plane through o across n (the leaf's first triangle's centroid and
** unit normal).
** Lanes outside the leaf take the vertex f of the leaf (each corner) in
** place of theirs: that changes no box or maximum and adds a normal of 0,
** so the sums need no masks. */
typedef struct leaf_acc {
  wf_gl lo[3], hi[3], s[3], t;
  wf_gl o[3], n[3], f[3];
} leaf_acc;

/* The vertices v (rows as gtri_rows gives them) of the lanes in into A. */
static WF_REFIT_INLINE void acc_add(leaf_acc *A, const wf_gl *v, wf_glm in) {
  wf_gl w[9];
  for (int r = 0; r < 9; r++) {
    w[r] = glsel(in, v[r], A->f[r % 3]);
    A->lo[r % 3] = glmin(A->lo[r % 3], w[r]), A->hi[r % 3] = glmax(A->hi[r % 3], w[r]);
  }
  for (int i = 0; i < 3; i++) {
    wf_gl h = A->n[0] * (w[3 * i] - A->o[0]) + A->n[1] * (w[3 * i + 1] - A->o[1]) +
              A->n[2] * (w[3 * i + 2] - A->o[2]);
    A->t = glmax(A->t, glmax(h, -h));
  }
  wf_gl ab[3], ac[3];
  for (int a = 0; a < 3; a++)
    ab[a] = w[3 + a] - w[a], ac[a] = w[6 + a] - w[a];
  A->s[0] += ab[1] * ac[2] - ab[2] * ac[1];
  A->s[1] += ab[2] * ac[0] - ab[0] * ac[2];
  A->s[2] += ab[0] * ac[1] - ab[1] * ac[0];
}

/* The block of triangles from slot k0 (a multiple of WF_GTB): the
** vertices of its slots (zeros past the last, as the padding is), WF_GL
** slots at a time; the slots below k1 go into A. */
static WF_REFIT_INLINE void tri_block(const wf_geom *g, int k0, int k1, leaf_acc *A) {
  const wf_gmesh *m = &g->d.mesh;
  float *t = g->tris + gtri_at(k0, 0);
#if defined(__GNUC__)
  for (int64_t k = (int64_t)k0 + REFIT_AHEAD; k < k0 + REFIT_AHEAD + WF_GTB && k < g->nprims; k++)
    for (int i = 0; i < 3; i++)
      __builtin_prefetch(&m->points[g->sidx[3 * k + i]]);
#endif
  for (int j = 0; j < WF_GTB; j += WF_GL) {
    wf_gl v[9]; /* a.x a.y a.z b.x ... c.z */
#if defined(__SSE__) && WF_GL == 4
    /* each vertex as one vector (x, y, z, 0), four slots' transposed */
    for (int i = 0; i < 3; i++) {
      __m128 q[4];
      for (int l = 0; l < 4; l++) {
        int64_t k = (int64_t)k0 + j + l;
        int pi = k < g->nprims ? g->sidx[3 * k + i] : -1;
        const float *x = &m->points[pi < 0 ? 0 : pi].x;
        /* 16 bytes from the vertex (the next one's x in lane 3, unused),
        ** but not past the last */
        q[l] = pi < 0                ? _mm_setzero_ps()
               : pi + 1 < m->npoints ? _mm_loadu_ps(x)
                                     : _mm_set_ps(0.0f, x[2], x[1], x[0]);
      }
      __m128 t0 = _mm_unpacklo_ps(q[0], q[1]), t1 = _mm_unpacklo_ps(q[2], q[3]);
      __m128 t2 = _mm_unpackhi_ps(q[0], q[1]), t3 = _mm_unpackhi_ps(q[2], q[3]);
      v[3 * i] = (wf_gl)_mm_movelh_ps(t0, t1);
      v[3 * i + 1] = (wf_gl)_mm_movehl_ps(t1, t0);
      v[3 * i + 2] = (wf_gl)_mm_movelh_ps(t2, t3);
    }
#else
    for (int l = 0; l < WF_GL; l++) {
      int64_t k = (int64_t)k0 + j + l;
      for (int i = 0; i < 3; i++) {
        wf_g3 p = k < g->nprims ? m->points[g->sidx[3 * k + i]] : g3(0.0f, 0.0f, 0.0f);
        glset(&v[3 * i], l, p.x), glset(&v[3 * i + 1], l, p.y), glset(&v[3 * i + 2], l, p.z);
      }
    }
#endif
    for (int r = 0; r < 9; r++)
      glstore(t + r * WF_GTB + j, v[r]);
    acc_add(A, v, glidx() + glmk(k0 + j) < glmk(k1));
  }
}

/* A lane's box [lo, hi] as its centre o, half extents h and half diagonal. */
static float box_ball(const float *lo, const float *hi, float *o, float *h) {
  for (int a = 0; a < 3; a++)
    o[a] = 0.5f * (lo[a] + hi[a]), h[a] = 0.5f * (hi[a] - lo[a]);
  return sqrtf(h[0] * h[0] + h[1] * h[1] + h[2] * h[2]);
}

/* n = s / |s|, or the z axis when s is 0 (the slab is then as thick as
** the lane's points make it: any unit n bounds them). */
static void disc_normal(const float *s, float *n) {
  float l2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2];
  if (l2 > 1e-30f && l2 < 3e38f) {
    float inv = 1.0f / sqrtf(l2);
    n[0] = s[0] * inv, n[1] = s[1] * inv, n[2] = s[2] * inv;
  } else {
    n[0] = 0.0f, n[1] = 0.0f, n[2] = 1.0f;
  }
}

/* Lane j's bound: n and t, at most r (any unit n bounds the ball), rounded
** up by a few ulps of the coordinates around o and of r. */
static void disc_store(wf_gdisc4 *D, int j, const float *n, const float *o, float r, float t) {
  float m = gmax(fabsf(o[0]), gmax(fabsf(o[1]), fabsf(o[2])));
  for (int a = 0; a < 3; a++)
    D->n[a][j] = n[a];
  D->t[j] = gmin(t, r) + (m + r) * (1.0f / 262144.0f);
}

/* The leaf of slots [k0, k1): the blocks that start in it, its box
** [lo, hi], its summed normals s and its bound, lane j of D, in one pass:
** o and n are its first triangle's centroid and unit normal (near those
** of the leaf's few faces, and known before the others are read). The
** slots of a block that an earlier leaf started are read from the block
** when that leaf came before in this thread's run (its slots from ready
** on), else (another thread's to write) from the points, one at a time. */
static void leaf_refit(const wf_geom *g, int k0, int k1, int ready, float *lo, float *hi,
                       wf_gdisc4 *D, int j, float *s) {
  const wf_gmesh *m = &g->d.mesh;
  int kb = k0 + (WF_GTB - k0 % WF_GTB) % WF_GTB; /* the first block's start */
  const int *f = g->sidx + 3 * (int64_t)k0;
  wf_g3 a = m->points[f[0]], b = m->points[f[1]], c = m->points[f[2]];
  wf_g3 x = g3cross(g3sub(b, a), g3sub(c, a));
  float o[3] = {(a.x + b.x + c.x) * (1.0f / 3.0f), (a.y + b.y + c.y) * (1.0f / 3.0f),
                (a.z + b.z + c.z) * (1.0f / 3.0f)},
        n[3], xs[3] = {x.x, x.y, x.z};
  disc_normal(xs, n);
  leaf_acc A;
  const float fa[3] = {a.x, a.y, a.z};
  for (int q = 0; q < 3; q++) {
    A.lo[q] = glk(lo[q]), A.hi[q] = glk(hi[q]), A.s[q] = glk(0.0f);
    A.o[q] = glk(o[q]), A.n[q] = glk(n[q]), A.f[q] = glk(fa[q]);
  }
  A.t = glk(0.0f);
  if (k0 < kb && kb - WF_GTB >= ready) {
    /* the block this leaf starts in is written: its lanes from k0 */
    const float *row = g->tris + gtri_at(kb - WF_GTB, 0);
    wf_gl v[9];
    for (int r = 0; r < 9; r++)
      v[r] = glload(row + r * WF_GTB);
    wf_glm lane = glidx() + glmk(kb - WF_GTB);
    acc_add(&A, v, (lane >= glmk(k0)) & (lane < glmk(k1)));
  } else {
    for (int k = k0; k < kb && k < k1; k++) {
      wf_gl v[9];
      for (int i = 0; i < 3; i++) {
        wf_g3 p = m->points[g->sidx[3 * (int64_t)k + i]];
        v[3 * i] = glk(p.x), v[3 * i + 1] = glk(p.y), v[3 * i + 2] = glk(p.z);
      }
      acc_add(&A, v, glidx() < glmk(1));
    }
  }
  for (int k = kb; k < k1; k += WF_GTB)
    tri_block(g, k, k1, &A);
  for (int q = 0; q < 3; q++)
    lo[q] = -glhmax(-A.lo[q]), hi[q] = glhmax(A.hi[q]), s[q] = glsum(A.s[q]);
  /* the slab moves from the first centroid to the box's centre */
  float ob[3], h[3], r = box_ball(lo, hi, ob, h);
  float shift = fabsf(n[0] * (o[0] - ob[0]) + n[1] * (o[1] - ob[1]) + n[2] * (o[2] - ob[2]));
  disc_store(D, j, n, ob, r, glhmax(A.t) + shift);
}

/* The bound of inner lane j of D (box [lo, hi]) from the used lanes of
** its child node C (D' their bounds, cs their normal sums, 3 per lane):
** n from the summed normals, t the farthest reach along n of the
** children's cylinders (or of the box): a child lane's points
** x = o' + a n' + b, |a| <= t', |b| <= r', lie within
** |n.(o' - o)| + t' |n.n'| + r' |n x n'| of the plane through o (the sine
** from the cross product: 1 - cos^2 cancels for near-parallel normals).
** The children's lanes go side by side in vector lanes. */
static void inner_disc(const wf_gnode4 *C, const wf_gdisc4 *Dc, const float *cs, int used,
                       const float *lo, const float *hi, wf_gdisc4 *D, int j, float *s) {
  float o[3], h[3], n[3], r = box_ball(lo, hi, o, h);
  for (int a = 0; a < 3; a++) {
    s[a] = 0.0f;
    for (int l = 0; l < used; l++)
      s[a] += cs[3 * l + a];
  }
  disc_normal(s, n);
  const wf_gl zero = glk(0.0f), half = glk(0.5f), nx = glk(n[0]), ny = glk(n[1]), nz = glk(n[2]);
  wf_gl vt = zero;
  for (int l = 0; l < 4; l += WF_GL) {
    wf_glm in = glidx() + glmk(l) < glmk(used);
    wf_gl d[3], e[3];
    for (int a = 0; a < 3; a++) {
      wf_gl cl = glload(&C->lo[a][l]), ch = glload(&C->hi[a][l]);
      d[a] = (cl + ch) * half - glk(o[a]), e[a] = (ch - cl) * half;
    }
    wf_gl cx = glload(&Dc->n[0][l]), cy = glload(&Dc->n[1][l]), cz = glload(&Dc->n[2][l]);
    wf_gl rl = glsqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]), tl = glload(&Dc->t[l]);
    wf_gl xx = ny * cz - nz * cy, xy = nz * cx - nx * cz, xz = nx * cy - ny * cx;
    wf_gl cosv = nx * cx + ny * cy + nz * cz, hd = nx * d[0] + ny * d[1] + nz * d[2];
    wf_gl reach = tl * glmax(cosv, -cosv) + rl * glsqrt(xx * xx + xy * xy + xz * xz);
    vt = glmax(vt, glsel(in, glmax(hd, -hd) + glmin(rl, reach), zero));
  }
  float t = gmin(glhmax(vt), fabsf(n[0]) * h[0] + fabsf(n[1]) * h[1] + fabsf(n[2]) * h[2]);
  disc_store(D, j, n, o, r, t);
}

/* wf_pool_fn: the leaves [begin, end) of g->leaves. */
static void refit_leaves(void *p, int64_t begin, int64_t end) {
  wf_geom *g = p;
  if (begin >= end) return;
  const wf_gnode4 *first = &g->wide[g->leaves[begin] >> 2];
  const int ready = ~first->child[g->leaves[begin] & 3];
  for (int64_t i = begin; i < end; i++) {
    wf_gnode4 *n = &g->wide[g->leaves[i] >> 2];
    int j = g->leaves[i] & 3;
    float lo[3] = {3.4e38f, 3.4e38f, 3.4e38f}, hi[3] = {-3.4e38f, -3.4e38f, -3.4e38f};
    leaf_refit(g, ~n->child[j], ~n->child[j] + n->count[j], ready, lo, hi,
               &g->disc[g->leaves[i] >> 2], j, g->nsum + 3 * (size_t)g->leaves[i]);
    for (int a = 0; a < 3; a++)
      n->lo[a][j] = lo[a], n->hi[a][j] = hi[a];
  }
}

/* The inner lanes of wide node w: each the union of its child's lanes,
** box and bound. */
static void refit_inner(wf_geom *g, int w) {
  wf_gnode4 *W = g->wide;
  for (int j = 0; j < 4; j++) {
    int c = W[w].child[j], used = 0;
    if (c <= 0) continue; /* a leaf, or empty */
    while (used < 4 && W[c].child[used])
      used++;
    float lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
      wf_glm in = glidx() < glmk(used);
      wf_gl l = glsel(in, glload(W[c].lo[a]), glk(3.4e38f));
      wf_gl h = glsel(in, glload(W[c].hi[a]), glk(-3.4e38f));
      lo[a] = -glhmax(-l), hi[a] = glhmax(h);
      W[w].lo[a][j] = lo[a], W[w].hi[a][j] = hi[a];
    }
    inner_disc(&W[c], &g->disc[c], g->nsum + 12 * (size_t)c, used, lo, hi, &g->disc[w], j,
               g->nsum + 3 * (4 * (size_t)w + j));
  }
}

/* Subtrees of wide nodes (each a range of numbers, bvh4.c) refit on the
** pool once the leaves are: ranges[i] = {first, end}. */
#define REFIT_RANGES 16
typedef struct inner_job {
  wf_geom *g;
  int ranges[REFIT_RANGES][2];
} inner_job;

static void refit_ranges(void *p, int64_t begin, int64_t end) {
  inner_job *J = p;
  for (int64_t i = begin; i < end; i++)
    for (int w = J->ranges[i][1] - 1; w >= J->ranges[i][0]; w--)
      refit_inner(J->g, w);
}

/* Split the tree into at most REFIT_RANGES subtrees below a few top
** nodes (top[], in the order they split): the largest range gives way
** to its children's, which in bvh4.c's depth-first numbering are
** [c1, c2), [c2, c3), ... [ck, end) for the node's inner children
** c1 < ... < ck in lane order. Returns the number of ranges, or 0 if the
** numbering is not so (then the walk is serial). */
static int split_ranges(const wf_geom *g, inner_job *J, int *top, int *ntop) {
  int n = 1;
  J->ranges[0][0] = 0, J->ranges[0][1] = g->nwide, *ntop = 0;
  while (n < REFIT_RANGES - 3) {
    int b = 0;
    for (int i = 1; i < n; i++)
      if (J->ranges[i][1] - J->ranges[i][0] > J->ranges[b][1] - J->ranges[b][0]) b = i;
    int w = J->ranges[b][0], e = J->ranges[b][1], kids[4], k = 0;
    for (int j = 0; j < 4; j++)
      if (g->wide[w].child[j] > 0) kids[k++] = g->wide[w].child[j];
    if (!k) break; /* the largest range is one node of leaves */
    if (kids[0] != w + 1) return 0;
    for (int q = 1; q < k; q++)
      if (kids[q] <= kids[q - 1] || kids[q] >= e) return 0;
    top[(*ntop)++] = w;
    J->ranges[b][0] = J->ranges[--n][0], J->ranges[b][1] = J->ranges[n][1];
    for (int q = 0; q < k; q++)
      J->ranges[n][0] = kids[q], J->ranges[n][1] = q + 1 < k ? kids[q + 1] : e, n++;
  }
  return n;
}

static void mesh_refit(wf_rt *rt, wf_geom *g) {
  wf_pool *pool = g->nprims >= 65536 ? wf_launch_pool(rt) : NULL;
  if (pool)
    wf_pool_run(pool, g->nleaves, REFIT_LEAVES, refit_leaves, g, NULL);
  else
    refit_leaves(g, 0, g->nleaves);
  inner_job J;
  int top[REFIT_RANGES], ntop, n = pool ? split_ranges(g, &J, top, &ntop) : 0;
  if (!n) {
    for (int w = g->nwide - 1; w >= 0; w--)
      refit_inner(g, w);
    return;
  }
  J.g = g;
  wf_pool_run(pool, n, 1, refit_ranges, &J, NULL);
  /* a top node's children split after it: backwards takes them first */
  for (int i = ntop - 1; i >= 0; i--)
    refit_inner(g, top[i]);
}

/* The leaf lanes 4 w + j in slot order (g->leaves; slots start leaves at
** most once). 0 or -1 when out of memory. */
static int list_leaves(wf_geom *g) {
  int n = g->nprims, *at = malloc(sizeof(int) * (size_t)n);
  if (!at) return -1;
  for (int k = 0; k < n; k++)
    at[k] = -1;
  g->nleaves = 0;
  for (int w = 0; w < g->nwide; w++)
    for (int j = 0; j < 4; j++)
      if (g->wide[w].child[j] < 0) at[~g->wide[w].child[j]] = 4 * w + j, g->nleaves++;
  g->leaves = malloc(sizeof(int) * (size_t)(g->nleaves ? g->nleaves : 1));
  for (int k = 0, i = 0; g->leaves && k < n; k++)
    if (at[k] >= 0) g->leaves[i++] = at[k];
  free(at);
  return g->leaves ? 0 : -1;
}

/* Collapse the binary tree into wide nodes (bvh4.c). */
typedef struct collapse_job {
  wf_geom *g;
  int rc;
} collapse_job;

static void *collapse(void *p) {
  collapse_job *j = p;
  wf_geom *g = j->g;
  j->rc = wf_bvh4_build(g->nodes, g->nnodes, g->nthreads, &g->wide, &g->nwide);
  return NULL;
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
  wf_bvh_scratch mine = {{NULL, NULL}, {0, 0}};
  g->nthreads = rt->num_threads;
  if (kind == WF_GEOM_MESH) {
    /* blocks on cache lines; zeros in the padding block and the lanes of
    ** a last partial block (gtri_floats counts whole blocks of 64 bytes;
    ** refit writes every row of slots below n, and faults the pages in
    ** on the pool's threads) */
    size_t tb = (size_t)gtri_floats(n) * sizeof(float),
           t0 = (size_t)gtri_at(n / WF_GTB * WF_GTB, 0);
    g->tris = aligned_alloc(64, tb);
    if (!g->tris) goto oom;
    memset(g->tris + t0, 0, tb - t0 * sizeof(float));
  }
  /* meshes: the face boxes as the build fills its records, on its
  ** threads, in the records and nodes of the last build (their binary
  ** nodes live until the collapse) */
  wf_bvh_scratch *scratch = reg ? &mine : NULL;
  if (reg) wf_georeg_scratch_lend(reg, &mine);
  size_t nodes_bytes = 0;
  if (kind == WF_GEOM_BVH
          ? wf_bvh_build(n, (const float *)g->d.boxes.lowers, (const float *)g->d.boxes.uppers,
                         rt->num_threads, &g->nodes, &g->items, &g->nnodes)
          : wf_bvh_build_fn(n, face_boxes, &g->d.mesh, rt->num_threads, scratch, &g->nodes,
                            &g->items, &g->nnodes, &nodes_bytes))
    goto oom;
  if (kind == WF_GEOM_MESH) {
    /* the wide nodes (from the build's boxes) on a second thread while
    ** the faces' indices are copied in slot order (refits read them in
    ** order); then a refit fills the triangles in leaf order */
    collapse_job job = {g, 0};
    pthread_t th;
    int threaded = g->nthreads > 1 && n >= 65536 && !pthread_create(&th, NULL, collapse, &job);
    if (!threaded) collapse(&job);
    g->sidx = malloc(sizeof(int) * 3 * (size_t)n);
    for (int k = 0; g->sidx && k < n; k++)
      memcpy(g->sidx + 3 * (size_t)k, g->d.mesh.indices + 3 * (size_t)g->items[k], 3 * sizeof(int));
    if (threaded) pthread_join(th, NULL);
    if (!g->sidx || job.rc || list_leaves(g)) goto oom;
    size_t db = (size_t)g->nwide * sizeof(wf_gdisc4);
    g->disc = aligned_alloc(64, db);
    g->nsum = malloc(12 * sizeof(float) * (size_t)g->nwide);
    if (!g->disc || !g->nsum) goto oom;
    memset(g->disc, 0, db); /* empty lanes: zeros */
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
  for (long long i = 0; i < ni; i++)
    if (idx[i] < 0 || idx[i] >= np)
      return wf_geom_free(g), bad(rt, K, "indices[%s%lld] = %lld is out of range for the points",
                                  "", i, (long long)idx[i]);
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
  if ((rc = download(rt, g))) return rc;
  if (g->kind == WF_GEOM_MESH) {
    if ((rc = check_finite(rt, g->kind, g->d.mesh.points, g->d.mesh.npoints, "points"))) return rc;
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
  b += (size_t)g->nleaves * sizeof(int) + (g->sidx ? 3 * n * sizeof(int) : 0);
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
  free(g->lo);
  free(g->hi);
  free(g->tris);
  free(g->sidx);
  for (int k = 0; k < 3; k++)
    free(g->host[k]);
  if (g->dbuf) wf_buffer_release(g->dbuf);
  free(g);
}
