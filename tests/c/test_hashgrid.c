/*
** test_hashgrid.c -- the hash grid (src/geom/hashgrid.h, .c) against brute
** force: every pair within r is found exactly once and no point beyond r
** (give or take WF_HGRID_SLACK) is yielded, on grids smaller than the
** query box (the periodic wrap), with points far from the origin, with
** clusters fuller than a query's buffer, with no points, and with NaN
** points; the build's sort is stable and its sorted positions are the
** points'.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "geom/hashgrid.h"
#include "wtest.h"

static float frand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / 16777216.0f;
}

/* For every point: candidates, neighbours within r, none beyond it, and
** no duplicates. */
static void check_against_brute(int dx, int dy, int dz, int n, float extent, float shift, float r,
                                int nthreads) {
  float *p = malloc(sizeof(float) * 3 * (size_t)n);
  uint32_t seed = 12345u + (uint32_t)n;
  for (int i = 0; i < 3 * n; i++)
    p[i] = frand(&seed) * extent + shift;
  wf_hashgrid *h;
  char err[256];
  CHECK_INT(wf_hashgrid_new(dx, dy, dz, &h, err, sizeof err), 0);
  CHECK_INT(wf_hashgrid_build(h, p, n, 12, r, nthreads, err, sizeof err), 0);
  int bad_count = 0, dups = 0, far = 0;
  unsigned char *seen = calloc((size_t)n, 1);
  const int step = n > 5000 ? 97 : 1; /* brute force is quadratic */
  for (int i = 0; i < n; i += step) {
    wf_hgrid_query q;
    int32_t j;
    int found = 0, brute = 0;
    memset(seen, 0, (size_t)n);
    wf_hgrid_query_begin(&q, &h->desc, p[3 * i], p[3 * i + 1], p[3 * i + 2], r);
    while (wf_hgrid_query_next(&q, &j)) {
      if (seen[j]) dups++;
      seen[j] = 1;
      const float ddx = p[3 * j] - p[3 * i], ddy = p[3 * j + 1] - p[3 * i + 1],
                  ddz = p[3 * j + 2] - p[3 * i + 2];
      found += ddx * ddx + ddy * ddy + ddz * ddz <= r * r;
      far += ddx * ddx + ddy * ddy + ddz * ddz > r * r * (1 + 1e-4f);
    }
    for (int k = 0; k < n; k++) {
      const float ddx = p[3 * k] - p[3 * i], ddy = p[3 * k + 1] - p[3 * i + 1],
                  ddz = p[3 * k + 2] - p[3 * i + 2];
      brute += ddx * ddx + ddy * ddy + ddz * ddz <= r * r;
    }
    bad_count += found != brute;
  }
  CHECK_INT(bad_count, 0);
  CHECK_INT(dups, 0);
  CHECK_INT(far, 0);
  /* the sorted records hold the points in cell order, and their ids */
  int moved = 0;
  for (int k = 0; k < n; k++)
    for (int d = 0; d < 3; d++)
      moved += h->sorted[4 * k + d] != p[3 * h->ids[k] + d];
  for (int k = 0; k < n; k++) {
    int32_t id;
    memcpy(&id, &h->sorted[4 * k + 3], sizeof id);
    moved += id != h->ids[k];
  }
  CHECK_INT(moved, 0);
  /* stable: ascending point ids inside each cell, and point_id covers all */
  int unstable = 0;
  const int64_t ncells = (int64_t)dx * dy * dz;
  for (int64_t c = 0; c < ncells; c++)
    for (int32_t k = h->starts[c] + 1; k < h->starts[c + 1]; k++)
      unstable += h->ids[k - 1] >= h->ids[k];
  CHECK_INT(unstable, 0);
  CHECK_INT(h->starts[ncells], n);
  CHECK_INT(wf_hgrid_point_id(&h->desc, -1), -1);
  CHECK_INT(wf_hgrid_point_id(&h->desc, n), -1);
  free(seen);
  free(p);
  wf_hashgrid_free(h);
}

/* A build gives the arrays of one thread whatever the thread count (more
** threads than cells, shares that do not divide the points evenly). */
static void check_same_threads(int dx, int dy, int dz, int n, float extent) {
  float *p = malloc(sizeof(float) * 3 * (size_t)n);
  uint32_t seed = 777u + (uint32_t)n;
  for (int i = 0; i < 3 * n; i++)
    p[i] = frand(&seed) * extent;
  const int64_t ncells = (int64_t)dx * dy * dz;
  wf_hashgrid *one, *many;
  char err[256];
  CHECK_INT(wf_hashgrid_new(dx, dy, dz, &one, err, sizeof err), 0);
  CHECK_INT(wf_hashgrid_new(dx, dy, dz, &many, err, sizeof err), 0);
  CHECK_INT(wf_hashgrid_build(one, p, n, 12, 0.1, 1, err, sizeof err), 0);
  const int threads[] = {2, 3, 7, 64};
  for (int k = 0; k < 4; k++) {
    CHECK_INT(wf_hashgrid_build(many, p, n, 12, 0.1, threads[k], err, sizeof err), 0);
    CHECK_INT(memcmp(one->ids, many->ids, sizeof(int32_t) * (size_t)n), 0);
    CHECK_INT(memcmp(one->starts, many->starts, sizeof(int32_t) * (size_t)(ncells + 1)), 0);
  }
  free(p);
  wf_hashgrid_free(one);
  wf_hashgrid_free(many);
}

int main(void) {
  check_same_threads(5, 7, 3, 70000, 1.0f);        /* 105 cells: uneven ranges */
  check_same_threads(40, 40, 40, 100000, 2.0f);    /* most in the first octant's cells */
  check_same_threads(2, 1, 1, 66000, 0.15f);       /* more threads than cells */
  check_same_threads(128, 128, 128, 100000, 1.0f); /* 2M cells: buckets of 4096 */
  check_against_brute(16, 16, 16, 2000, 1.0f, 0.0f, 0.06f, 2);
  check_against_brute(3, 2, 5, 500, 1.0f, 0.0f, 0.2f, 1);       /* query box > grid */
  check_against_brute(8, 8, 8, 800, 3.0f, -12345.0f, 0.25f, 2); /* far from 0 */
  check_against_brute(64, 64, 64, 70000, 1.0f, 0.0f, 0.01f, 2); /* threaded cells */
  check_against_brute(64, 64, 64, 70000, 1.0f, 0.0f, 0.01f, 1);
  /* about 100 within r of each point: every query refills its buffer,
  ** in boxes that wrap (8^3 cells of 0.125 over [0, 1)) and that do not */
  check_against_brute(8, 8, 8, 3000, 1.0f, 0.0f, 0.2f, 2);
  check_against_brute(32, 32, 32, 3000, 0.25f, 0.3f, 0.05f, 2);

  char err[256];
  wf_hashgrid *h;
  CHECK_INT(wf_hashgrid_new(0, 4, 4, &h, err, sizeof err), -1);
  CHECK_STR(err, "HashGrid: dimensions must be positive (got 0, 4, 4)");
  CHECK_INT(wf_hashgrid_new(2048, 2048, 2048, &h, err, sizeof err), -1);
  CHECK_STR(err, "HashGrid: 8589934592 cells are too many (at most 2^31 - 2)");
  CHECK_INT(wf_hashgrid_new(4, 4, 4, &h, err, sizeof err), 0);
  /* never built: a query yields nothing */
  wf_hgrid_query q;
  int32_t j;
  wf_hgrid_query_begin(&q, &h->desc, 0, 0, 0, 1);
  CHECK_INT(wf_hgrid_query_next(&q, &j), 0);
  float pts[6] = {NAN, 0, 0, 0.5f, 0.5f, 0.5f};
  CHECK_INT(wf_hashgrid_build(h, pts, 2, 12, 0.0, 1, err, sizeof err), -1);
  CHECK_STR(err, "HashGrid:build: radius must be positive and finite (got 0)");
  CHECK_INT(wf_hashgrid_build(h, pts, 2, 12, 1.0, 1, err, sizeof err), 0);
  int count = 0;
  wf_hgrid_query_begin(&q, &h->desc, 0.5f, 0.5f, 0.5f, 0.1f);
  while (wf_hgrid_query_next(&q, &j))
    count++;
  CHECK(count >= 1);
  wf_hgrid_query_begin(&q, &h->desc, NAN, NAN, NAN, 0.1f); /* a NaN query ends */
  count = 0;
  while (wf_hgrid_query_next(&q, &j) && count < 10)
    count++;
  CHECK(count <= 2);
  CHECK_INT(wf_hashgrid_reserve(h, -1, err, sizeof err), -1);
  wf_hashgrid_free(h);
  WTEST_DONE();
}
