/*
** hashgrid.h -- neighbour search on a periodic grid of cells: the query
** that kernels run (plain C99, compiled into libweft for the CPU backend
** and into the CUDA prelude with WF_GEOM_FN = `static __device__ inline`)
** and the host object that builds it (hashgrid.c).
**
** A point p falls in cell (floor(p.x / w), floor(p.y / w), floor(p.z / w))
** wrapped into dim_x * dim_y * dim_z cells, so points anywhere in space
** work (as in Warp). After a build:
**
**   point_ids    point indices sorted by cell (stable: ascending in a cell)
**   cell_starts  ncells + 1 offsets into point_ids; cell c holds
**                point_ids[cell_starts[c] .. cell_starts[c + 1])
**
** A query visits every cell that the box p +- r touches (each cell once,
** even when the box wraps around the grid) and yields the points stored
** there: candidates, which the kernel filters by distance.
*/
#ifndef WF_GEOM_HASHGRID_H
#define WF_GEOM_HASHGRID_H

#ifndef WF_GEOM_GEOMFN_H /* the CUDA C has it already (src/cuda/emit.c) */
#include "geom/geomfn.h"
#endif

#define WF_HGRID_MAGIC 0x646972676874666full /* "oftghrid": a live descriptor */

typedef struct wf_hgrid {
  uint64_t magic;
  const int32_t *point_ids;
  const int32_t *cell_starts;
  float cell_width, inv_width;
  int32_t dim_x, dim_y, dim_z, npoints;
  /* the points of the last build (CPU grids; 0 on devices): only ever
  ** prefetched, never read, so a kernel reading another array or the
  ** array freed since cost nothing but the prefetch */
  const unsigned char *points;
  int64_t stride;
} wf_hgrid;

/* The CPU prefetches the positions of candidates a few ahead of the one
** yielded: kernels read p[j] for each, scattered over the points array
** (one cache line per candidate, mostly L2/L3 misses), and the loads are
** too close together for the out-of-order window to overlap. Ahead in
** point_ids runs past the cell being visited into the next cells of the
** row, which the next queries of a launch in cell order read: those are
** the misses that reach DRAM. CUDA and the emulated device (WF_SHIM_H)
** keep the plain path. */
#if !defined(__CUDACC__) && !defined(WF_SHIM_H) && defined(__GNUC__)
#define WF_HGRID_AHEAD 8
#endif

/* The per-thread state of `for j in weft.hash_grid_query(id, p, r)`:
** the cells of the box, visited x fastest, then y, then z (Warp's order),
** each axis as a count from its first (wrapped) cell, so no cell repeats
** and no division runs per cell. What the steps read of the grid is copied
** here at the start: a kernel's loop then keeps it in registers, where
** loads through the grid's id (not known to be dereferenceable) would be
** repeated on every candidate. */
typedef struct wf_hgrid_query {
  const int32_t *ids, *starts; /* the grid's point_ids and cell_starts */
  const unsigned char *points; /* its points (prefetched only) */
  int64_t stride;
  int32_t last; /* npoints - 1, the last id to prefetch */
  int32_t dim_x, dim_y, dim_z;
  int32_t cx0, cy0;   /* the first cell in x and y, wrapped */
  int32_t nx, ny, nz; /* cells per axis (at most the grid's dims) */
  int32_t ix, iy, iz; /* visited so far on each axis */
  int32_t cx, cy, cz; /* the cell being visited, wrapped */
  int32_t at, end;    /* its slice of point_ids */
  int32_t cur;        /* the candidate _get returns (the nested form: the slice's first) */
} wf_hgrid_query;

/* floor(v) as a cell coordinate, saturating instead of overflowing. The
** common range takes a truncation and a compare (floorf is a libm call
** on baseline x86-64, and queries and builds take 3 to 6 per point). */
WF_GEOM_FN int32_t wf_hgrid_coord(float v) {
  if (v > -1073741824.0f && v < 1073741824.0f) { /* NaN fails both */
    const int32_t t = (int32_t)v;
    return t - (v < (float)t);
  }
  const float c = floorf(v);
  if (c >= 2147483520.0f) return 2147483646;
  if (c >= -2147483648.0f) return (int32_t)c;
  return c < -2147483648.0f ? (-2147483647 - 1) : 0; /* NaN lands in cell 0 */
}

WF_GEOM_FN int32_t wf_hgrid_wrap(int32_t x, int32_t d) {
  if ((uint32_t)x < (uint32_t)d) return x; /* inside the grid already */
  int32_t c = x % d;
  return c < 0 ? c + d : c;
}

WF_GEOM_FN int32_t wf_hgrid_cell(const wf_hgrid *g, int32_t x, int32_t y, int32_t z) {
  return (wf_hgrid_wrap(z, g->dim_z) * g->dim_y + wf_hgrid_wrap(y, g->dim_y)) * g->dim_x +
         wf_hgrid_wrap(x, g->dim_x);
}

/* cells from lo to hi inclusive, at most d (a box wider than the grid
** visits each cell once); 0 when hi < lo */
WF_GEOM_FN int32_t wf_hgrid_span(int32_t lo, int32_t hi, int32_t d) {
  const int64_t n = (int64_t)hi - (int64_t)lo + 1;
  return n <= 0 ? 0 : n > d ? d : (int32_t)n;
}

WF_GEOM_FN void wf_hgrid_enter(wf_hgrid_query *q) {
  const int32_t c = (q->cz * q->dim_y + q->cy) * q->dim_x + q->cx;
  q->at = q->starts[c];
  q->end = q->starts[c + 1];
}

/* Start the row (cy, cz) at its first cell. A row that does not wrap
** around the grid in x holds consecutive cells, whose points are one
** slice of point_ids: take it at once (the same candidates, in order). */
WF_GEOM_FN void wf_hgrid_enter_row(wf_hgrid_query *q) {
  q->ix = 0;
  q->cx = q->cx0;
  if (q->cx0 + q->nx <= q->dim_x) {
    const int32_t c = (q->cz * q->dim_y + q->cy) * q->dim_x + q->cx0;
    q->at = q->starts[c];
    q->end = q->starts[c + q->nx];
    q->ix = q->nx - 1;
    return;
  }
  wf_hgrid_enter(q);
}

#ifdef WF_HGRID_AHEAD
/* Prefetch what a query reads first before it yields anything: queries in
** a random order (thread i at point i) miss on nearly everything, the
** cell starts of each row, then its point ids, then the positions. Three
** passes over the first WF_HGRID_ROWS rows of the box (each row's
** unwrapped part): their cell starts, the first line of their point ids,
** and the positions of their first WF_HGRID_FIRST candidates. No branch
** here waits on a loaded value (the candidate indices are clamped, not
** tested), so the misses overlap, and a query whose cells are cached (in
** cell order) pays a few dozen instructions. */
#define WF_HGRID_ROWS 9
#define WF_HGRID_FIRST 4
WF_GEOM_FN void wf_hgrid_prefetch_box(const wf_hgrid_query *q) {
  const int32_t nx = q->cx0 + q->nx <= q->dim_x ? q->nx : q->dim_x - q->cx0;
  int32_t rows[WF_HGRID_ROWS], n = 0;
  for (int32_t iz = 0, cz = q->cz; iz < q->nz && n < WF_HGRID_ROWS;
       iz++, cz = cz + 1 == q->dim_z ? 0 : cz + 1)
    for (int32_t iy = 0, cy = q->cy0; iy < q->ny && n < WF_HGRID_ROWS;
         iy++, cy = cy + 1 == q->dim_y ? 0 : cy + 1) {
      const int32_t c = (cz * q->dim_y + cy) * q->dim_x + q->cx0;
      rows[n++] = c;
      __builtin_prefetch(q->starts + c);
      __builtin_prefetch(q->starts + c + nx);
    }
  for (int32_t k = 0; k < n; k++)
    __builtin_prefetch(q->ids + q->starts[rows[k]]);
  for (int32_t k = 0; k < n; k++) {
    /* candidates s .. e; e = s - 1 >= -1 for an empty row */
    const int32_t s = q->starts[rows[k]], e = q->starts[rows[k] + nx] - 1;
    for (int32_t t = 0; t < WF_HGRID_FIRST; t++) {
      const int32_t f = s + t < e ? s + t : e;
      __builtin_prefetch(q->points + q->stride * q->ids[f < 0 ? 0 : f]);
    }
  }
}
#endif

WF_GEOM_FN void wf_hgrid_query_begin(wf_hgrid_query *q, const wf_hgrid *g, float px, float py,
                                     float pz, float r) {
  const float s = g->inv_width;
  const int32_t x0 = wf_hgrid_coord((px - r) * s), y0 = wf_hgrid_coord((py - r) * s),
                z0 = wf_hgrid_coord((pz - r) * s);
  q->ids = g->point_ids;
  q->starts = g->cell_starts;
  q->points = g->points;
  q->stride = g->stride;
  q->last = g->npoints - 1;
  q->dim_x = g->dim_x, q->dim_y = g->dim_y, q->dim_z = g->dim_z;
  q->nx = wf_hgrid_span(x0, wf_hgrid_coord((px + r) * s), g->dim_x);
  q->ny = wf_hgrid_span(y0, wf_hgrid_coord((py + r) * s), g->dim_y);
  q->nz = wf_hgrid_span(z0, wf_hgrid_coord((pz + r) * s), g->dim_z);
  q->cx = q->cx0 = wf_hgrid_wrap(x0, g->dim_x);
  q->cy = q->cy0 = wf_hgrid_wrap(y0, g->dim_y);
  q->cz = wf_hgrid_wrap(z0, g->dim_z);
  q->ix = q->iy = q->iz = 0;
  q->at = q->end = 0;
  if (g->npoints == 0 || q->nx == 0 || q->ny == 0) q->nz = 0; /* nothing to visit */
  if (q->nz <= 0) return;
#ifdef WF_HGRID_AHEAD
  wf_hgrid_prefetch_box(q);
#endif
  wf_hgrid_enter_row(q);
}

/* Past the cell or row slice taken: the next cell of a wrapping row, or
** the next row; 0 when the box is done. */
WF_GEOM_FN int wf_hgrid_query_step(wf_hgrid_query *q) {
  if (q->iz >= q->nz) return 0;
  if (++q->ix < q->nx) { /* the next cell of a wrapping row */
    if (++q->cx == q->dim_x) q->cx = 0;
    wf_hgrid_enter(q);
    return 1;
  }
  if (++q->iy < q->ny) {
    if (++q->cy == q->dim_y) q->cy = 0;
  } else {
    q->iy = 0;
    q->cy = q->cy0;
    if (++q->iz >= q->nz) return 0;
    if (++q->cz == q->dim_z) q->cz = 0;
  }
  wf_hgrid_enter_row(q);
  return 1;
}

/* The id of candidate k (an index into point_ids), prefetching the
** position of the one WF_HGRID_AHEAD further on. */
WF_GEOM_FN int32_t wf_hgrid_query_id(const wf_hgrid_query *q, int32_t k) {
#ifdef WF_HGRID_AHEAD
  const int32_t f = k + WF_HGRID_AHEAD;
  __builtin_prefetch(q->points + q->stride * q->ids[f < q->last ? f : q->last]);
#endif
  return q->ids[k];
}

/* The next candidate into *j; 0 when the query is done. */
WF_GEOM_FN int wf_hgrid_query_next(wf_hgrid_query *q, int32_t *j) {
  do {
    if (q->at < q->end) {
      *j = wf_hgrid_query_id(q, q->at++);
      return 1;
    }
  } while (wf_hgrid_query_step(q));
  return 0;
}

/* The nested form of the loop (src/front/native.c): the next non-empty
** slice of point_ids, candidates cur .. end - 1 (a cell, or the cells of a
** row that does not wrap); 0 when the query is done. */
WF_GEOM_FN int wf_hgrid_query_slice(wf_hgrid_query *q) {
  do {
    if (q->at < q->end) {
      q->cur = q->at;
      q->at = q->end;
      return 1;
    }
  } while (wf_hgrid_query_step(q));
  return 0;
}

/* weft.hash_grid_point_id(id, i): the i-th point in cell order */
WF_GEOM_FN int32_t wf_hgrid_point_id(const wf_hgrid *g, int32_t i) {
  return (i >= 0 && i < g->npoints) ? g->point_ids[i] : -1;
}

/* ---- kernel builtins: the rows of src/geom/native.h (result pointer,
** then a pointer per argument). `for j in weft.hash_grid_query(id, p, r)`
** is the iterator triple hash_grid_query / _next / _get. An id of 0 is
** no grid: the query yields nothing, point ids read -1. ---- */
WF_GEOM_FN const wf_hgrid *wf_hgrid_arg(const void *id) {
  return (const wf_hgrid *)(uintptr_t) * (const uint64_t *)id;
}
WF_GEOM_FN void wf_nat_hash_grid_query(void *state, void *res, const void *id, const void *p,
                                       const void *r) {
  wf_hgrid_query *q = (wf_hgrid_query *)state;
  const wf_hgrid *g = wf_hgrid_arg(id);
  const float *pt = (const float *)p;
  (void)res; /* the handle is the state's address (native.h) */
  if (!g) {  /* no grid: done before it starts */
    q->at = q->end = q->iz = q->nz = 0;
    return;
  }
  wf_hgrid_query_begin(q, g, pt[0], pt[1], pt[2], *(const float *)r);
}
WF_GEOM_FN void wf_nat_hash_grid_query_next(void *res, const void *h) {
  wf_hgrid_query *q = (wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  int32_t j = -1;
  *(unsigned char *)res = (unsigned char)wf_hgrid_query_next(q, &j);
  q->cur = j;
}
WF_GEOM_FN void wf_nat_hash_grid_query_get(void *res, const void *h) {
  const wf_hgrid_query *q = (const wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(int32_t *)res = q->cur;
}
/* the nested form: `while slice(h) do for k = first(h), last(h) do
** local j = id(h, k) ...` */
WF_GEOM_FN void wf_nat_hash_grid_query_slice(void *res, const void *h) {
  wf_hgrid_query *q = (wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(unsigned char *)res = (unsigned char)wf_hgrid_query_slice(q);
}
WF_GEOM_FN void wf_nat_hash_grid_query_first(void *res, const void *h) {
  wf_nat_hash_grid_query_get(res, h); /* the slice's first: cur */
}
WF_GEOM_FN void wf_nat_hash_grid_query_last(void *res, const void *h) {
  const wf_hgrid_query *q = (const wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(int32_t *)res = q->end - 1;
}
WF_GEOM_FN void wf_nat_hash_grid_query_id(void *res, const void *h, const void *k) {
  const wf_hgrid_query *q = (const wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(int32_t *)res = wf_hgrid_query_id(q, *(const int32_t *)k);
}
WF_GEOM_FN void wf_nat_hash_grid_point_id(void *res, const void *id, const void *i) {
  const wf_hgrid *g = wf_hgrid_arg(id);
  *(int32_t *)res = g ? wf_hgrid_point_id(g, *(const int32_t *)i) : -1;
}

/* ---- host side (hashgrid.c), the FFI surface of lua/weft/hashgrid.lua ---- */
#if !defined(__CUDACC__) && !defined(WF_HOST_SHIM)
#include <stddef.h>

#include "weft.h"

typedef struct wf_hashgrid {
  wf_hgrid desc; /* its address is the id */
  int32_t *ids, *starts, *cells;
  int64_t capacity; /* points the arrays hold */
  uint64_t *pairs;  /* build scratch: cell << 32 | point, by bucket of cells */
} wf_hashgrid;

WEFT_API int wf_hashgrid_new(int dim_x, int dim_y, int dim_z, wf_hashgrid **out, char *err,
                             size_t errlen);
WEFT_API int wf_hashgrid_reserve(wf_hashgrid *h, int64_t n, char *err, size_t errlen);
/* points: n vec3 of float at base + i * stride bytes */
WEFT_API int wf_hashgrid_build(wf_hashgrid *h, const void *points, int64_t n, int64_t stride,
                               double radius, int nthreads, char *err, size_t errlen);
WEFT_API void wf_hashgrid_free(wf_hashgrid *h);
/* Device copies: the descriptor pointing at uploaded arrays, and the host
** arrays (which: 0 point ids, 1 cell starts) with their lengths. */
WEFT_API void wf_hashgrid_device_desc(const wf_hashgrid *h, uint64_t dev_ids, uint64_t dev_starts,
                                      void *out);
WEFT_API const int32_t *wf_hashgrid_array(const wf_hashgrid *h, int which, int64_t *n);
#endif

#endif
