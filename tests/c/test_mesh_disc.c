/* The surface bounds of a mesh's wide lanes (query.h: wf_gdisc4) never
** exceed the distance to the lane's triangles: for every lane of every
** wide node, points near its box and far from it, the bound that
** gdisc4_dist2 gives is checked against the nearest of the lane's
** triangles in double, on a torus far from the origin (where the
** rounding of o and of the vertices is largest against the lane's size),
** a soup of random and degenerate triangles, and the same after refits
** that move every point (and one that a NaN fails). The point queries'
** culling rests on this. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "geom/query.h"
#include "keep_mesh.h"
#include "weft.h"
#include "wtest.h"

static uint64_t rng = 88172645463325252ull;
static double urand(double lo, double hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* squared distance from p to triangle abc, in double (the minimum over
** the face when p's foot lands in it, and the three edges) */
static double seg2(const double *a, const double *b, const double *p) {
  double ab[3], ap[3], l2 = 0, s = 0, d2 = 0;
  for (int i = 0; i < 3; i++)
    ab[i] = b[i] - a[i], ap[i] = p[i] - a[i], l2 += ab[i] * ab[i], s += ab[i] * ap[i];
  s = l2 > 0 ? fmin(1, fmax(0, s / l2)) : 0;
  for (int i = 0; i < 3; i++)
    d2 += (ap[i] - s * ab[i]) * (ap[i] - s * ab[i]);
  return d2;
}
static double tri2(const double *a, const double *b, const double *c, const double *p) {
  double best = fmin(seg2(a, b, p), fmin(seg2(b, c, p), seg2(c, a, p)));
  double u[3], v[3], w[3], n[3];
  for (int i = 0; i < 3; i++)
    u[i] = b[i] - a[i], v[i] = c[i] - a[i], w[i] = p[i] - a[i];
  n[0] = u[1] * v[2] - u[2] * v[1], n[1] = u[2] * v[0] - u[0] * v[2],
  n[2] = u[0] * v[1] - u[1] * v[0];
  double nn = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
  if (nn <= 0) return best;
  double h = (w[0] * n[0] + w[1] * n[1] + w[2] * n[2]) / nn, q[3];
  for (int i = 0; i < 3; i++)
    q[i] = w[i] - h * n[i]; /* the foot, relative to a */
  /* barycentric weights of the foot */
  double uu = 0, uv = 0, vv = 0, qu = 0, qv = 0;
  for (int i = 0; i < 3; i++)
    uu += u[i] * u[i], uv += u[i] * v[i], vv += v[i] * v[i], qu += q[i] * u[i], qv += q[i] * v[i];
  double den = uu * vv - uv * uv, s = (vv * qu - uv * qv) / den, t = (uu * qv - uv * qu) / den;
  if (s >= 0 && t >= 0 && s + t <= 1) best = fmin(best, h * h * nn);
  return best;
}

typedef struct mesh {
  int np, nt;
  float *pts;
  int32_t *idx;
} mesh;

/* the slots under lane j of wide node w, appended to out */
static int lane_slots(const wf_gnode4 *W, int w, int j, int *out, int n) {
  int c = W[w].child[j];
  if (c < 0) {
    for (int k = 0; k < W[w].count[j]; k++)
      out[n++] = ~c + k;
    return n;
  }
  for (int l = 0; l < 4 && W[c].child[l]; l++)
    n = lane_slots(W, c, l, out, n);
  return n;
}

/* Every lane's bound against its triangles; the number of failures. */
static int check_bounds(const mesh *M, uint64_t id, const char *what) {
  const wf_gmesh *m = (const wf_gmesh *)(uintptr_t)id;
  const wf_gnode4 *W = m->bvh.wide;
  const wf_gdisc4 *D = m->bvh.disc;
  int *slots = malloc(sizeof(int) * (size_t)M->nt), bad = 0, checks = 0;
  if (!slots || !D) {
    free(slots);
    return 1;
  }
  for (int w = 0; w < m->bvh.nwide; w++)
    for (int j = 0; j < 4 && W[w].child[j]; j++) {
      int n = lane_slots(W, w, j, slots, 0);
      float size = 0;
      for (int a = 0; a < 3; a++)
        size = gmax(size, W[w].hi[a][j] - W[w].lo[a][j]);
      for (int q = 0; q < 12; q++) {
        /* around the box: within a tenth of its size, its size, ten times */
        double reach = size * (q < 4 ? 0.1 : q < 8 ? 1.0 : 10.0) + 1e-6, p[3];
        for (int a = 0; a < 3; a++)
          p[a] = urand(W[w].lo[a][j] - reach, W[w].hi[a][j] + reach);
        /* (GCC 12.2's SLP vectorizer dropped this rounding at -O2:
        ** CMakeLists.txt builds the tests without it) */
        float pf[3] = {(float)p[0], (float)p[1], (float)p[2]}, d4[4];
        for (int a = 0; a < 3; a++)
          p[a] = pf[a];
        gdisc4_dist2(&D[w], &W[w], g3(pf[0], pf[1], pf[2]), d4, 0);
        double best = 1e300;
        for (int s = 0; s < n; s++) {
          const int *f = M->idx + 3 * m->bvh.items[slots[s]];
          double v[3][3];
          for (int i = 0; i < 3; i++)
            for (int a = 0; a < 3; a++)
              v[i][a] = M->pts[3 * f[i] + a];
          best = fmin(best, tri2(v[0], v[1], v[2], p));
        }
        checks++;
        /* the box's part is as exact as floats go (a few ulps) */
        if (!(d4[j] <= best * (1.0 + 1.0 / 1048576.0))) {
          if (bad++ < 5)
            fprintf(stderr, "%s: wide node %d lane %d: bound %.9g above the distance %.9g\n", what,
                    w, j, (double)d4[j], best);
        }
      }
    }
  free(slots);
  CHECK(checks > 100);
  return bad;
}

/* a torus of nu x nv quads, at (300, -200, 500) times far (far from the
** origin and small against it) */
static void torus(mesh *M, int nu, int nv, double far) {
  for (int j = 0; j < nv; j++)
    for (int i = 0; i < nu; i++) {
      double u = 2 * M_PI * i / nu, v = 2 * M_PI * j / nv;
      int k = j * nu + i;
      M->pts[3 * k] = (float)(300.0 * far + (0.5 + 0.2 * cos(v)) * cos(u));
      M->pts[3 * k + 1] = (float)(-200.0 * far + (0.5 + 0.2 * cos(v)) * sin(u));
      M->pts[3 * k + 2] = (float)(500.0 * far + 0.2 * sin(v));
      int a = k, b = j * nu + (i + 1) % nu, c = ((j + 1) % nv) * nu + (i + 1) % nu,
          d = ((j + 1) % nv) * nu + i;
      int32_t *f = M->idx + 6 * k;
      f[0] = a, f[1] = b, f[2] = c, f[3] = a, f[4] = c, f[5] = d;
    }
}

static uint64_t build(weft_State *W, const mesh *M) {
  uint64_t id[1] = {0};
  const int64_t ps[1] = {M->np}, is[1] = {3 * (int64_t)M->nt}, os[1] = {1};
  CHECK_INT(weft_wrap(W, "pts", M->pts, "vec3f", 1, ps, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "idx", M->idx, "int32", 1, is, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "out", id, "uint64", 1, os, "cpu"), 0);
  int rc =
      weft_dostring(W, "local weft = require 'weft'\n"
                       "mesh = weft.Mesh{ points = pts, indices = idx }\n"
                       "local k = weft.kernel{ id = weft.uint64, out = weft.array(weft.uint64),\n"
                       "  function(id, out) out[0] = id end }\n"
                       "weft.launch(k, 1, { mesh.id, out })\n");
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
  return id[0];
}

static void refit(weft_State *W) {
  int rc = weft_dostring(W, "mesh:refit()\n");
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
}

/* M's bounds as built, and after every coordinate is scaled and jittered
** and the mesh refit */
static void build_refit(weft_State *W, mesh *M, const char *what, float scale, double jitter) {
  char after[64];
  uint64_t id = build(W, M);
  CHECK_INT(check_bounds(M, id, what), 0);
  for (int k = 0; k < 3 * M->np; k++)
    M->pts[k] = M->pts[k] * scale + (float)urand(-jitter, jitter);
  refit(W);
  snprintf(after, sizeof after, "%s after refit", what);
  CHECK_INT(check_bounds(M, id, after), 0);
}

int main(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return 1;
  /* a torus of 60 x 24 quads, far from the origin and small against it */
  mesh T = {60 * 24, 2 * 60 * 24, NULL, NULL};
  T.pts = malloc(sizeof(float) * 3 * (size_t)T.np);
  T.idx = malloc(sizeof(int32_t) * 3 * (size_t)T.nt);
  torus(&T, 60, 24, 1.0);
  uint64_t tid = build(W, &T);
  CHECK_INT(check_bounds(&T, tid, "far torus"), 0);
  for (int k = 0; k < T.np; k++) { /* every point moves: a twist and a bulge */
    float *p = T.pts + 3 * k, x = p[0] - 300.0f, y = p[1] + 200.0f;
    p[0] = 300.0f + 0.8f * x - 0.6f * y, p[1] = -200.0f + 0.6f * x + 0.8f * y;
    p[2] += 0.3f * x * x;
  }
  refit(W);
  CHECK_INT(check_bounds(&T, tid, "far torus after refit"), 0);
  /* a torus big enough (72k faces) for refit to run on the thread pool
  ** (leaves in runs, inner lanes by subtrees), moved and refit */
  mesh B = {300 * 120, 2 * 300 * 120, NULL, NULL};
  B.pts = malloc(sizeof(float) * 3 * (size_t)B.np);
  B.idx = malloc(sizeof(int32_t) * 3 * (size_t)B.nt);
  torus(&B, 300, 120, 0.0);
  uint64_t bid = build(W, &B);
  for (int k = 0; k < B.np; k++) { /* a shear and a wave */
    float *p = B.pts + 3 * k;
    p[0] += 0.3f * p[2], p[2] += 0.1f * sinf(4.0f * p[0]);
  }
  refit(W);
  CHECK_INT(check_bounds(&B, bid, "big torus after a refit on the pool"), 0);
  /* its refit checks the points on the pool: a NaN fails it, naming the
  ** point, and the mesh refits again once the point is back */
  float keep = B.pts[3 * 23456 + 1];
  B.pts[3 * 23456 + 1] = NAN;
  CHECK(weft_dostring(W, "mesh:refit()\n") != 0);
  CHECK_HAS(weft_errmsg(W), "points[23456] is not finite");
  B.pts[3 * 23456 + 1] = keep;
  refit(W);
  CHECK_INT(check_bounds(&B, bid, "big torus after a failed refit"), 0);
  /* a soup: random triangles, points, slivers and segments */
  mesh S = {3 * 600, 600, NULL, NULL};
  S.pts = malloc(sizeof(float) * 3 * (size_t)S.np);
  S.idx = malloc(sizeof(int32_t) * 3 * (size_t)S.nt);
  for (int f = 0; f < S.nt; f++) {
    double c[3] = {urand(-1, 1), urand(-1, 1), urand(-1, 1)};
    for (int v = 0; v < 3; v++) {
      for (int a = 0; a < 3; a++)
        S.pts[9 * f + 3 * v + a] = (float)(c[a] + urand(-0.1, 0.1));
      S.idx[3 * f + v] = 3 * f + v;
    }
    float *t = S.pts + 9 * f;
    if (f % 7 == 1) memcpy(t + 3, t, 12), memcpy(t + 6, t, 12); /* a point */
    if (f % 7 == 3)
      for (int a = 0; a < 3; a++) /* a segment */
        t[6 + a] = t[a] + 0.25f * (t[3 + a] - t[a]);
    if (f % 7 == 5) t[6] = t[0] + 1e-6f, t[7] = t[1], t[8] = t[2]; /* a sliver */
  }
  build_refit(W, &S, "soup", 1.5f, 0.05);
  /* clusters of 8 overlapping triangles (leaves of up to 8 slots, some
  ** across refit's windows of 256 slots), 1003 of them (not a multiple of
  ** the blocks' 4) */
  mesh K = {3 * 1003, 1003, NULL, NULL};
  K.pts = malloc(sizeof(float) * 3 * (size_t)K.np);
  K.idx = malloc(sizeof(int32_t) * 3 * (size_t)K.nt);
  double c[3] = {0, 0, 0};
  for (int f = 0; f < K.nt; f++) {
    if (f % 8 == 0)
      for (int a = 0; a < 3; a++)
        c[a] = urand(-10, 10);
    for (int v = 0; v < 3; v++) {
      for (int a = 0; a < 3; a++)
        K.pts[9 * f + 3 * v + a] = (float)(c[a] + (v == a ? 0.5 : 0.0) + urand(0, 1e-3));
      K.idx[3 * f + v] = 3 * f + v;
    }
  }
  build_refit(W, &K, "clusters", 0.7f, 0.02);
  weft_close(W);
  free(T.pts), free(T.idx), free(S.pts), free(S.idx), free(B.pts), free(B.idx);
  free(K.pts), free(K.idx);
  WTEST_DONE();
}
