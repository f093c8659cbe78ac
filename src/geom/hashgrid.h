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
**   sorted       the positions in the same order, a record of 4 words
**                per point (x, y, z as floats, then the point's index),
**                with 8 records of padding after the last point
**
** A query visits every cell that the box p +- r touches (each cell once,
** even when the box wraps around the grid) and yields those of its points
** whose position at the build lies within r of p, give or take rounding
** (WF_HGRID_SLACK): a superset of what a kernel's own distance test keeps,
** however it rounds, and in the order of the cells. Warp yields every
** point of those cells; the kernel filters them either way, and the
** distance test here runs on positions stored beside each other (8 at
** once on the CPU) instead of one scattered read of the kernel's array
** per candidate, about five times as many as it keeps.
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
  const float *sorted; /* the positions in cell order (above) */
  float cell_width, inv_width;
  int32_t dim_x, dim_y, dim_z, npoints;
  int64_t nsorted; /* records sorted holds (capacity + 8) */
  /* the points of the last build (CPU grids; 0 on devices): only ever
  ** prefetched, never read, so a kernel reading another array or the
  ** array freed since cost nothing but the prefetch */
  const unsigned char *points;
  int64_t stride;
} wf_hgrid;

/* r^2 grows by this part of itself (and FLT_MIN, for radii whose square
** is subnormal) before it is compared: a kernel's own test may round
** differently (length(d) <= r, a fused multiply-add, another order of
** the sum: a few units in the last place) and must never see a point
** the query dropped. */
#define WF_HGRID_SLACK (1.0f / 65536.0f)

/* The CPU prefetches what queries read before the loads come due: the
** records of a batch of rows once their slices are known (queries in a
** random order miss on nearly everything), the kernel's positions of the
** points a query keeps, and hash_grid_point_id's point a few ahead
** (kernels in cell order read p[hash_grid_point_id(id, tid)], a
** scattered read per thread). CUDA and the emulated device (WF_SHIM_H)
** keep the plain path. */
#if !defined(__CUDACC__) && !defined(WF_SHIM_H) && defined(__GNUC__)
#define WF_HGRID_PREFETCH(p) __builtin_prefetch(p)
#define WF_HGRID_AHEAD 16
#else
#define WF_HGRID_PREFETCH(p) ((void)0)
#endif

/* Clang's vectors (the CPU's bitcode, src/geom/inline_bc.c) test 8
** candidates at once; GCC's libweft copy, CUDA and the emulated device
** test one at a time, with the same float operations in the same order,
** so every backend yields the same points. */
#if defined(__clang__) && !defined(__CUDACC__) && !defined(WF_SHIM_H)
#define WF_HGRID_VEC 1
#endif

/* Points kept but not yet yielded: a buffer refilled from the box's
** cells whenever it runs dry, filtered 8 candidates at a time (a fill
** stops with room for 8 left). */
#define WF_HGRID_BUF 32

/* The per-thread state of `for j in weft.hash_grid_query(id, p, r)`:
** the walk over the cells of the box and the points kept. The walk takes
** the box a row of cells at a time (y, then z, from the first cell of
** each, wrapped; so no cell repeats and no division runs per row): a row
** is one slice of point_ids, or two where it wraps around the grid in x
** (cells cx0 .. dim_x - 1, then 0 ..), in Warp's order of cells. What the
** walk reads of the grid is copied here at the start; a fill keeps the
** walk's moving parts in locals and stores them back once (stores into
** buf could otherwise alias any int32_t field, which the compiler would
** reload after each). */
typedef struct wf_hgrid_walk {
  const int32_t *ids, *starts; /* the grid's point_ids and cell_starts */
  const float *sorted;         /* its records of positions */
  const unsigned char *points; /* its points (prefetched only) */
  int64_t stride;
  float px, py, pz, r2; /* the query point and the bound on squared distances */
  int32_t dim_x, dim_y, dim_z;
  int32_t cx0, n1, n2; /* a row's first cell, the cells of its two runs */
  int32_t cy0, ny, nz; /* the first row in y (wrapped), rows per axis */
  int32_t iy, iz;      /* rows visited so far on each axis */
  int32_t cy, cz;      /* the row being visited, wrapped */
  int32_t base;        /* its cell 0: (cz * dim_y + cy) * dim_x */
  int32_t second;      /* its second run is still to take */
  int32_t at, end;     /* the slice of point_ids still to filter */
  /* the box wraps on no axis (wf_hgrid_fill_flat): then iy counts the
  ** rows taken, cy and cz are the next row's y index and the cell cx0 of
  ** its plane's first row, base the box's first cell */
  int32_t flat;
} wf_hgrid_walk;

typedef struct wf_hgrid_query {
  wf_hgrid_walk w;
  int32_t n, k; /* points in buf, the next one to yield */
  int32_t cur;  /* the point _get returns */
  int32_t buf[WF_HGRID_BUF];
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

/* Take the row at base: its first run. */
WF_GEOM_FN void wf_hgrid_enter_row(wf_hgrid_walk *q) {
  q->at = q->starts[q->base + q->cx0];
  q->end = q->starts[q->base + q->cx0 + q->n1];
  q->second = q->n2 > 0;
}

/* The cells of p - r and p + r, scaled by s: c[0..2] and c[3..5]. */
#ifdef WF_HGRID_VEC
typedef float wf_hgrid_v4f __attribute__((vector_size(16)));
typedef int32_t wf_hgrid_v4i __attribute__((vector_size(16)));
typedef _Bool wf_hgrid_b4 __attribute__((ext_vector_type(4)));
#endif
WF_GEOM_FN void wf_hgrid_box(float s, float px, float py, float pz, float r, int32_t *c) {
#ifdef WF_HGRID_VEC
  { /* all six in wf_hgrid_coord's common range: one vector floor each way */
    const wf_hgrid_v4f p = {px, py, pz, 0.0f}, lo = (p - r) * s, hi = (p + r) * s;
    const float big = 1073741824.0f;
    const wf_hgrid_v4i ok = (lo > -big) & (lo < big) & (hi > -big) & (hi < big);
    const wf_hgrid_b4 okb = __builtin_convertvector(ok, wf_hgrid_b4);
    unsigned char m;
    __builtin_memcpy(&m, &okb, 1);
    if ((m & 15) == 15) {
      const wf_hgrid_v4i a = __builtin_convertvector(__builtin_elementwise_floor(lo), wf_hgrid_v4i),
                         b = __builtin_convertvector(__builtin_elementwise_floor(hi), wf_hgrid_v4i);
      c[0] = a[0], c[1] = a[1], c[2] = a[2], c[3] = b[0], c[4] = b[1], c[5] = b[2];
      return;
    }
  }
#endif
  c[0] = wf_hgrid_coord((px - r) * s), c[1] = wf_hgrid_coord((py - r) * s);
  c[2] = wf_hgrid_coord((pz - r) * s), c[3] = wf_hgrid_coord((px + r) * s);
  c[4] = wf_hgrid_coord((py + r) * s), c[5] = wf_hgrid_coord((pz + r) * s);
}

/* A query with nothing to visit (no grid, no points, an empty box): a
** flat walk over no rows. */
WF_GEOM_FN void wf_hgrid_query_none(wf_hgrid_query *qs) {
  qs->w.flat = 1;
  qs->w.ny = qs->w.nz = qs->w.iy = 0;
  qs->w.at = qs->w.end = 0;
  qs->n = qs->k = 0;
  qs->cur = -1;
}

WF_GEOM_FN void wf_hgrid_query_begin(wf_hgrid_query *qs, const wf_hgrid *g, float px, float py,
                                     float pz, float r) {
  wf_hgrid_walk *q = &qs->w;
  int32_t c[6]; /* the cells of p - r and p + r */
  wf_hgrid_box(g->inv_width, px, py, pz, r, c);
  const int32_t x0 = c[0], y0 = c[1], z0 = c[2];
  q->ids = g->point_ids;
  q->starts = g->cell_starts;
  q->sorted = g->sorted;
  q->points = g->points;
  q->stride = g->stride;
  q->px = px, q->py = py, q->pz = pz;
  q->r2 = r * r * (1.0f + WF_HGRID_SLACK) + 1.17549435e-38f;
  q->dim_x = g->dim_x, q->dim_y = g->dim_y, q->dim_z = g->dim_z;
  const int32_t nx = wf_hgrid_span(x0, c[3], g->dim_x);
  q->ny = wf_hgrid_span(y0, c[4], g->dim_y);
  q->nz = wf_hgrid_span(z0, c[5], g->dim_z);
  q->cx0 = wf_hgrid_wrap(x0, g->dim_x);
  q->n1 = nx < g->dim_x - q->cx0 ? nx : g->dim_x - q->cx0;
  q->n2 = nx - q->n1;
  q->cy = q->cy0 = wf_hgrid_wrap(y0, g->dim_y);
  q->cz = wf_hgrid_wrap(z0, g->dim_z);
  q->iy = q->iz = 0;
  q->base = (q->cz * g->dim_y + q->cy) * g->dim_x;
  q->at = q->end = q->second = 0;
  qs->n = qs->k = 0;
  qs->cur = -1;
  if (g->npoints == 0 || nx == 0 || q->ny == 0 || q->nz == 0) { /* nothing to visit */
    wf_hgrid_query_none(qs);
    return;
  }
  q->flat = q->n2 == 0 && q->cy0 + q->ny <= g->dim_y && q->cz + q->nz <= g->dim_z;
  if (q->flat) { /* rows counted in iy from here on (wf_hgrid_fill_flat) */
    q->base += q->cx0;
    q->cy = 0, q->cz = q->base;
    return;
  }
  wf_hgrid_enter_row(q);
}

/* The squared distance from the query point, in the order and rounding
** every backend uses (CUDA would fuse a multiply-add otherwise). */
#if defined(__CUDACC__)
#define WF_HGRID_D2(dx, dy, dz)                                                                    \
  __fadd_rn(__fadd_rn(__fmul_rn(dx, dx), __fmul_rn(dy, dy)), __fmul_rn(dz, dz))
#else
#define WF_HGRID_D2(dx, dy, dz) ((dx) * (dx) + (dy) * (dy) + (dz) * (dz))
#endif

#ifdef WF_HGRID_VEC
typedef float wf_hgrid_v8f __attribute__((vector_size(32)));
typedef int32_t wf_hgrid_v8i __attribute__((vector_size(32)));
typedef _Bool wf_hgrid_b8 __attribute__((ext_vector_type(8)));

/* Candidates at .. at + 7 (those before end) into buf from n on: their
** 8 records transposed into x, y and z (records k and k + 4 share a
** load, so lanes stay in order), one mask of the kept, then the first two
** of them stored unconditionally (a row of 3 cells holds about 0.6
** neighbours), a loop only past two. Records keep a row's positions and
** ids in one or two cache lines, where planes took four: a query in a
** random order waits on half as many misses. */
WF_GEOM_FN int32_t wf_hgrid_filter8(const wf_hgrid_walk *q, int32_t at, int32_t end, int32_t *buf,
                                    int32_t n) {
#pragma clang fp contract(off)
  const int32_t left = end - at;
  const float *r = q->sorted + 4 * (int64_t)at;
  wf_hgrid_v4f p[8];
  __builtin_memcpy(p, r, sizeof p);
  const wf_hgrid_v8f u0 = __builtin_shufflevector(p[0], p[4], 0, 1, 2, 3, 4, 5, 6, 7),
                     u1 = __builtin_shufflevector(p[1], p[5], 0, 1, 2, 3, 4, 5, 6, 7),
                     u2 = __builtin_shufflevector(p[2], p[6], 0, 1, 2, 3, 4, 5, 6, 7),
                     u3 = __builtin_shufflevector(p[3], p[7], 0, 1, 2, 3, 4, 5, 6, 7);
  const wf_hgrid_v8f t0 = __builtin_shufflevector(u0, u1, 0, 8, 1, 9, 4, 12, 5, 13),
                     t1 = __builtin_shufflevector(u0, u1, 2, 10, 3, 11, 6, 14, 7, 15),
                     t2 = __builtin_shufflevector(u2, u3, 0, 8, 1, 9, 4, 12, 5, 13),
                     t3 = __builtin_shufflevector(u2, u3, 2, 10, 3, 11, 6, 14, 7, 15);
  wf_hgrid_v8f vx = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13),
               vy = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15),
               vz = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
  vx -= q->px, vy -= q->py, vz -= q->pz;
  const wf_hgrid_v8i in = WF_HGRID_D2(vx, vy, vz) <= q->r2;
  const wf_hgrid_b8 bits = __builtin_convertvector(in, wf_hgrid_b8);
  unsigned char b8;
  __builtin_memcpy(&b8, &bits, 1);
  unsigned m = b8 & ~(0xffu << (left < 8 ? left : 8));
  const int32_t c = __builtin_popcount(m);
  const int32_t *ids = (const int32_t *)(const void *)r + 3; /* word 3 of each record */
  const int32_t j0 = ids[4 * (__builtin_ctz(m | 256) & 7)];
  m &= m - 1;
  const int32_t j1 = ids[4 * (__builtin_ctz(m | 256) & 7)];
  buf[n] = j0, buf[n + 1] = j1;
  WF_HGRID_PREFETCH(q->points + q->stride * j0);
  WF_HGRID_PREFETCH(q->points + q->stride * j1);
  if (c > 2)
    for (int32_t t = n + 2; (m &= m - 1) != 0; t++)
      buf[t] = ids[4 * __builtin_ctz(m)];
  return n + c;
}
#else
/* the same, one candidate at a time, storing each and keeping it by
** moving n past it */
WF_GEOM_FN int32_t wf_hgrid_filter8(const wf_hgrid_walk *q, int32_t at, int32_t end, int32_t *buf,
                                    int32_t n) {
  const int32_t e = end - at < 8 ? end : at + 8;
  for (int32_t t = at; t < e; t++) {
    const float *x = q->sorted + 4 * (int64_t)t;
    const float dx = x[0] - q->px, dy = x[1] - q->py, dz = x[2] - q->pz;
    const int32_t j = q->ids[t];
    buf[n] = j;
    WF_HGRID_PREFETCH(q->points + q->stride * j);
    n += WF_HGRID_D2(dx, dy, dz) <= q->r2;
  }
  return n;
}
#endif

/* The fill of a box that wraps on no axis (nearly every query): its
** rows follow each other dim_x cells apart in a plane of cells and
** dim_x * dim_y apart from one plane to the next. Rows go in batches:
** first the slices of up to WF_HGRID_ROWS rows, whose loads do not wait
** on each other (in a random order of queries they all miss, and miss
** together), then their candidates. The walk's row counts rows from the
** box's first, cy and cz hold the next row's y offset and plane (its
** cell cx0 of y offset 0). */
#define WF_HGRID_ROWS 9
WF_GEOM_FN int wf_hgrid_fill_flat(wf_hgrid_query *qs) {
  wf_hgrid_walk *w = &qs->w;
  /* the filter reads the query point and the arrays from a copy no store
  ** can touch, so they stay in registers across the rows */
  const wf_hgrid_walk wq = *w;
  const int32_t *starts = w->starts;
  const int32_t ny = w->ny, nrows = ny * w->nz, dx = w->dim_x, nx = w->n1;
  const int32_t dxy = dx * w->dim_y;
  int32_t n = 0, row = w->iy, at = w->at, end = w->end, iy = w->cy, zb = w->cz;
  for (; at < end; at += 8) { /* the rest of a row a full buffer left */
    if (n > WF_HGRID_BUF - 8) goto full;
    n = wf_hgrid_filter8(&wq, at, end, qs->buf, n);
  }
  while (row < nrows) {
    int32_t s[WF_HGRID_ROWS], e[WF_HGRID_ROWS];
    const int32_t m = nrows - row < WF_HGRID_ROWS ? nrows - row : WF_HGRID_ROWS;
    for (int32_t k = 0; k < m; k++) {
      const int32_t c = zb + iy * dx;
      s[k] = starts[c];
      e[k] = starts[c + nx];
      if (++iy == ny) iy = 0, zb += dxy;
    }
#ifdef WF_HGRID_AHEAD
    /* the first two lines of each row's records, all at once (the
    ** loads below would wait their turn in the out-of-order window) */
    for (int32_t k = 0; k < m; k++) {
      WF_HGRID_PREFETCH(w->sorted + 4 * (int64_t)s[k]);
      WF_HGRID_PREFETCH(w->sorted + 4 * (int64_t)s[k] + 16);
    }
#endif
    for (int32_t k = 0; k < m; k++)
      for (at = s[k], end = e[k]; at < end; at += 8) {
        if (n > WF_HGRID_BUF - 8) { /* rare: the next row's offsets by division */
          row += k + 1;
          iy = row % ny, zb = w->base + row / ny * dxy;
          goto full;
        }
        n = wf_hgrid_filter8(&wq, at, end, qs->buf, n);
      }
    row += m;
  }
  at = end = 0;
full:
  w->at = at, w->end = end, w->iy = row, w->cy = iy, w->cz = zb;
  qs->n = n;
  qs->k = 0;
  return n > 0;
}

/* Refill buf from the cells still to visit: 0 when the box is done and
** nothing was kept. The walk's moving parts live in locals here (and
** are stored back once), the rest is read through w. */
WF_GEOM_FN int wf_hgrid_query_fill(wf_hgrid_query *qs) {
  if (qs->w.flat) return wf_hgrid_fill_flat(qs);
  wf_hgrid_walk *w = &qs->w;
  int32_t n = 0, at = w->at, end = w->end, base = w->base, second = w->second;
  int32_t iy = w->iy, iz = w->iz, cy = w->cy, cz = w->cz;
  if (iz >= w->nz) goto done;
  for (;;) {
    for (; at < end; at += 8) {
      if (n > WF_HGRID_BUF - 8) goto full;
      n = wf_hgrid_filter8(w, at, end, qs->buf, n);
    }
    if (second) { /* the wrapped part of the row */
      second = 0;
      at = w->starts[base];
      end = w->starts[base + w->n2];
      continue;
    }
    if (++iy < w->ny) {
      base += w->dim_x;
      if (++cy == w->dim_y) cy = 0, base -= w->dim_y * w->dim_x;
    } else {
      if (++iz >= w->nz) goto done;
      iy = 0;
      cy = w->cy0;
      if (++cz == w->dim_z) cz = 0;
      base = (cz * w->dim_y + cy) * w->dim_x;
    }
    at = w->starts[base + w->cx0];
    end = w->starts[base + w->cx0 + w->n1];
    second = w->n2 > 0;
  }
done:
  at = end = 0, iz = w->nz;
full:
  w->at = at, w->end = end, w->base = base, w->second = second;
  w->iy = iy, w->iz = iz, w->cy = cy, w->cz = cz;
  qs->n = n;
  qs->k = 0;
  return n > 0;
}

/* The next point into *j; 0 when the query is done. */
WF_GEOM_FN int wf_hgrid_query_next(wf_hgrid_query *q, int32_t *j) {
  if (q->k >= q->n && !wf_hgrid_query_fill(q)) return 0;
  *j = q->buf[q->k++];
  return 1;
}

/* The nested form of the loop (src/front/native.c): a fill, whose points
** the kernel takes as buf[first .. last]; 0 when the query is done. */
WF_GEOM_FN int wf_hgrid_query_slice(wf_hgrid_query *q) {
  return wf_hgrid_query_fill(q);
}

/* weft.hash_grid_point_id(id, i): the i-th point in cell order */
WF_GEOM_FN int32_t wf_hgrid_point_id(const wf_hgrid *g, int32_t i) {
  if (i < 0 || i >= g->npoints) return -1;
#ifdef WF_HGRID_AHEAD
  {
    const int32_t f = i + WF_HGRID_AHEAD < g->npoints ? i + WF_HGRID_AHEAD : g->npoints - 1;
    WF_HGRID_PREFETCH(g->points + g->stride * g->point_ids[f]);
  }
#endif
  return g->point_ids[i];
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
    wf_hgrid_query_none(q);
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
** local j = id(h, k) ...` over the points of a fill */
WF_GEOM_FN void wf_nat_hash_grid_query_slice(void *res, const void *h) {
  wf_hgrid_query *q = (wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(unsigned char *)res = (unsigned char)wf_hgrid_query_slice(q);
}
WF_GEOM_FN void wf_nat_hash_grid_query_first(void *res, const void *h) {
  (void)h;
  *(int32_t *)res = 0;
}
WF_GEOM_FN void wf_nat_hash_grid_query_last(void *res, const void *h) {
  const wf_hgrid_query *q = (const wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(int32_t *)res = q->n - 1;
}
WF_GEOM_FN void wf_nat_hash_grid_query_id(void *res, const void *h, const void *k) {
  const wf_hgrid_query *q = (const wf_hgrid_query *)(uintptr_t) * (const uint64_t *)h;
  *(int32_t *)res = q->buf[*(const int32_t *)k];
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
  float *sorted;    /* desc.sorted (capacity + 8 records of 4 words) */
  int64_t capacity; /* points the arrays hold */
  uint64_t *pairs;  /* build scratch: cell << 32 | point, by bucket of cells */
  float *xyz;       /* and the points' positions in the same order */
} wf_hashgrid;

WEFT_API int wf_hashgrid_new(int dim_x, int dim_y, int dim_z, wf_hashgrid **out, char *err,
                             size_t errlen);
WEFT_API int wf_hashgrid_reserve(wf_hashgrid *h, int64_t n, char *err, size_t errlen);
/* points: n vec3 of float at base + i * stride bytes */
WEFT_API int wf_hashgrid_build(wf_hashgrid *h, const void *points, int64_t n, int64_t stride,
                               double radius, int nthreads, char *err, size_t errlen);
WEFT_API void wf_hashgrid_free(wf_hashgrid *h);
/* Device copies: the descriptor pointing at uploaded arrays, and the host
** arrays (which: 0 point ids, 1 cell starts, 2 sorted positions) with
** their lengths in 32-bit words. */
WEFT_API void wf_hashgrid_device_desc(const wf_hashgrid *h, uint64_t dev_ids, uint64_t dev_starts,
                                      uint64_t dev_sorted, void *out);
WEFT_API const int32_t *wf_hashgrid_array(const wf_hashgrid *h, int which, int64_t *n);
#endif

#endif
