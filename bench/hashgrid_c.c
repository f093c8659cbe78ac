/*
** hashgrid_c.c -- the plain C baseline of bench/hashgrid.lua: count the
** neighbours within r of every point by walking the same cell lists a
** weft.HashGrid built (its point_ids and cell_starts), with the same
** threads as a weft launch, in the same (cell) order of points.
** A second count reads positions copied into cell order beforehand (not
** timed): the same loop with every candidate's position beside the
** previous one's, a bound for any query that reads the user's array.
** Built by scripts/run-bench as a shared library:
**   gcc -O3 -march=native -shared -fPIC -Isrc -Iinclude bench/hashgrid_c.c
*/
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "geom/hashgrid.h"

typedef struct job {
  const wf_hashgrid *h;
  const float *p;
  const float *sorted; /* positions in cell order, or NULL */
  float r;
  int32_t *out;
  int lo, hi;
} job;

static int cell_of(float v, float inv) {
  return (int)floorf(v * inv);
}
static int wrap(int x, int d) {
  int c = x % d;
  return c < 0 ? c + d : c;
}

/* The cells of the box p +- r (wrapped once per axis, then stepped), the
** points of each tested against r: what a C programmer would write over
** these cell lists. */
static void *count_range(void *arg) {
  const job *J = arg;
  const wf_hgrid *g = &J->h->desc;
  const float r = J->r, r2 = r * r, inv = g->inv_width;
  const int dx = g->dim_x, dy = g->dim_y, dz = g->dim_z;
  for (int t = J->lo; t < J->hi; t++) {
    const int i = g->point_ids[t];
    const float *pi = J->sorted ? J->sorted + 3 * t : J->p + 3 * i;
    const int x0 = cell_of(pi[0] - r, inv), nx = cell_of(pi[0] + r, inv) - x0 + 1;
    const int y0 = cell_of(pi[1] - r, inv), ny = cell_of(pi[1] + r, inv) - y0 + 1;
    const int z0 = cell_of(pi[2] - r, inv), nz = cell_of(pi[2] + r, inv) - z0 + 1;
    int count = 0;
    for (int iz = 0, cz = wrap(z0, dz); iz < nz; iz++, cz = cz + 1 == dz ? 0 : cz + 1)
      for (int iy = 0, cy = wrap(y0, dy); iy < ny; iy++, cy = cy + 1 == dy ? 0 : cy + 1)
        for (int ix = 0, cx = wrap(x0, dx); ix < nx; ix++, cx = cx + 1 == dx ? 0 : cx + 1) {
          const int c = (cz * dy + cy) * dx + cx;
          for (int k = g->cell_starts[c]; k < g->cell_starts[c + 1]; k++) {
            const float *pj = J->sorted ? J->sorted + 3 * k : J->p + 3 * g->point_ids[k];
            const float ex = pj[0] - pi[0], ey = pj[1] - pi[1], ez = pj[2] - pi[2];
            count += ex * ex + ey * ey + ez * ez <= r2;
          }
        }
    J->out[i] = count;
  }
  return 0;
}

static void count_all(const void *h, const float *points, const float *sorted, int n, float r,
                      int32_t *out, int nthreads) {
  job jobs[64];
  pthread_t tid[64];
  if (nthreads < 1) nthreads = 1;
  if (nthreads > 64) nthreads = 64;
  for (int t = 0; t < nthreads; t++) {
    jobs[t] = (job){h,
                    points,
                    sorted,
                    r,
                    out,
                    (int)((int64_t)n * t / nthreads),
                    (int)((int64_t)n * (t + 1) / nthreads)};
    if (t) pthread_create(&tid[t], 0, count_range, &jobs[t]);
  }
  count_range(&jobs[0]);
  for (int t = 1; t < nthreads; t++)
    pthread_join(tid[t], 0);
}

/* The box of a point's query must not wrap onto itself (dims > 2r/w). */
void bench_hashgrid_count(const void *h, const float *points, int n, float r, int32_t *out,
                          int nthreads) {
  count_all(h, points, NULL, n, r, out, nthreads);
}

/* sorted: room for 3n floats, filled here from points in cell order
** (untimed when fill is 1), then the count alone (fill 0) */
void bench_hashgrid_count_sorted(const void *h, const float *points, float *sorted, int n, float r,
                                 int32_t *out, int nthreads, int fill) {
  const wf_hgrid *g = &((const wf_hashgrid *)h)->desc;
  if (fill) {
    for (int k = 0; k < n; k++)
      for (int d = 0; d < 3; d++)
        sorted[3 * k + d] = points[3 * g->point_ids[k] + d];
    return;
  }
  count_all(h, points, sorted, n, r, out, nthreads);
}
