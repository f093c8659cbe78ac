/*
** test_volume_dense.c -- the three ways src/geom/volume.h finds the 8
** corners of a trilinear sample (the dense table of the box, the block
** table, the tree walk) give the same values and gradients bit for bit,
** for float and vec3 grids, at points inside, across and outside the box;
** and which grids get a dense table (src/geom/nanovdb.c, dense_table).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "geom/nanovdb.h"
#include "wtest.h"

static float frand(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / 16777216.0f;
}

/* A from_dense grid of nx * ny * nz voxels holding nf floats each. */
static wf_volume *make(int nx, int ny, int nz, int nf) {
  const int64_t shape[3] = {nx, ny, nz};
  const int64_t strides[3] = {(int64_t)ny * nz * nf * 4, (int64_t)nz * nf * 4, nf * 4};
  const size_t n = (size_t)nx * ny * nz * nf;
  float *a = malloc(sizeof(float) * n);
  uint32_t seed = 99u + (uint32_t)n;
  for (size_t i = 0; i < n; i++)
    a[i] = frand(&seed) * 4.0f - 2.0f;
  const double origin[3] = {0.5, -1.0, 2.0};
  const float bg[3] = {0.25f, -0.5f, 1.5f};
  wf_volume *v = NULL;
  char err[256];
  CHECK_INT(wf_volume_from_dense(a, nf == 3 ? WF_NVDB_VEC3F : WF_NVDB_FLOAT, shape, strides, 0.5,
                                 origin, bg, "t", &v, err, sizeof err),
            0);
  free(a);
  return v;
}

static void sample(const wf_volume *v, const float *pts, int n, float *val, float *grad) {
  CHECK_INT(wf_volume_sample_points(v, pts, n, WF_VOL_LINEAR, val, grad), 0);
}

/* Values and gradients at points spread over the box and a margin of 3
** voxels, half of them on integer or block-border (x.7) coordinates. */
static void check_paths(int nx, int ny, int nz, int nf) {
  wf_volume *v = make(nx, ny, nz, nf);
  if (!v) return;
  CHECK(v->desc.dense != NULL);
  CHECK(v->desc.blocks != NULL);
  const int n = 4000;
  float *pts = malloc(sizeof(float) * 3 * n);
  uint32_t seed = 7u;
  const int dims[3] = {nx, ny, nz};
  for (int i = 0; i < n; i++)
    for (int a = 0; a < 3; a++) {
      float x = frand(&seed) * (float)(dims[a] + 6) - 3.0f;
      if (i & 1) x = (float)(int)x; /* integer: corners on the cell's low face */
      if (i % 4 == 3) x = (float)(8 * (int)(frand(&seed) * 3.0f) - 1) + frand(&seed); /* x.7 */
      pts[3 * i + a] = x;
    }
  float *val[3], *grad[3];
  for (int k = 0; k < 3; k++) {
    val[k] = malloc(sizeof(float) * (size_t)n * nf);
    grad[k] = malloc(sizeof(float) * (size_t)n * 3 * nf);
  }
  sample(v, pts, n, val[0], grad[0]); /* through the dense table */
  const float *dense = v->desc.dense;
  v->desc.dense = NULL;
  sample(v, pts, n, val[1], grad[1]); /* through the block table */
  const int64_t *blocks = v->desc.blocks;
  v->desc.blocks = NULL;
  sample(v, pts, n, val[2], grad[2]); /* the leaf table and the walk */
  v->desc.dense = dense;
  v->desc.blocks = blocks;
  for (int k = 1; k < 3; k++) {
    CHECK(memcmp(val[0], val[k], sizeof(float) * (size_t)n * nf) == 0);
    CHECK(memcmp(grad[0], grad[k], sizeof(float) * (size_t)n * 3 * nf) == 0);
  }
  /* not all background: the points reach the grid's values (a grid of one
  ** voxel aside) */
  int inside = 0;
  for (int i = 0; i < n * nf; i++)
    inside += val[0][i] != 0.25f && val[0][i] != -0.5f && val[0][i] != 1.5f;
  CHECK(nx * ny * nz == 1 || inside > n / 4);
  for (int k = 0; k < 3; k++)
    free(val[k]), free(grad[k]);
  free(pts);
  wf_volume_free(v);
}

int main(void) {
  check_paths(20, 12, 17, 1);
  check_paths(9, 16, 8, 3);
  check_paths(1, 1, 1, 1);
  /* an int grid has no dense table (its samples are lookups) */
  {
    const int64_t shape[3] = {4, 4, 4}, strides[3] = {64, 16, 4};
    int32_t a[64] = {0}, bg = 0;
    const double origin[3] = {0, 0, 0};
    wf_volume *v = NULL;
    char err[256];
    CHECK_INT(wf_volume_from_dense(a, WF_NVDB_INT32, shape, strides, 1.0, origin, &bg, NULL, &v,
                                   err, sizeof err),
              0);
    if (v) {
      CHECK(v->desc.dense == NULL);
      wf_volume_free(v);
    }
  }
  WTEST_DONE();
}
