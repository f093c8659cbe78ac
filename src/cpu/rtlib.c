/*
** rtlib.c -- C helpers that generated kernel code calls, and the table of
** symbols the JIT resolves explicitly (these helpers are hidden in libweft,
** so a process symbol search would not find them; libm is listed too so the
** kernels do not depend on what the process happens to export).
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "geom/native.h"
#include "geom/query.h"

/* The first failing thread wins the message slot. */
static int claim(wf_launch_ctx *ctx) {
  int32_t zero = 0;
  return __atomic_compare_exchange_n(&ctx->error, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void wf_cpu_rt_oob(wf_launch_ctx *ctx, const char *where, int64_t index, int32_t axis, int64_t size,
                   const char *array, const char *kernel) {
  if (!claim(ctx)) return;
  snprintf(ctx->msg, sizeof ctx->msg,
           "%s: index %" PRId64 " out of bounds for axis %d with size %" PRId64
           " in array '%s' of kernel '%s'",
           where, index, (int)axis, size, array, kernel);
}

void wf_cpu_rt_trap(wf_launch_ctx *ctx, const char *where, const char *msg) {
  if (!claim(ctx)) return;
  snprintf(ctx->msg, sizeof ctx->msg, "%s: %s", where, msg);
}

void wf_cpu_rt_interrupted(wf_launch_ctx *ctx) {
  wf_launch_interrupted(ctx);
}

/* A growable line buffer (stack first, heap when a line is long). */
typedef struct pbuf {
  char *s;
  size_t n, cap;
  char stack[512];
  int failed;
} pbuf;

static void pb_add(pbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *s2 = b->s == b->stack ? malloc(cap) : realloc(b->s, cap);
    if (!s2) {
      b->failed = 1;
      return;
    }
    if (b->s == b->stack) memcpy(s2, b->stack, b->n);
    b->s = s2;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

/* Format one value for the conversion `conv` with the flags/width/precision
** in spec (without the conversion letter), whatever the value's own type:
** integer conversions of floats truncate, float conversions of integers
** convert, %s prints the value as Lua's tostring would. */
static void pb_value(pbuf *b, const char *spec, char conv, char kind, int64_t bits) {
  char fmt[64], out[128];
  double d;
  memcpy(&d, &bits, sizeof d);
  int n = 0;
  if (conv == 's' || conv == 'v') {
    if (kind == 'b')
      n = snprintf(out, sizeof out, "%s", bits ? "true" : "false");
    else if (kind == 'f')
      n = snprintf(out, sizeof out, "%.14g", d);
    else if (kind == 'u')
      n = snprintf(out, sizeof out, "%" PRIu64, (uint64_t)bits);
    else
      n = snprintf(out, sizeof out, "%" PRId64, bits);
    snprintf(fmt, sizeof fmt, "%ss", spec);
    char out2[256];
    int m = snprintf(out2, sizeof out2, fmt, out);
    pb_add(b, out2, m < 0 ? 0 : (size_t)m < sizeof out2 ? (size_t)m : sizeof out2 - 1);
    return;
  }
  if (strchr("feEgGaA", conv)) {
    double v = kind == 'f' ? d : kind == 'u' ? (double)(uint64_t)bits : (double)bits;
    snprintf(fmt, sizeof fmt, "%s%c", spec, conv);
    n = snprintf(out, sizeof out, fmt, v);
  } else if (strchr("diouxXc", conv)) {
    int64_t v = kind == 'f' ? (int64_t)d : bits;
    if (conv == 'c') {
      snprintf(fmt, sizeof fmt, "%sc", spec);
      n = snprintf(out, sizeof out, fmt, (int)v);
    } else {
      snprintf(fmt, sizeof fmt, "%sll%c", spec, conv);
      n = snprintf(out, sizeof out, fmt, (long long)v);
    }
  }
  if (n > 0) pb_add(b, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1);
}

/* One locked write: lines from threads never interleave. */
static void write_out(const char *a, size_t na, const char *b, size_t nb) {
  flockfile(stdout);
  fwrite(a, 1, na, stdout);
  fwrite(b, 1, nb, stdout);
  fflush(stdout);
  funlockfile(stdout);
}

#define PLINE_CAP (WF_CPU_PLINE_BYTES - (int32_t)sizeof(int32_t))

void wf_cpu_rt_print_flush(void *line) {
  int32_t n;
  memcpy(&n, line, sizeof n);
  if (n <= 0) return;
  write_out((char *)line + sizeof n, (size_t)n, "", 0);
  n = 0;
  memcpy(line, &n, sizeof n);
}

void wf_cpu_rt_print(void *line, const char *fmt, int32_t n, const char *kinds,
                     const int64_t *vals) {
  pbuf b = {.s = NULL, .n = 0, .cap = sizeof b.stack};
  b.s = b.stack;
  b.s[0] = '\0';
  int next = 0;
  const char *p = fmt ? fmt : "";
  while (*p) {
    const char *q = strchr(p, '%');
    if (!q) {
      pb_add(&b, p, strlen(p));
      break;
    }
    pb_add(&b, p, (size_t)(q - p));
    if (q[1] == '%') {
      pb_add(&b, "%", 1);
      p = q + 2;
      continue;
    }
    /* %[flags][width][.prec][length]conv */
    const char *r = q + 1;
    while (*r && strchr("-+ #0", *r))
      r++;
    while (*r >= '0' && *r <= '9')
      r++;
    if (*r == '.') {
      r++;
      while (*r >= '0' && *r <= '9')
        r++;
    }
    char spec[32];
    size_t sl = (size_t)(r - q);
    if (sl >= sizeof spec) sl = sizeof spec - 1;
    memcpy(spec, q, sl);
    spec[sl] = '\0';
    while (*r && strchr("hlLqjzt", *r))
      r++;
    char conv = *r;
    if (!conv || !strchr("diouxXcfeEgGaAsv", conv)) {
      pb_add(&b, q, (size_t)(r - q) + (conv ? 1 : 0));
      p = conv ? r + 1 : r;
      continue;
    }
    if (next < n) {
      pb_value(&b, spec, conv, kinds[next], vals[next]);
      next++;
    }
    p = r + 1;
  }
  /* values beyond the format: tab-separated, like Lua's print */
  int extras = next < n;
  for (; next < n; next++) {
    if (b.n > 0 && b.s[b.n - 1] != '\n') pb_add(&b, "\t", 1);
    pb_value(&b, "%", 's', kinds[next], vals[next]);
  }
  if (extras) pb_add(&b, "\n", 1); /* extras end their line */
  if (!b.failed) {
    /* the thread's pending text and the new text up to its last newline
    ** go out together; the rest waits for its line's end */
    char *pend = line ? (char *)line + sizeof(int32_t) : NULL;
    int32_t pn = 0;
    if (line) memcpy(&pn, line, sizeof pn);
    size_t cut = b.n;
    while (cut > 0 && b.s[cut - 1] != '\n')
      cut--;
    size_t rest = b.n - cut;
    if (!line) {
      write_out(b.s, b.n, "", 0);
    } else if (cut == 0 && (size_t)pn + rest <= (size_t)PLINE_CAP) {
      memcpy(pend + pn, b.s, rest);
      pn += (int32_t)rest;
    } else {
      if (rest > (size_t)PLINE_CAP) cut = b.n, rest = 0; /* too long to hold: out now */
      write_out(pend, (size_t)pn, b.s, cut);
      memcpy(pend, b.s + cut, rest);
      pn = (int32_t)rest;
    }
    if (line) memcpy(line, &pn, sizeof pn);
  }
  if (b.s != b.stack) free(b.s);
}

/* ---------------------------------------------------------------------
** private accumulation (emit.c, "privatized atomics"): a chunk of threads
** adds into zeroed private copies of the arrays that the kernel only
** updates with atomic_add, then folds them into the shared arrays under
** the launch's lock. One decision per launch (the first chunk's), so
** chunks never mix atomics with the locked plain adds.
** --------------------------------------------------------------------- */
#define PRIV_MAX_BYTES ((int64_t)64 << 20) /* larger arrays keep the atomics */

static void priv_lock(wf_launch_ctx *ctx) {
  while (__atomic_exchange_n(&ctx->lock, 1, __ATOMIC_ACQUIRE)) {
    while (__atomic_load_n(&ctx->lock, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
}

static void priv_unlock(wf_launch_ctx *ctx) {
  __atomic_store_n(&ctx->lock, 0, __ATOMIC_RELEASE);
}

/* Compact row-major bytes of an array header, or -1 when it has gaps. */
static int64_t compact_bytes(const wf_array *a) {
  if (!a->data || a->size == 0) return 0;
  int64_t s = a->elsize;
  for (int d = a->ndim - 1; d >= 0; d--) {
    if (a->shape[d] > 1 && a->strides[d] != s) return -1;
    s *= a->shape[d];
  }
  return s;
}

/* The launch-wide decision, made by the first chunk from its own size:
** privatizing costs about a zeroing and a plain add per element and chunk,
** an atomic float add about ten plain ones. */
static int32_t priv_decide(wf_launch_ctx *ctx, int64_t nthreads, int64_t work, int32_t n,
                           wf_array *const *hdrs) {
  int32_t d = __atomic_load_n(&ctx->priv, __ATOMIC_ACQUIRE);
  if (d) return d;
  int64_t bytes = 0;
  int32_t want = 1;
  for (int32_t k = 0; k < n && want == 1; k++) {
    int64_t b = compact_bytes(hdrs[k]);
    if (b < 0) want = 2;
    bytes += b < 0 ? 0 : b;
  }
  if (bytes > PRIV_MAX_BYTES) want = 2;
  int64_t atomics = nthreads > INT64_MAX / (work + 1) ? INT64_MAX : nthreads * work;
  if (want == 1 && atomics < bytes / 32) want = 2;
  int32_t zero = 0;
  if (!__atomic_compare_exchange_n(&ctx->priv, &zero, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return zero;
  return want;
}

int32_t wf_cpu_rt_priv_begin(wf_launch_ctx *ctx, int64_t nthreads, int64_t work, int32_t n,
                             wf_array *const *hdrs, void **data, void **block) {
  *block = NULL;
  if (ctx->serial) {
    /* one thread runs the whole launch: plain adds on the arrays */
    for (int32_t k = 0; k < n; k++)
      data[k] = hdrs[k]->data;
    return 1;
  }
  if (priv_decide(ctx, nthreads, work, n, hdrs) != 1) return 0;
  int64_t bytes = 0;
  for (int32_t k = 0; k < n; k++)
    bytes += (compact_bytes(hdrs[k]) + 63) / 64 * 64;
  char *p = bytes > 0 ? aligned_alloc(64, (size_t)bytes) : NULL;
  if (bytes > 0 && !p) {
    /* no memory: run the chunk on the shared arrays, holding the lock */
    priv_lock(ctx);
    for (int32_t k = 0; k < n; k++)
      data[k] = hdrs[k]->data;
    *block = ctx;
    return 1;
  }
  if (p) memset(p, 0, (size_t)bytes);
  int64_t off = 0;
  for (int32_t k = 0; k < n; k++) {
    int64_t b = compact_bytes(hdrs[k]);
    data[k] = b > 0 ? p + off : NULL;
    off += (b + 63) / 64 * 64;
  }
  *block = p;
  return 1;
}

void wf_cpu_rt_priv_end(wf_launch_ctx *ctx, int32_t n, wf_array *const *hdrs, void *const *data,
                        const int32_t *bits, void *block) {
  if (!block) return;
  if (block == (void *)ctx) {
    priv_unlock(ctx);
    return;
  }
  priv_lock(ctx);
  for (int32_t k = 0; k < n; k++) {
    int64_t b = compact_bytes(hdrs[k]);
    if (b <= 0 || !data[k]) continue;
    if (bits[k] == 64) {
      double *dst = hdrs[k]->data;
      const double *src = data[k];
      for (int64_t i = 0, m = b / 8; i < m; i++)
        dst[i] += src[i];
    } else {
      float *dst = hdrs[k]->data;
      const float *src = data[k];
      for (int64_t i = 0, m = b / 4; i < m; i++)
        dst[i] += src[i];
    }
  }
  priv_unlock(ctx);
  free(block);
}

/* ---------------------------------------------------------------------
** inverse error functions (C has none): an estimate refined with Halley
** steps on erf or erfc. f(x) = erf(x) - y has f'' = -2x f', so a Halley
** step is f / (f' + x f); erfc(x) - c has the same form with -f'. Tails
** solve erfc(x) = c, whose c = 1 - |y| is exact for |y| >= 0.5, so they
** keep their relative precision down to c = DBL_TRUE_MIN.
** --------------------------------------------------------------------- */
#define WF_2_SQRTPI 1.12837916709551257390 /* 2 / sqrt(pi) */

/* Winitzki's closed form, within about 2e-3 relative, given
** l = log(1 - y^2) (for erfc: log(c (2 - c))); the result is >= 0. */
static double erfinv_guess(double l) {
  const double a = 0.147, k = 2 / (3.14159265358979323846 * a) + l / 2;
  return sqrt(sqrt(k * k - l / a) - k);
}

/* x >= 0 with erfc(x) = c, for 0 < c <= 1. */
static double erfcinv_small(double c) {
  double x = erfinv_guess(log(c * (2 - c)));
  for (int i = 0; i < 12; i++) {
    double g = erfc(x) - c, d = -WF_2_SQRTPI * exp(-x * x);
    double dx = g / (d + x * g);
    x -= dx;
    if (!(fabs(dx) > 0x1p-53 * fabs(x))) break;
  }
  return x;
}

static double wf_erfinv(double y) {
  double ay = fabs(y);
  if (!(ay <= 1)) return NAN;
  if (ay == 0) return y; /* keeps -0 */
  if (ay == 1) return copysign(INFINITY, y);
  if (ay > 0.5) return copysign(erfcinv_small(1 - ay), y);
  double x = erfinv_guess(log1p(-ay * ay));
  for (int i = 0; i < 12; i++) {
    double f = erf(x) - ay, d = WF_2_SQRTPI * exp(-x * x);
    double dx = f / (d + x * f);
    x -= dx;
    if (!(fabs(dx) > 0x1p-53 * fabs(x))) break;
  }
  return copysign(x, y);
}

static double wf_erfcinv(double c) {
  if (!(c >= 0 && c <= 2)) return NAN;
  if (c == 0) return INFINITY;
  if (c == 2) return -INFINITY;
  if (c > 1) return -erfcinv_small(2 - c); /* 2 - c is exact here */
  if (c >= 0.5) return wf_erfinv(1 - c);   /* so is 1 - c */
  return erfcinv_small(c);
}

/* float32: computed in double, rounded once (as Warp's CPU runtime does) */
static float wf_erfinvf(float y) {
  return (float)wf_erfinv(y);
}
static float wf_erfcinvf(float c) {
  return (float)wf_erfcinv(c);
}

/* Debug and release mode, before a native builtin (src/geom/native.h)
** reads through an id: is id a live host object of the kind the builtin
** takes (and index, for the element readers, in range)? Returns the
** row's number of valid indices (INT64_MAX for rows without one), which
** the caller caches beside the id (native.c; wf_cpu_rt_geom_limit gives
** it without failing, 0 for a bad id); else 0 after failing the
** launch with a message naming the builtin and the kernel, and the code
** goes on with the null id 0, which reads nothing. Registry kinds carry
** a device object's ordinal + 1 from bit 8 on (src/runtime/geom_mesh.c). */
static const char *kind_name(int kind) {
  static const char *const names[] = {"object", "weft.Mesh", "weft.Bvh", "weft.HashGrid",
                                      "weft.Volume"};
  return kind > 0 && kind < 5 ? names[kind] : names[0];
}
/* The number of valid indices of an element reader, -1 for other rows. */
static long long index_limit(const wf_gmesh *m, int row, const char **what) {
  switch (row) {
  case WF_NAT_mesh_get_point: *what = "points"; return m->npoints;
  case WF_NAT_mesh_get_velocity: *what = "velocities"; return m->velocities ? m->npoints : 0;
  case WF_NAT_mesh_get_index: *what = "indices"; return 3LL * m->nfaces;
  case WF_NAT_mesh_eval_face_normal: *what = "faces"; return m->nfaces;
  default: return -1;
  }
}
int64_t wf_cpu_rt_geom_limit(wf_launch_ctx *ctx, uint64_t id, int32_t kind, int32_t row) {
  const wf_geom_ids *ids = ctx->geom;
  const char *what;
  if (!ids || !id || ids->kind(ids, id) != kind) return 0;
  long long lim = index_limit((const wf_gmesh *)id, row, &what);
  return lim < 0 ? INT64_MAX : lim;
}
int64_t wf_cpu_rt_geom_check(wf_launch_ctx *ctx, const char *where, const char *kernel, uint64_t id,
                             int32_t kind, int32_t row, int32_t index) {
  const wf_geom_ids *ids = ctx->geom;
  int k = ids && id ? ids->kind(ids, id) : 0;
  const char *what = "";
  long long lim = k == kind ? index_limit((const wf_gmesh *)id, row, &what) : -1;
  if (k == kind && lim < 0) return INT64_MAX;
  if (k == kind && index >= 0 && index < lim) return lim;
  if (!claim(ctx)) return 0;
  const char *fn = row >= 0 && row < WF_NAT__COUNT ? wf_native_tab[row].name : "?";
  char why[200];
  if (k == kind)
    snprintf(why, sizeof why, "index %d is out of range for %lld %s", (int)index, lim, what);
  else if ((k & 255) == kind)
    snprintf(why, sizeof why, "id %" PRIu64 " is a %s on cuda:%d, but this launch runs on the cpu",
             id, kind_name(kind), (k >> 8) - 1);
  else if (k)
    snprintf(why, sizeof why, "id %" PRIu64 " is a %s, not a %s", id, kind_name(k & 255),
             kind_name(kind));
  else
    snprintf(why, sizeof why, "id %" PRIu64 " is not a live %s (freed, or not an id)", id,
             kind_name(kind));
  snprintf(ctx->msg, sizeof ctx->msg, "%s: weft.%s: %s, in kernel '%s'", where, fn, why, kernel);
  return 0;
}

/* The order of a chunk's threads in a kernel that queries a hash grid at
** the position p[tid()] (entry.c, thread_order): the grid's point ids in
** cell order when id is a live CPU grid last built from the very array
** p (data and stride) over as many points as the 1-D launch has threads,
** so that neighbouring threads query neighbouring cells and share what
** they read; NULL (tid order) otherwise, or when the runtime keeps tid
** order (weft.config.cell_order = false). The ids are a permutation of
** 0 .. n - 1, so every thread still runs once with its own tid. */
const int32_t *wf_cpu_rt_hgrid_order(wf_launch_ctx *ctx, uint64_t id, const void *data,
                                     int64_t stride) {
  const wf_geom_ids *ids = ctx->geom;
  if (!ctx->order || ctx->ndim != 1 || !ids || !id || !data) return NULL;
  if (ids->kind(ids, id) != WF_GEOM_HASHGRID) return NULL;
  const wf_hgrid *g = (const wf_hgrid *)(uintptr_t)id;
  if (g->npoints != ctx->dims[0] || g->npoints < 2 || (const void *)g->points != data ||
      g->stride != stride || !g->point_ids)
    return NULL;
  return g->point_ids;
}

/* The symbols the JIT resolves: weft's helpers, then every function of
** ir.h's math table (float64 and float32), then what LLVM's own lowering
** may call (intrinsics become libm calls, memory intrinsics become
** memcpy/memset). */
static const wf_cpu_sym symbols[] = {
    {"wf_cpu_rt_oob", (void *)wf_cpu_rt_oob},
    {"wf_cpu_rt_trap", (void *)wf_cpu_rt_trap},
    {"wf_cpu_rt_interrupted", (void *)wf_cpu_rt_interrupted},
    {"wf_cpu_rt_print", (void *)wf_cpu_rt_print},
    {"wf_cpu_rt_print_flush", (void *)wf_cpu_rt_print_flush},
    {"wf_cpu_rt_priv_begin", (void *)wf_cpu_rt_priv_begin},
    {"wf_cpu_rt_priv_end", (void *)wf_cpu_rt_priv_end},
    {"wf_cpu_rt_geom_check", (void *)wf_cpu_rt_geom_check},
    {"wf_cpu_rt_geom_limit", (void *)wf_cpu_rt_geom_limit},
    {"wf_cpu_rt_hgrid_order", (void *)wf_cpu_rt_hgrid_order},
/* the native builtins (src/geom/native.h, code in src/geom/query.h) */
#define WF_NATSYM(name, kind, fl, state, res, args, defs, adj, tan)                                \
  {"wf_nat_" #name, (void *)wf_nat_##name},
    WF_NATIVEDEF(WF_NATSYM)
#undef WF_NATSYM
/* clang-format off */
#define WF_SYM(X, e, s, na, fl, libm, llvm, cuda, fold) {#libm, (void *)libm}, {#libm "f", (void *)libm##f},
    WF_MATHDEF(WF_SYM, )
#undef WF_SYM
    /* clang-format on */
    {"fabs", (void *)fabs},
    {"fabsf", (void *)fabsf},
    {"nearbyint", (void *)nearbyint},
    {"nearbyintf", (void *)nearbyintf},
    {"fmod", (void *)fmod},
    {"fmodf", (void *)fmodf},
    {"fmin", (void *)fmin},
    {"fminf", (void *)fminf},
    {"fmax", (void *)fmax},
    {"fmaxf", (void *)fmaxf},
    {"memcpy", (void *)memcpy},
    {"memset", (void *)memset},
    {"memmove", (void *)memmove},
    {NULL, NULL},
};

const wf_cpu_sym *wf_cpu_symbols(void) {
  return symbols;
}
