/*
** hashgrid.c -- building a hash grid on the host: a stable sort of the
** points by cell, a counting sort by bucket of cells and then one inside
** each bucket, every pass on all threads.
**
**   cells   the cell of every point, and per thread a histogram of the
**           buckets (runs of 2^shift consecutive cells, at most 2^BUCKET_BITS)
**   spread  the points as (cell, point) pairs into their buckets, each
**           thread from its own offsets (so in point order in a bucket)
**   sort    per bucket: counts of its cells, running ends, then its
**           points placed backwards from each cell's end
**
** One counting sort over all the cells (2M for a 128^3 grid: 8 MB of
** starts) incremented and read back a random cell per point, missing the
** caches and the TLB every time: on one thread, 1M uniform points took
** 4-10 ms to count and 7-28 ms to place, the most when the other core
** was busy. A bucket's starts (16 KB for that grid) and its points stay
** in cache while it is sorted, and the spread writes one sequential
** stream per bucket.
*/
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "geom/hashgrid.h"

#include <sys/mman.h>
#define MAX_THREADS 64

/* Arrays that queries read at random: on 2 MB pages where the kernel
** gives them (transparent huge pages in madvise mode), so a query's dozen
** scattered reads do not each miss the TLB as well. */
static void *big_alloc(size_t n, int zero) {
  void *p = NULL;
  if (n >= ((size_t)4 << 20)) {
    const size_t huge = (size_t)2 << 20;
    if (posix_memalign(&p, huge, (n + huge - 1) & ~(huge - 1))) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, (n + huge - 1) & ~(huge - 1), MADV_HUGEPAGE);
#endif
    if (zero) memset(p, 0, n);
    return p;
  }
  return zero ? calloc(n, 1) : malloc(n);
}
#define BUCKET_BITS 9 /* at most 2^9 buckets */

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
  if (h) h->starts = big_alloc(((size_t)ncells + 1) * sizeof(int32_t), 1);
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
  free(h->pairs);
  free(h->xyz);
  free(h->sorted);
  free(h);
}

int wf_hashgrid_reserve(wf_hashgrid *h, int64_t n, char *err, size_t errlen) {
  if (n < 0 || n > INT32_MAX)
    return fail(err, errlen, "HashGrid: cannot hold %lld points (0 to 2^31 - 1)", (long long)n);
  if (n <= h->capacity && h->sorted) return 0;
  int32_t *ids = big_alloc((size_t)n * sizeof(int32_t), 0),
          *cells = malloc((size_t)n * sizeof(int32_t));
  uint64_t *pairs = malloc((size_t)n * sizeof(uint64_t));
  float *xyz = malloc(3 * (size_t)n * sizeof(float) + 1);
  /* a record per point and 8 of padding, which queries read but never
  ** keep (zeroed here: no uninitialised reads) */
  const int64_t nsorted = n + 8;
  float *sorted = big_alloc(4 * (size_t)nsorted * sizeof(float), 0);
  if (!ids || !cells || !pairs || !xyz || !sorted) {
    free(ids);
    free(cells);
    free(pairs);
    free(xyz);
    free(sorted);
    return fail(err, errlen, "HashGrid: out of memory for %lld points", (long long)n);
  }
  memset(sorted + 4 * n, 0, 32 * sizeof(float));
  free(h->ids);
  free(h->cells);
  free(h->pairs);
  free(h->xyz);
  free(h->sorted);
  h->ids = ids, h->cells = cells, h->pairs = pairs, h->xyz = xyz, h->sorted = sorted;
  h->capacity = n;
  h->desc.point_ids = ids;
  h->desc.sorted = sorted;
  h->desc.nsorted = nsorted;
  return 0;
}

/* The state of one build, shared by its threads. */
typedef struct sort {
  const wf_hgrid *g;
  const unsigned char *points;
  int64_t stride, n, ncells;
  int T, shift, nbuckets;
  int32_t *cells, *ids, *starts;
  float *sorted; /* records: x, y, z, the point's index */
  uint64_t *pairs;
  float *xyz;     /* the positions beside pairs (x, y, z each) */
  int64_t *at;    /* [T][nbuckets]: thread t's count, then its next slot, in bucket b */
  int64_t *begin; /* [nbuckets + 1]: where each bucket's pairs start */
  int *first;     /* [T + 1]: the buckets thread t sorts */
} sort;

typedef struct job {
  sort *S;
  int t;
} job;

/* The cell of point p (scaled by s), as wf_hgrid_cell(wf_hgrid_coord ..)
** gives it. Points inside the grid (the common case) take vector
** arithmetic: GCC turns the scalar t - (v < (float)t) of wf_hgrid_coord
** into an inline floorf and back (19 instructions a coordinate); the
** rest go through hashgrid.h. */
#if defined(__SSE2__)
static inline int32_t cell_of(const wf_hgrid *g, const float *p, float s, __m128i dims) {
  /* x, y as one 8-byte load (an unaligned, may_alias access) and z */
  const __m128 xy = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)p)), z = _mm_load_ss(p + 2);
  const __m128 v = _mm_mul_ps(_mm_movelh_ps(xy, z), _mm_set1_ps(s)); /* lane 3: 0 */
  const __m128 a = _mm_and_ps(v, _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)));
  /* |v| < 2^30: wf_hgrid_coord's range for the truncation (NaN fails) */
  const int ok = _mm_movemask_ps(_mm_cmplt_ps(a, _mm_set1_ps(1073741824.0f)));
  const __m128i t = _mm_cvttps_epi32(v);
  const __m128i f = _mm_add_epi32(t, _mm_castps_si128(_mm_cmplt_ps(v, _mm_cvtepi32_ps(t))));
  const __m128i in = _mm_andnot_si128(_mm_cmplt_epi32(f, _mm_setzero_si128()),
                                      _mm_cmplt_epi32(f, dims)); /* 0 <= f < dim, no wrap */
  if (ok == 15 && _mm_movemask_ps(_mm_castsi128_ps(in)) == 15) {
    const int32_t ix = _mm_cvtsi128_si32(f), iy = _mm_cvtsi128_si32(_mm_shuffle_epi32(f, 1)),
                  iz = _mm_cvtsi128_si32(_mm_shuffle_epi32(f, 2));
    return (iz * g->dim_y + iy) * g->dim_x + ix;
  }
  return wf_hgrid_cell(g, wf_hgrid_coord(p[0] * s), wf_hgrid_coord(p[1] * s),
                       wf_hgrid_coord(p[2] * s));
}
#else
static inline int32_t cell_of(const wf_hgrid *g, const float *p, float s, int dims) {
  return wf_hgrid_cell(g, wf_hgrid_coord(p[0] * s), wf_hgrid_coord(p[1] * s),
                       wf_hgrid_coord(p[2] * s));
}
#endif

/* Pass 1: the cells of thread t's points and its bucket counts (the
** grid's fields in locals: stores to cells[], int32_t as the dims are,
** would reload them for every point). */
static void *cells_of(void *arg) {
  const job *J = arg;
  const sort *S = J->S;
  const wf_hgrid g = *S->g;
  const int shift = S->shift;
  const unsigned char *points = S->points;
  const int64_t stride = S->stride, end = S->n * (J->t + 1) / S->T;
  int32_t *cells = S->cells;
  int64_t *count = S->at + (size_t)J->t * (size_t)S->nbuckets;
#if defined(__SSE2__)
  const __m128i dims = _mm_setr_epi32(g.dim_x, g.dim_y, g.dim_z, 1);
#else
  const int dims = 0;
#endif
  memset(count, 0, (size_t)S->nbuckets * sizeof *count);
  for (int64_t i = S->n * J->t / S->T; i < end; i++) {
    const int32_t c = cell_of(&g, (const float *)(points + i * stride), g.inv_width, dims);
    cells[i] = c;
    count[c >> shift]++;
  }
  return NULL;
}

/* Pass 2: thread t's points into their buckets, from its next slots,
** their positions beside them (read here in order, where the placement
** below would read them scattered). */
static void *spread(void *arg) {
  const job *J = arg;
  const sort *S = J->S;
  int64_t *next = S->at + (size_t)J->t * (size_t)S->nbuckets;
  for (int64_t i = S->n * J->t / S->T; i < S->n * (J->t + 1) / S->T; i++) {
    const uint32_t c = (uint32_t)S->cells[i];
    const int64_t k = next[c >> S->shift]++;
    const float *pt = (const float *)(S->points + i * S->stride);
    S->pairs[k] = (uint64_t)c << 32 | (uint32_t)i;
    S->xyz[3 * k] = pt[0], S->xyz[3 * k + 1] = pt[1], S->xyz[3 * k + 2] = pt[2];
  }
  return NULL;
}

/* Pass 3: thread t's buckets, each a stable counting sort of its cells:
** counts, running ends, then the points placed backwards from each cell's
** end (later points last), which leaves starts[c] at the start of c, and
** their records beside them in sorted. */
static void *sort_buckets(void *arg) {
  const job *J = arg;
  const sort *S = J->S;
  int32_t *starts = S->starts;
  for (int b = S->first[J->t]; b < S->first[J->t + 1]; b++) {
    const int64_t c0 = (int64_t)b << S->shift, c1 = c0 + ((int64_t)1 << S->shift);
    const int64_t end = c1 < S->ncells ? c1 : S->ncells;
    const uint64_t *p = S->pairs + S->begin[b], *q = S->pairs + S->begin[b + 1];
    memset(starts + c0, 0, (size_t)(end - c0) * sizeof(int32_t));
    for (const uint64_t *x = p; x < q; x++)
      starts[*x >> 32]++;
    int32_t run = (int32_t)S->begin[b];
    for (int64_t c = c0; c < end; c++)
      run += starts[c], starts[c] = run;
    for (const uint64_t *x = q; x-- > p;) {
      const int32_t i = (int32_t)(uint32_t)*x, k = --starts[*x >> 32];
      const float *pt = S->xyz + 3 * (x - S->pairs);
      S->ids[k] = i;
      float *rec = S->sorted + 4 * (int64_t)k;
      rec[0] = pt[0], rec[1] = pt[1], rec[2] = pt[2];
      memcpy(rec + 3, &i, sizeof i);
    }
  }
  return NULL;
}

/* fn for each of the T jobs, jobs 1.. on threads of their own (or here,
** when a thread cannot start). */
static void run(int T, void *(*fn)(void *), job *jobs) {
  pthread_t tids[MAX_THREADS];
  int running[MAX_THREADS] = {0};
  for (int t = 1; t < T; t++)
    running[t] = pthread_create(&tids[t], NULL, fn, &jobs[t]) == 0;
  fn(&jobs[0]);
  for (int t = 1; t < T; t++) {
    if (running[t])
      pthread_join(tids[t], NULL);
    else
      fn(&jobs[t]);
  }
}

int wf_hashgrid_build(wf_hashgrid *h, const void *points, int64_t n, int64_t stride, double radius,
                      int nthreads, char *err, size_t errlen) {
  if (!(radius > 0) || radius > 3.0e38)
    return fail(err, errlen, "HashGrid:build: radius must be positive and finite (got %g)", radius);
  if (wf_hashgrid_reserve(h, n, err, errlen)) return -1;
  wf_hgrid *g = &h->desc;
  g->cell_width = (float)radius;
  g->inv_width = 1.0f / (float)radius;
  sort S = {.g = g,
            .points = points,
            .stride = stride,
            .n = n,
            .cells = h->cells,
            .ids = h->ids,
            .starts = h->starts,
            .sorted = h->sorted,
            .pairs = h->pairs,
            .xyz = h->xyz};
  S.ncells = (int64_t)g->dim_x * g->dim_y * g->dim_z;
  while ((S.ncells - 1) >> S.shift >> BUCKET_BITS)
    S.shift++;
  S.nbuckets = (int)((S.ncells - 1) >> S.shift) + 1;
  S.T = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
  if (n < 65536) S.T = 1;
  S.at = malloc(sizeof(int64_t) * ((size_t)S.T * (size_t)S.nbuckets + (size_t)S.nbuckets + 1));
  S.first = malloc(sizeof(int) * (size_t)(S.T + 1));
  if (!S.at || !S.first) {
    free(S.at);
    free(S.first);
    return fail(err, errlen, "HashGrid:build: out of memory");
  }
  S.begin = S.at + (size_t)S.T * (size_t)S.nbuckets;
  job jobs[MAX_THREADS];
  for (int t = 0; t < S.T; t++)
    jobs[t] = (job){&S, t};
  run(S.T, cells_of, jobs);
  /* each thread's slots in a bucket after those of the threads before
  ** it, so the points of a bucket stay in order */
  int64_t total = 0;
  for (int b = 0; b < S.nbuckets; b++) {
    S.begin[b] = total;
    for (int t = 0; t < S.T; t++) {
      int64_t *a = &S.at[(size_t)t * (size_t)S.nbuckets + (size_t)b], c = *a;
      *a = total, total += c;
    }
  }
  S.begin[S.nbuckets] = total;
  /* the buckets in runs of about n / T points per thread */
  for (int t = 0, b = 0; t <= S.T; t++) {
    while (b < S.nbuckets && S.begin[b] < n * t / S.T)
      b++;
    S.first[t] = t == S.T ? S.nbuckets : b;
  }
  run(S.T, spread, jobs);
  run(S.T, sort_buckets, jobs);
  h->starts[S.ncells] = (int32_t)n;
  free(S.at);
  free(S.first);
  g->npoints = (int32_t)n;
  g->points = points;
  g->stride = stride;
  return 0;
}

/* ---- device copies (lua/weft/hashgrid.lua uploads the arrays) ---- */

/* The descriptor of a copy whose point ids, cell starts and sorted
** positions live at dev_ids, dev_starts and dev_sorted in another address
** space. */
void wf_hashgrid_device_desc(const wf_hashgrid *h, uint64_t dev_ids, uint64_t dev_starts,
                             uint64_t dev_sorted, void *out) {
  wf_hgrid d = h->desc;
  d.point_ids = (const int32_t *)(uintptr_t)dev_ids;
  d.cell_starts = (const int32_t *)(uintptr_t)dev_starts;
  d.sorted = (const float *)(uintptr_t)dev_sorted;
  d.points = NULL; /* host memory: nothing to prefetch there */
  memcpy(out, &d, sizeof d);
}
/* which: 0 the point ids (npoints), 1 the cell starts (ncells + 1), 2 the
** sorted records (4 words a point; none before the
** first build or reserve) */
const int32_t *wf_hashgrid_array(const wf_hashgrid *h, int which, int64_t *n) {
  switch (which) {
  case 0: *n = h->desc.npoints; return h->ids;
  case 1: *n = (int64_t)h->desc.dim_x * h->desc.dim_y * h->desc.dim_z + 1; return h->starts;
  default:
    *n = h->sorted ? 4 * h->desc.nsorted : 0;
    return (const int32_t *)(const void *)h->sorted;
  }
}
