/*
** mesh_visits.c -- the closest-point walk of src/geom/query.h with its
** step counters on (WF_GCOUNT), for bench/mesh_visits.lua: the wide nodes
** and the leaves a query visits, which the lanes' bounds and the order of
** the walk decide (the same on every backend and build: the walk's
** floats are those of the kernels, no contraction). Built by
** scripts/run-bench (or by hand):
**   gcc -O2 -ffp-contract=off -fno-tree-slp-vectorize -shared -fPIC -Isrc -Iinclude \
**     -o build/bench/libmesh_visits.so bench/mesh_visits.c -lm
*/
#include <stdint.h>

static long long mv_node, mv_leaf, mv_few;
#define WF_GCOUNT(what) (mv_##what++)
#include "geom/query.h"

/* n closest-point queries (points p, 3 floats each) within lim on the mesh
** whose id is id: the node visits a query; *leaves the leaf visits, *dsum
** the sum of the squared distances found. */
double mv_closest(uint64_t id, const float *p, int n, float lim, double *leaves, double *dsum) {
  const wf_gmesh *m = (const wf_gmesh *)(uintptr_t)id;
  double s = 0;
  mv_node = mv_leaf = mv_few = 0;
  for (int i = 0; i < n; i++) {
    float u, v, d2;
    if (gmesh_closest(m, g3(p[3 * i], p[3 * i + 1], p[3 * i + 2]), lim, &u, &v, &d2) >= 0) s += d2;
  }
  *leaves = n ? (double)mv_leaf / n : 0;
  *dsum = s;
  return n ? (double)mv_node / n : 0;
}

/* The visits that rank no lanes (none or one to go on to: gstack4_push)
** a query of the last mv_closest or mv_rays call. */
double mv_few_last(int n) {
  return n ? (double)mv_few / n : 0;
}

/* n rays (origins o, directions d, 3 floats each) up to tmax on the mesh
** id: the node visits a ray; *leaves the leaf visits, *tsum the sum of
** the hits' t. */
double mv_rays(uint64_t id, const float *o, const float *d, int n, float tmax, double *leaves,
               double *tsum) {
  const wf_gmesh *m = (const wf_gmesh *)(uintptr_t)id;
  double s = 0;
  mv_node = mv_leaf = mv_few = 0;
  for (int i = 0; i < n; i++) {
    float t, u, v, det;
    wf_g3 oi = g3(o[3 * i], o[3 * i + 1], o[3 * i + 2]);
    wf_g3 di = g3(d[3 * i], d[3 * i + 1], d[3 * i + 2]);
    if (gmesh_ray(m, oi, di, tmax, &t, &u, &v, &det) >= 0) s += t;
  }
  *leaves = n ? (double)mv_leaf / n : 0;
  *tsum = s;
  return n ? (double)mv_node / n : 0;
}
