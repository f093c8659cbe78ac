/*
** hashgrid.c -- building a hash grid on the host: the cell of every point
** (in parallel), then a stable counting sort of the points by cell.
*/
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geom/hashgrid.h"

#define MAX_THREADS 64

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int wf_hashgrid_new(int dx, int dy, int dz, wf_hashgrid **out, char *err, size_t errlen) {
  *out = NULL;
  if (dx < 1 || dy < 1 || dz < 1)
    return fail(err, errlen, "HashGrid: dimensions must be positive (got %d, %d, %d)", dx, dy, dz);
  const int64_t ncells = (int64_t)dx * dy * dz;
  if (ncells >= ((int64_t)1 << 31) - 1)
    return fail(err, errlen, "HashGrid: %lld cells are too many (at most 2^31 - 2)",
                (long long)ncells);
  wf_hashgrid *h = calloc(1, sizeof *h);
  if (h) h->starts = calloc((size_t)ncells + 1, sizeof(int32_t));
  if (!h || !h->starts) {
    free(h);
    return fail(err, errlen, "HashGrid: out of memory for %lld cells", (long long)ncells);
  }
  h->desc.magic = WF_HGRID_MAGIC;
  h->desc.cell_starts = h->starts;
  h->desc.dim_x = dx, h->desc.dim_y = dy, h->desc.dim_z = dz;
  h->desc.cell_width = 1.0f, h->desc.inv_width = 1.0f;
  *out = h;
  return 0;
}

void wf_hashgrid_free(wf_hashgrid *h) {
  if (!h) return;
  h->desc.magic = 0;
  free(h->ids);
  free(h->starts);
  free(h->cells);
  free(h);
}

int wf_hashgrid_reserve(wf_hashgrid *h, int64_t n, char *err, size_t errlen) {
  if (n < 0 || n > INT32_MAX)
    return fail(err, errlen, "HashGrid: cannot hold %lld points (0 to 2^31 - 1)", (long long)n);
  if (n <= h->capacity) return 0;
  int32_t *ids = malloc((size_t)n * sizeof(int32_t)), *cells = malloc((size_t)n * sizeof(int32_t));
  if (!ids || !cells) {
    free(ids);
    free(cells);
    return fail(err, errlen, "HashGrid: out of memory for %lld points", (long long)n);
  }
  free(h->ids);
  free(h->cells);
  h->ids = ids, h->cells = cells, h->capacity = n;
  h->desc.point_ids = ids;
  return 0;
}

typedef struct cell_job {
  const wf_hgrid *g;
  const unsigned char *points;
  int64_t stride, lo, hi;
  int32_t *cells;
} cell_job;

static void *cells_of(void *arg) {
  const cell_job *J = arg;
  const wf_hgrid *g = J->g;
  const float s = g->inv_width;
  for (int64_t i = J->lo; i < J->hi; i++) {
    const float *p = (const float *)(J->points + i * J->stride);
    J->cells[i] = wf_hgrid_cell(g, wf_hgrid_coord(p[0] * s), wf_hgrid_coord(p[1] * s),
                                wf_hgrid_coord(p[2] * s));
  }
  return NULL;
}

int wf_hashgrid_build(wf_hashgrid *h, const void *points, int64_t n, int64_t stride, double radius,
                      int nthreads, char *err, size_t errlen) {
  if (!(radius > 0) || radius > 3.0e38)
    return fail(err, errlen, "HashGrid:build: radius must be positive and finite (got %g)", radius);
  if (wf_hashgrid_reserve(h, n, err, errlen)) return -1;
  wf_hgrid *g = &h->desc;
  g->cell_width = (float)radius;
  g->inv_width = 1.0f / (float)radius;
  const int64_t ncells = (int64_t)g->dim_x * g->dim_y * g->dim_z;
  /* the cells in parallel: each point's floor and wrap is independent */
  int T = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
  if (n < 65536) T = 1;
  cell_job jobs[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int running[MAX_THREADS] = {0};
  for (int t = 0; t < T; t++) {
    jobs[t] = (cell_job){g, points, stride, n * t / T, n * (t + 1) / T, h->cells};
    if (t > 0) running[t] = pthread_create(&tids[t], NULL, cells_of, &jobs[t]) == 0;
  }
  cells_of(&jobs[0]);
  for (int t = 1; t < T; t++) {
    if (running[t])
      pthread_join(tids[t], NULL);
    else
      cells_of(&jobs[t]); /* no thread: do its share here */
  }
  /* a stable counting sort: counts, running ends, then the points placed
  ** backwards from each cell's end (later points last), which leaves
  ** starts[c] at the start of cell c */
  int32_t *starts = h->starts;
  memset(starts, 0, (size_t)ncells * sizeof(int32_t));
  const int32_t *cells = h->cells;
  for (int64_t i = 0; i < n; i++)
    starts[cells[i]]++;
  int32_t run = 0;
  for (int64_t c = 0; c < ncells; c++)
    run += starts[c], starts[c] = run;
  starts[ncells] = (int32_t)n;
  for (int64_t i = n - 1; i >= 0; i--)
    h->ids[--starts[cells[i]]] = (int32_t)i;
  g->npoints = (int32_t)n;
  g->points = points;
  g->stride = stride;
  return 0;
}

/* ---- device copies (lua/weft/hashgrid.lua uploads the arrays) ---- */

/* The descriptor of a copy whose point ids and cell starts live at
** dev_ids and dev_starts in another address space. */
void wf_hashgrid_device_desc(const wf_hashgrid *h, uint64_t dev_ids, uint64_t dev_starts,
                             void *out) {
  wf_hgrid d = h->desc;
  d.point_ids = (const int32_t *)(uintptr_t)dev_ids;
  d.cell_starts = (const int32_t *)(uintptr_t)dev_starts;
  d.points = NULL; /* host memory: nothing to prefetch there */
  memcpy(out, &d, sizeof d);
}
/* which: 0 the point ids (npoints), 1 the cell starts (ncells + 1) */
const int32_t *wf_hashgrid_array(const wf_hashgrid *h, int which, int64_t *n) {
  *n = which == 0 ? h->desc.npoints : (int64_t)h->desc.dim_x * h->desc.dim_y * h->desc.dim_z + 1;
  return which == 0 ? h->ids : h->starts;
}
