/*
** test_ad.c -- reverse mode on the IR (src/ad) without the front end:
** kernels written as IR text, differentiated, verified, compiled by the CPU
** JIT, and their gradients checked against central differences in float64.
**
** Harness convention: kernel params are array<f64,1> arrays followed by
** optional i32 scalars. The first `nin` arrays are inputs, the others
** outputs; the loss is sum_k w_k . out_k for random weights w. The adjoint
** kernel runs with adj_out = w, adj_in = 0 and must produce dL/d(in).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ad/ad.h"
#include "cpu/cpu.h"
#include "runtime/rt.h"
#include "runtime/wf_launch.h"
#include "wtest.h"

static wf_jit *J;
static wf_rt *RT;

/* ---- a parsed, differentiated and compiled kernel ---- */
typedef struct adk {
  wf_module *m;
  wf_func *pf, *af;
  void *pk, *ak;
  char *text; /* the adjoint as IR text */
} adk;

static void *jit(wf_func *fn) {
  wf_cpu_opts o;
  memset(&o, 0, sizeof o);
  o.ndim = 1;
  char err[1024];
  void *e = wf_jit_compile(J, fn, &o, NULL, err, sizeof err);
  if (!e) fprintf(stderr, "compile of %s failed: %s\n", fn->name, err);
  return e;
}

/* Parse, differentiate, verify, optimize, verify, compile. 0 on success;
** else the message (parse, autodiff or verify) is in err. */
static int prep(const char *ir, adk *k, char *err, size_t n) {
  memset(k, 0, sizeof *k);
  k->m = wf_ir_parse(ir, NULL, err, n);
  if (!k->m) return -1;
  int ki = -1;
  for (int i = 0; i < k->m->nfuncs; i++)
    if (k->m->funcs[i]->is_kernel) ki = i;
  if (wf_ad_kernel(k->m, ki, err, n) != 0) return -1;
  if (wf_ir_verify(k->m, err, n) != 0) return -2;
  if (wf_ir_optimize(k->m, err, n) != 0) return -3;
  if (wf_ir_verify(k->m, err, n) != 0) return -4;
  k->pf = k->m->funcs[ki];
  k->af = k->m->funcs[k->m->nfuncs - 1];
  k->text = wf_ir_to_string(k->m);
  k->pk = jit(k->pf);
  k->ak = jit(k->af);
  return k->pk && k->ak ? 0 : -5;
}

static void adk_free(adk *k) {
  free(k->text);
  wf_module_free(k->m);
}

static wf_array mkarr(int64_t n, double *data) {
  wf_array a;
  memset(&a, 0, sizeof a);
  a.ndim = 1;
  a.size = n;
  a.shape[0] = n;
  a.strides[0] = 8;
  a.elsize = 8;
  a.data = data;
  return a;
}

/* Launch fn over n threads: arrays in order for the array params, ints for
** the i32 params. */
static int launch(wf_func *fn, void *entry, int64_t n, wf_array **arrs, const int32_t *ints) {
  int64_t offs[16];
  unsigned char args[256];
  memset(args, 0, sizeof args);
  int64_t size = wf_cpu_arg_layout(fn, offs);
  if (size > (int64_t)sizeof args) return -1;
  int na = 0, ni = 0;
  for (int p = 0; p < fn->nparams; p++) {
    const wf_type *t = wf_vtype(fn, fn->params[p]);
    if (t->kind == WF_T_ARRAY)
      memcpy(args + offs[p], &arrs[na++], sizeof(void *));
    else
      memcpy(args + offs[p], &ints[ni++], 4);
  }
  int rc = wf_cpu_launch(RT, entry, 1, &n, args, 1);
  if (rc) fprintf(stderr, "launch: %s\n", wf_rt_errmsg(RT));
  return rc;
}

typedef struct gspec {
  const char *name;
  const char *ir;
  int64_t nthreads;
  int narr, nin;
  int64_t len[6];
  double lo, hi; /* input range */
  int32_t ints[2];
} gspec;

static double urand(unsigned *s, double lo, double hi) {
  *s = *s * 1103515245u + 12345u;
  return lo + (hi - lo) * (double)((*s >> 8) & 0xffff) / 65536.0;
}

/* Loss of the primal at inputs `in` (outputs start at 0). */
static double loss(adk *k, const gspec *g, double **in, double **w) {
  double *bufs[6];
  wf_array a[6];
  wf_array *pa[6];
  for (int i = 0; i < g->narr; i++) {
    bufs[i] = calloc((size_t)g->len[i], 8);
    if (i < g->nin) memcpy(bufs[i], in[i], (size_t)g->len[i] * 8);
    a[i] = mkarr(g->len[i], bufs[i]);
    pa[i] = &a[i];
  }
  launch(k->pf, k->pk, g->nthreads, pa, g->ints);
  double L = 0;
  for (int i = g->nin; i < g->narr; i++)
    for (int64_t j = 0; j < g->len[i]; j++)
      L += w[i][j] * bufs[i][j];
  for (int i = 0; i < g->narr; i++)
    free(bufs[i]);
  return L;
}

/* The last kernel prepared (the JIT compiles one function once). */
static const char *last_ir;
static adk last_k;

/* Adjoint gradients vs central differences; returns the worst error. */
static double gradcheck(const gspec *g) {
  char err[1024];
  if (g->ir != last_ir) {
    if (last_ir) adk_free(&last_k);
    last_ir = NULL;
    if (prep(g->ir, &last_k, err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", g->name, err);
      if (last_k.text && getenv("AD_DUMP")) fputs(last_k.text, stderr);
      adk_free(&last_k);
      return INFINITY;
    }
    last_ir = g->ir;
    if (getenv("AD_DUMP")) fputs(last_k.text, stderr);
  }
  adk k = last_k;
  unsigned seed = 12345;
  double *in[6] = {0}, *w[6] = {0}, *grad[6] = {0}, *out[6] = {0};
  for (int i = 0; i < g->narr; i++) {
    in[i] = calloc((size_t)g->len[i], 8);
    w[i] = calloc((size_t)g->len[i], 8);
    grad[i] = calloc((size_t)g->len[i], 8);
    out[i] = calloc((size_t)g->len[i], 8);
    for (int64_t j = 0; j < g->len[i]; j++) {
      if (i < g->nin)
        in[i][j] = urand(&seed, g->lo, g->hi);
      else
        w[i][j] = urand(&seed, -1, 1);
    }
  }
  /* forward, then adjoint (as a tape does) */
  wf_array a[12];
  wf_array *pa[12];
  for (int i = 0; i < g->narr; i++) {
    memcpy(out[i], in[i], (size_t)g->len[i] * 8);
    a[i] = mkarr(g->len[i], out[i]);
    if (i < g->nin)
      memset(grad[i], 0, (size_t)g->len[i] * 8);
    else
      memcpy(grad[i], w[i], (size_t)g->len[i] * 8);
    a[g->narr + i] = mkarr(g->len[i], grad[i]);
  }
  for (int i = 0; i < 2 * g->narr; i++)
    pa[i] = &a[i];
  launch(k.pf, k.pk, g->nthreads, pa, g->ints);
  launch(k.af, k.ak, g->nthreads, pa, g->ints);
  double worst = 0;
  const double h = 1e-6;
  for (int i = 0; i < g->nin; i++)
    for (int64_t j = 0; j < g->len[i]; j++) {
      double x0 = in[i][j];
      in[i][j] = x0 + h;
      double lp = loss(&k, g, in, w);
      in[i][j] = x0 - h;
      double lm = loss(&k, g, in, w);
      in[i][j] = x0;
      double fd = (lp - lm) / (2 * h);
      double e = fabs(fd - grad[i][j]) / (1e-6 + fabs(fd));
      if (e > worst) worst = e;
      if (e > 1e-4)
        fprintf(stderr, "%s: d/d%d[%ld]: adjoint %.9g, differences %.9g\n", g->name, i, (long)j,
                grad[i][j], fd);
    }
  for (int i = 0; i < g->narr; i++)
    free(in[i]), free(w[i]), free(grad[i]), free(out[i]);
  return worst;
}

#define GRADCHECK(...)                                                                             \
  do {                                                                                             \
    gspec g_ = {__VA_ARGS__};                                                                      \
    double e_ = gradcheck(&g_);                                                                    \
    wtest_checks++;                                                                                \
    if (!(e_ < 1e-5)) {                                                                            \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: gradient check '%s' failed (worst relative error %g)\n", __FILE__,   \
              __LINE__, g_.name, e_);                                                              \
    }                                                                                              \
  } while (0)

/* ---- kernels ---- */

/* Every unary op u: out[k*N + i] = u(x[i]); binary: out = b(x[i], z[i]). */
static char *ops_kernel(void) {
  static const char *un[] = {
      "neg",  "abs",   "sqrt", "exp",   "log",   "sin",  "cos",   "tan",    "asin",   "acos",
      "atan", "sinh",  "cosh", "tanh",  "floor", "ceil", "round", "trunc",  "rint",   "cbrt",
      "exp2", "expm1", "log2", "log10", "log1p", "erf",  "erfc",  "erfinv", "erfcinv"};
  static const char *bin[] = {"add", "sub", "mul", "div", "mod", "pow", "min", "max", "atan2"};
  size_t cap = 16384;
  char *s = malloc(cap);
  int n = 0, v = 7;
  n += snprintf(
      s + n, cap - n,
      "kernel @ops(%%0:array<f64,1>, %%1:array<f64,1>, %%2:array<f64,1>) chunk \"@ops.lua\" {\n"
      "  %%3:i32 = tid 0\n  %%4:f64 = load %%0, %%3\n  %%5:f64 = load %%1, %%3\n"
      "  %%6:i32 = shape %%0, 0\n");
  int k = 0;
  for (size_t u = 0; u < sizeof un / sizeof *un; u++, k++) {
    n += snprintf(s + n, cap - n,
                  "  %%%d:f64 = %s %%4\n  %%%d:i32 = const %d\n  %%%d:i32 = mul %%%d, %%6\n"
                  "  %%%d:i32 = add %%%d, %%3\n  store %%2, %%%d, %%%d\n",
                  v, un[u], v + 1, k, v + 2, v + 1, v + 3, v + 2, v + 3, v);
    v += 4;
  }
  for (size_t b = 0; b < sizeof bin / sizeof *bin; b++, k++) {
    n += snprintf(s + n, cap - n,
                  "  %%%d:f64 = %s %%4, %%5\n  %%%d:i32 = const %d\n  %%%d:i32 = mul %%%d, %%6\n"
                  "  %%%d:i32 = add %%%d, %%3\n  store %%2, %%%d, %%%d\n",
                  v, bin[b], v + 1, k, v + 2, v + 1, v + 3, v + 2, v + 3, v);
    v += 4;
  }
  snprintf(s + n, cap - n, "  ret\n}\n");
  return s;
}

/* y = x^n by repeated multiplication, n at run time: the carried product is
** read by the reverse (mul), so iterations are recomputed. */
static const char *powloop_ir =
    "kernel @powloop(%0:array<f64,1>, %1:array<f64,1>, %2:i32) chunk \"@pow.lua\" {\n"
    "  %3:i32 = tid 0\n"
    "  %4:f64 = load %0, %3\n"
    "  %5:f64 = const 1.0\n"
    "  %6:i32 = const 1\n"
    "  %7:f64 = for %6, %2, %6 iter(%5) {\n"
    "  ^(%8:i32, %9:f64):\n"
    "    %10:f64 = mul %9, %4\n"
    "    yield %10\n"
    "  }\n"
    "  store %1, %3, %7\n"
    "  ret\n"
    "}\n";

/* y[i] = sum_j sin(x[j]) * x[i] * w[j]: an accumulator loop (no recompute);
** loads inside the loop accumulate atomically into adj_x[j]. */
static const char *accum_ir = "kernel @accum(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                              "  %3:i32 = tid 0\n"
                              "  %4:f64 = load %0, %3\n"
                              "  %5:f64 = const 0.0\n"
                              "  %6:i32 = const 0\n"
                              "  %7:i32 = shape %0, 0\n"
                              "  %8:i32 = const 1\n"
                              "  %9:i32 = sub %7, %8\n"
                              "  %10:f64 = for %6, %9, %8 iter(%5) {\n"
                              "  ^(%11:i32, %12:f64):\n"
                              "    %13:f64 = load %0, %11\n"
                              "    %14:f64 = load %1, %11\n"
                              "    %15:f64 = sin %13\n"
                              "    %16:f64 = mul %15, %4\n"
                              "    %17:f64 = mul %16, %14\n"
                              "    %18:f64 = add %12, %17\n"
                              "    yield %18\n"
                              "  }\n"
                              "  store %2, %3, %10\n"
                              "  ret\n"
                              "}\n";

/* The accumulator's final value is read after the loop (by a mul): the
** loop must still be reversed without recomputation (the body's reverse
** does not read the carried value). */
static const char *accum_after_ir =
    "kernel @accum2(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
    "  %3:i32 = tid 0\n"
    "  %4:f64 = load %0, %3\n"
    "  %5:f64 = const 0.0\n"
    "  %6:i32 = const 0\n"
    "  %7:i32 = shape %0, 0\n"
    "  %8:i32 = const 1\n"
    "  %9:i32 = sub %7, %8\n"
    "  %10:f64 = for %6, %9, %8 iter(%5) {\n"
    "  ^(%11:i32, %12:f64):\n"
    "    %13:f64 = load %1, %11\n"
    "    %14:f64 = mul %13, %13\n"
    "    %15:f64 = add %12, %14\n"
    "    yield %15\n"
    "  }\n"
    "  %16:f64 = mul %10, %4\n"
    "  store %2, %3, %16\n"
    "  ret\n"
    "}\n";

/* Data-dependent while: v = x; n = 0; while v > 0.3 do v = v*0.7 + 0.01*z; n++ end
** y = v * v + n (trip count depends on x). */
static const char *while_ir = "kernel @wh(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                              "  %3:i32 = tid 0\n"
                              "  %4:f64 = load %0, %3\n"
                              "  %5:f64 = load %1, %3\n"
                              "  %6:f64 = const 0.3\n"
                              "  %7:f64 = const 0.7\n"
                              "  %8:f64 = const 0.01\n"
                              "  %9:i32 = const 0\n"
                              "  %10:i32 = const 1\n"
                              "  %11:f64, %12:i32 = while iter(%4, %9) {\n"
                              "  ^(%13:f64, %14:i32):\n"
                              "    %15:bool = gt %13, %6\n"
                              "    condition %15, %13, %14\n"
                              "  } do {\n"
                              "  ^(%16:f64, %17:i32):\n"
                              "    %18:f64 = mul %16, %7\n"
                              "    %19:f64 = mul %8, %5\n"
                              "    %20:f64 = add %18, %19\n"
                              "    %21:i32 = add %17, %10\n"
                              "    yield %20, %21\n"
                              "  }\n"
                              "  %22:f64 = mul %11, %11\n"
                              "  %23:f64 = cast %12\n"
                              "  %24:f64 = add %22, %23\n"
                              "  store %2, %3, %24\n"
                              "  ret\n"
                              "}\n";

/* Branches with results and stores inside branches. */
static const char *if_ir =
    "kernel @br(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>, %3:array<f64,1>) {\n"
    "  %4:i32 = tid 0\n"
    "  %5:f64 = load %0, %4\n"
    "  %6:f64 = load %1, %4\n"
    "  %7:f64 = const 0.5\n"
    "  %8:bool = gt %5, %7\n"
    "  %9:f64 = if %8 {\n"
    "    %10:f64 = sin %5\n"
    "    %11:f64 = mul %10, %6\n"
    "    yield %11\n"
    "  } else {\n"
    "    %12:f64 = mul %5, %5\n"
    "    %13:f64 = mul %12, %6\n"
    "    store %3, %4, %13\n"
    "    yield %6\n"
    "  }\n"
    "  %14:f64 = exp %9\n"
    "  %15:f64 = select %8, %14, %5\n"
    "  store %2, %4, %15\n"
    "  ret\n"
    "}\n";

/* Aggregates: v = vec3(x, 2x, z); u = v with v.y := z*z; y = dot(u, u);
** atomic_add(sum, 0, y) from every thread. */
static const char *agg_ir = "kernel @agg(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                            "  %3:i32 = tid 0\n"
                            "  %4:f64 = load %0, %3\n"
                            "  %5:f64 = load %1, %3\n"
                            "  %6:f64 = add %4, %4\n"
                            "  %7:vec3d = agg %4, %6, %5\n"
                            "  %8:f64 = mul %5, %5\n"
                            "  %9:vec3d = insert %7, %8, 1\n"
                            "  %10:f64 = extract %9, 0\n"
                            "  %11:f64 = extract %9, 1\n"
                            "  %12:f64 = extract %9, 2\n"
                            "  %13:f64 = mul %10, %10\n"
                            "  %14:f64 = mul %11, %12\n"
                            "  %15:f64 = add %13, %14\n"
                            "  %16:i32 = const 0\n"
                            "  %17:f64 = atomic_add %2, %16, %15\n"
                            "  ret\n"
                            "}\n";

/* Nested loops: s = x; for a = 1, n { for b = 1, 2 { s = s * c + sin(s) } } */
static const char *nested_ir = "kernel @nest(%0:array<f64,1>, %1:array<f64,1>, %2:i32) {\n"
                               "  %3:i32 = tid 0\n"
                               "  %4:f64 = load %0, %3\n"
                               "  %5:f64 = const 0.9\n"
                               "  %6:i32 = const 1\n"
                               "  %7:i32 = const 2\n"
                               "  %8:f64 = for %6, %2, %6 iter(%4) {\n"
                               "  ^(%9:i32, %10:f64):\n"
                               "    %11:f64 = for %6, %7, %6 iter(%10) {\n"
                               "    ^(%12:i32, %13:f64):\n"
                               "      %14:f64 = mul %13, %5\n"
                               "      %15:f64 = sin %13\n"
                               "      %16:f64 = add %14, %15\n"
                               "      yield %16\n"
                               "    }\n"
                               "    yield %11\n"
                               "  }\n"
                               "  store %1, %3, %8\n"
                               "  ret\n"
                               "}\n";

/* A call left in the kernel: a positioned error. */
static const char *call_ir = "func @f(%0:f64) -> f64 {\n"
                             "  ret %0\n"
                             "}\n"
                             "kernel @k(%0:array<f64,1>) chunk \"@spec/k_spec.lua\" {\n"
                             "  %1:i32 = tid 0\n"
                             "  %2:f64 = load %0, %1\n"
                             "  %3:f64 = call @f(%2) !12:5\n"
                             "  store %0, %1, %3\n"
                             "  ret\n"
                             "}\n";

/* ---- forward mode: J v against central differences ---- */

/* Parse, jvp, optimize, verify, compile the primal and jvp_ kernels. */
static int prep_jvp(const char *ir, adk *k, char *err, size_t n) {
  memset(k, 0, sizeof *k);
  k->m = wf_ir_parse(ir, NULL, err, n);
  if (!k->m) return -1;
  int ki = -1;
  for (int i = 0; i < k->m->nfuncs; i++)
    if (k->m->funcs[i]->is_kernel) ki = i;
  if (wf_ad_jvp(k->m, ki, err, n) != 0) return -1;
  if (wf_ir_optimize(k->m, err, n) != 0) return -3;
  if (wf_ir_verify(k->m, err, n) != 0) return -4;
  k->pf = k->m->funcs[ki];
  k->af = k->m->funcs[k->m->nfuncs - 1];
  k->text = wf_ir_to_string(k->m);
  k->pk = jit(k->pf);
  k->ak = jit(k->af);
  return k->pk && k->ak ? 0 : -5;
}

static const char *last_jvp_ir;
static adk last_jvp;

/* Runs jvp_ with random input directions v; compares w . (J v) with the
** central difference of the weighted loss along v. Worst relative error. */
static double jvpcheck(const gspec *g) {
  char err[1024];
  /* the JIT compiles one function once: keep the last prepared kernel */
  if (g->ir != last_jvp_ir) {
    if (last_jvp_ir) adk_free(&last_jvp);
    last_jvp_ir = NULL;
    if (prep_jvp(g->ir, &last_jvp, err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", g->name, err);
      adk_free(&last_jvp);
      return INFINITY;
    }
    last_jvp_ir = g->ir;
    if (getenv("AD_DUMP")) fputs(last_jvp.text, stderr);
  }
  adk k = last_jvp;
  unsigned seed = 4242;
  double *in[6] = {0}, *w[6] = {0}, *tan[6] = {0}, *out[6] = {0}, *v[6] = {0};
  wf_array a[12];
  wf_array *pa[12];
  for (int i = 0; i < g->narr; i++) {
    size_t len = (size_t)g->len[i];
    in[i] = calloc(len, 8), w[i] = calloc(len, 8), tan[i] = calloc(len, 8);
    out[i] = calloc(len, 8), v[i] = calloc(len, 8);
    for (size_t j = 0; j < len; j++) {
      if (i < g->nin) {
        in[i][j] = urand(&seed, g->lo, g->hi);
        v[i][j] = tan[i][j] = urand(&seed, -1, 1);
      } else {
        w[i][j] = urand(&seed, -1, 1);
      }
    }
    memcpy(out[i], in[i], len * 8);
    a[i] = mkarr(g->len[i], out[i]);
    a[g->narr + i] = mkarr(g->len[i], tan[i]);
  }
  for (int i = 0; i < 2 * g->narr; i++)
    pa[i] = &a[i];
  launch(k.af, k.ak, g->nthreads, pa, g->ints);
  double dot = 0;
  for (int i = g->nin; i < g->narr; i++)
    for (int64_t j = 0; j < g->len[i]; j++)
      dot += w[i][j] * tan[i][j];
  /* the primal outputs written by the jvp kernel equal the primal's */
  double L0 = loss(&k, g, in, w), Lj = 0;
  for (int i = g->nin; i < g->narr; i++)
    for (int64_t j = 0; j < g->len[i]; j++)
      Lj += w[i][j] * out[i][j];
  const double h = 1e-6;
  double *xp[6], *xm[6];
  for (int i = 0; i < g->nin; i++) {
    xp[i] = calloc((size_t)g->len[i], 8), xm[i] = calloc((size_t)g->len[i], 8);
    for (int64_t j = 0; j < g->len[i]; j++) {
      xp[i][j] = in[i][j] + h * v[i][j];
      xm[i][j] = in[i][j] - h * v[i][j];
    }
  }
  double fd = (loss(&k, g, xp, w) - loss(&k, g, xm, w)) / (2 * h);
  double e = fabs(fd - dot) / (1e-6 + fabs(fd));
  if (fabs(L0 - Lj) > 1e-12 * (1 + fabs(L0))) e = INFINITY;
  if (e > 1e-5)
    fprintf(stderr, "%s: J v %.12g, differences %.12g (outputs %g vs %g)\n", g->name, dot, fd, Lj,
            L0);
  for (int i = 0; i < g->nin; i++)
    free(xp[i]), free(xm[i]);
  for (int i = 0; i < g->narr; i++)
    free(in[i]), free(w[i]), free(tan[i]), free(out[i]), free(v[i]);
  return e;
}

#define JVPCHECK(...)                                                                              \
  do {                                                                                             \
    gspec g_ = {__VA_ARGS__};                                                                      \
    double e_ = jvpcheck(&g_);                                                                     \
    wtest_checks++;                                                                                \
    if (!(e_ < 1e-5)) {                                                                            \
      wtest_failures++;                                                                            \
      fprintf(stderr, "%s:%d: jvp check '%s' failed (relative error %g)\n", __FILE__, __LINE__,    \
              g_.name, e_);                                                                        \
    }                                                                                              \
  } while (0)

static void test_jvp(void) {
  char *ir = ops_kernel();
  JVPCHECK("jvp ops", ir, 16, 3, 2, {16, 16, 16 * 38}, 0.15, 0.85, {0});
  free(ir);
  JVPCHECK("jvp powloop n=5", powloop_ir, 8, 2, 1, {8, 8}, 0.5, 1.5, {5});
  JVPCHECK("jvp powloop n=0", powloop_ir, 8, 2, 1, {8, 8}, 0.5, 1.5, {0});
  JVPCHECK("jvp accum", accum_ir, 12, 3, 2, {12, 12, 12}, -1, 1, {0});
  JVPCHECK("jvp while", while_ir, 16, 3, 2, {16, 16, 16}, 0.2, 3.0, {0});
  JVPCHECK("jvp nested", nested_ir, 6, 2, 1, {6, 6}, 0.1, 1.0, {3});
  JVPCHECK("jvp if", if_ir, 16, 4, 2, {16, 16, 16, 16}, 0.0, 1.0, {0});
  JVPCHECK("jvp agg", agg_ir, 16, 3, 2, {16, 16, 1}, -1, 1, {0});
  /* structure: one tangent array per array param; loops carry tangents */
  char err[512];
  wf_module *m = wf_ir_parse(powloop_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_jvp(m, 0, err, sizeof err) == 0 && m->nfuncs == 2);
  CHECK(m && wf_ir_verify(m, err, sizeof err) == 0);
  wf_func *jf = m ? m->funcs[m->nfuncs - 1] : NULL;
  CHECK_STR(jf ? jf->name : NULL, "jvp_powloop");
  CHECK(jf && jf->nparams == 5 && jf->is_kernel);
  /* the loop carries the product and its tangent: two f64 results */
  char *text = m ? wf_ir_to_string(m) : NULL;
  CHECK_HAS(text, ":f64, %");
  free(text);
  CHECK(m && wf_ad_jvp(m, 0, err, sizeof err) == 0 && m->nfuncs == 2);
  wf_module_free(m);
  if (last_jvp_ir) adk_free(&last_jvp);
}

/* ---- overwritten reads the adjoint would replay (check.c) ---- */
static const char *overwrite_ir =
    "kernel @ow(%0:array<f64,2>, %1:array<i32,1>) chunk \"@spec/ow.lua\" {\n"
    "  %2:i32 = tid 0\n"
    "  %3:array<f64,1> = view %0, %2 !3:1\n"
    "  %4:i32 = const 1\n"
    "  %5:f64 = load %3, %4 !4:7\n"
    "  %6:i32 = load %1, %2 !5:1\n"
    "  %7:i32 = add %6, %4\n"
    "  store %1, %2, %7 !6:1\n"
    "  %8:i32 = const 1\n"
    "  %9:f64 = mul %5, %5\n"
    "  store %0, %2, %8, %9 !9:3\n"
    "  ret\n"
    "}\n";

static const char *no_overwrite_ir = "kernel @ok(%0:array<f64,1>, %1:array<f64,1>) {\n"
                                     "  %2:i32 = tid 0\n"
                                     "  %3:f64 = const 2.0\n"
                                     "  store %0, %2, %3\n"
                                     "  %4:f64 = load %0, %2\n"
                                     "  %5:i32 = const 1\n"
                                     "  %6:i32 = add %2, %5\n"
                                     "  %7:f64 = load %1, %6\n"
                                     "  %9:f64 = mul %4, %4\n"
                                     "  store %1, %2, %9\n"
                                     "  %8:i32 = add %2, %5\n"
                                     "  atomic_add %0, %8, %7\n"
                                     "  ret\n"
                                     "}\n";

static void test_overwrite(void) {
  char err[512];
  wf_module *m = wf_ir_parse(overwrite_ir, NULL, err, sizeof err);
  CHECK(m != NULL);
  const char *names[] = {"m", "count"};
  CHECK(m && wf_ad_kernel_named(m, 0, names, err, sizeof err) == -1);
  CHECK_STR(err, "spec/ow.lua:9: autodiff: kernel 'ow' overwrites an element of array 'm' that it "
                 "read earlier at line 4; the adjoint would replay the new value, so gradients "
                 "would be wrong (write the result to another array)");
  CHECK(m && m->nfuncs == 1); /* nothing left behind */
  CHECK(m && wf_ad_kernel(m, 0, err, sizeof err) == -1);
  CHECK_HAS(err, "array 'parameter 1'");
  wf_module_free(m);
  /* x[i] written before it is read (the replay uses the stored value);
  ** x[i+1] read then x[i] written (other threads are not seen); atomic_add
  ** at i + 1 after reading x[i+1] in ANOTHER array: all accepted */
  m = wf_ir_parse(no_overwrite_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_kernel(m, 0, err, sizeof err) == 0);
  wf_module_free(m);
  /* the same index computed twice is recognized; a linear update is fine,
  ** a nonlinear one is not */
  static const char *twice_ir = "kernel @tw(%0:array<f64,1>) {\n"
                                "  %1:i32 = tid 0\n"
                                "  %2:i32 = const 1\n"
                                "  %3:i32 = add %1, %2\n"
                                "  %4:f64 = load %0, %3 !2:1\n"
                                "  %5:i32 = const 1\n"
                                "  %6:i32 = add %1, %5\n"
                                "  %8:f64 = mul %4, %4\n"
                                "  %7:f64 = atomic_add %0, %6, %8 !3:1\n"
                                "  ret\n"
                                "}\n";
  m = wf_ir_parse(twice_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_kernel(m, 0, err, sizeof err) == -1);
  CHECK_HAS(err, "?:3: autodiff: kernel 'tw' atomically updates an element of array 'parameter 1' "
                 "that it read earlier at line 2");
  wf_module_free(m);
  static const char *linear_ir = "kernel @li(%0:array<f64,1>) {\n"
                                 "  %1:i32 = tid 0\n"
                                 "  %4:f64 = load %0, %1 !2:1\n"
                                 "  %5:f64 = const 3.0\n"
                                 "  %8:f64 = mul %4, %5\n"
                                 "  store %0, %1, %8 !3:1\n"
                                 "  ret\n"
                                 "}\n";
  m = wf_ir_parse(linear_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_kernel(m, 0, err, sizeof err) == 0);
  wf_module_free(m);
}

static void test_ops(void) {
  char *ir = ops_kernel();
  GRADCHECK("ops", ir, 16, 3, 2, {16, 16, 16 * 38}, 0.15, 0.85, {0});
  free(ir);
}

static void test_loops(void) {
  GRADCHECK("powloop n=5", powloop_ir, 8, 2, 1, {8, 8}, 0.5, 1.5, {5});
  GRADCHECK("powloop n=0", powloop_ir, 8, 2, 1, {8, 8}, 0.5, 1.5, {0});
  GRADCHECK("powloop n=1", powloop_ir, 8, 2, 1, {8, 8}, 0.5, 1.5, {1});
  GRADCHECK("accum", accum_ir, 12, 3, 2, {12, 12, 12}, -1, 1, {0});
  GRADCHECK("accum, read after", accum_after_ir, 8, 3, 2, {8, 8, 8}, -1, 1, {0});
  GRADCHECK("while", while_ir, 16, 3, 2, {16, 16, 16}, 0.2, 3.0, {0});
  GRADCHECK("nested", nested_ir, 6, 2, 1, {6, 6}, 0.1, 1.0, {3});
}

static void test_branches_aggs(void) {
  GRADCHECK("if", if_ir, 16, 4, 2, {16, 16, 16, 16}, 0.0, 1.0, {0});
  GRADCHECK("agg", agg_ir, 16, 3, 2, {16, 16, 1}, -1, 1, {0});
}

/* n-body-like pair sum, y[i] = -0.5 * x[i] * sum_{j != i} z[j] / sqrt((x[j] -
** x[i])^2 + 0.01): the accumulator's seed does not depend on it, so the
** replay of the loop is fused into its reverse (one loop in the adjoint). */
static const char *fused_ir =
    "kernel @fuse(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) chunk \"@fuse.lua\" {\n"
    "  %3:i32 = tid 0\n"
    "  %4:f64 = load %0, %3\n"
    "  %5:f64 = const 0.0\n"
    "  %6:i32 = const 0\n"
    "  %7:i32 = shape %0, 0\n"
    "  %8:i32 = const 1\n"
    "  %9:i32 = sub %7, %8\n"
    "  %10:f64 = for %6, %9, %8 iter(%5) {\n"
    "  ^(%11:i32, %12:f64):\n"
    "    %13:bool = ne %11, %3\n"
    "    %14:f64 = if %13 {\n"
    "      %15:f64 = load %0, %11\n"
    "      %16:f64 = sub %15, %4\n"
    "      %17:f64 = mul %16, %16\n"
    "      %18:f64 = const 0.01\n"
    "      %19:f64 = add %17, %18\n"
    "      %20:f64 = sqrt %19\n"
    "      %21:f64 = load %1, %11\n"
    "      %22:f64 = div %21, %20\n"
    "      %23:f64 = add %12, %22\n"
    "      yield %23\n"
    "    } else {\n"
    "      yield %12\n"
    "    }\n"
    "    yield %14\n"
    "  }\n"
    "  %24:f64 = const -0.5\n"
    "  %25:f64 = mul %24, %4\n"
    "  %26:f64 = mul %25, %10\n"
    "  store %2, %3, %26\n"
    "  ret\n"
    "}\n";

/* y[i] = acc * acc, acc = sum_j z[j] * x[i]: the seed of acc (2 acc y')
** depends on acc, so the loop must not be fused (replay, then reverse). */
static const char *nofuse_ir =
    "kernel @nofuse(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
    "  %3:i32 = tid 0\n"
    "  %4:f64 = load %0, %3\n"
    "  %5:f64 = const 0.0\n"
    "  %6:i32 = const 0\n"
    "  %7:i32 = shape %0, 0\n"
    "  %8:i32 = const 1\n"
    "  %9:i32 = sub %7, %8\n"
    "  %10:f64 = for %6, %9, %8 iter(%5) {\n"
    "  ^(%11:i32, %12:f64):\n"
    "    %13:f64 = load %1, %11\n"
    "    %14:f64 = mul %13, %4\n"
    "    %15:f64 = add %12, %14\n"
    "    yield %15\n"
    "  }\n"
    "  %16:f64 = mul %10, %10\n"
    "  store %2, %3, %16\n"
    "  ret\n"
    "}\n";

/* y[i] = x[i] * acc, acc = z[j] - acc each step (an alternating sum): the
** reverse reads no carried value but the carried adjoint flips sign every
** iteration, so the reverse must run backwards (not fused). */
static const char *flip_ir = "kernel @flip(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                             "  %3:i32 = tid 0\n"
                             "  %4:f64 = load %0, %3\n"
                             "  %5:f64 = const 0.0\n"
                             "  %6:i32 = const 0\n"
                             "  %7:i32 = shape %0, 0\n"
                             "  %8:i32 = const 1\n"
                             "  %9:i32 = sub %7, %8\n"
                             "  %10:f64 = for %6, %9, %8 iter(%5) {\n"
                             "  ^(%11:i32, %12:f64):\n"
                             "    %13:f64 = load %1, %11\n"
                             "    %14:f64 = sin %13\n"
                             "    %15:f64 = sub %14, %12\n"
                             "    yield %15\n"
                             "  }\n"
                             "  %16:f64 = mul %10, %4\n"
                             "  store %2, %3, %16\n"
                             "  ret\n"
                             "}\n";

/* Occurrences of `needle` in the adjoint function's text (from its header). */
static int count_in_adjoint(const adk *k, const char *needle);

/* Fusion of a summing loop's replay into its reverse: a single loop in the
** adjoint where it applies, the ordinary replay + reverse where the seed
** depends on the loop's result; gradients match central differences. */
static void test_fusion(void) {
  adk k;
  char err[512];
  CHECK(prep(fused_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, "= for ") == 1);
  CHECK(count_in_adjoint(&k, "while") == 0);
  adk_free(&k);
  CHECK(prep(accum_after_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, "= for ") == 1);
  adk_free(&k);
  CHECK(prep(nofuse_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, "= for ") >= 2);
  CHECK(count_in_adjoint(&k, "while") == 0);
  adk_free(&k);
  GRADCHECK("fused pair sum", fused_ir, 10, 3, 2, {10, 10, 10}, -1, 1, {0});
  GRADCHECK("fused, read after", accum_after_ir, 8, 3, 2, {8, 8, 8}, -1, 1, {0});
  GRADCHECK("not fused, acc*acc", nofuse_ir, 9, 3, 2, {9, 9, 9}, -1, 1, {0});
  CHECK(prep(flip_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, "= for ") >= 2);
  adk_free(&k);
  GRADCHECK("not fused, alternating sum", flip_ir, 8, 3, 2, {8, 8, 8}, -1, 1, {0});
}

/* The loop reverse without recomputation is O(n) (checked on the IR: the
** accumulator loop holds no recompute while loop), with recompute otherwise. */
static void test_structure(void) {
  adk k;
  char err[512];
  CHECK(prep(accum_ir, &k, err, sizeof err) == 0);
  CHECK(k.text && !strstr(k.text, "while"));
  CHECK(k.af && k.af->nparams == 6 && k.af->is_kernel);
  CHECK_STR(k.af ? k.af->name : NULL, "adj_accum");
  adk_free(&k);
  CHECK(prep(accum_after_ir, &k, err, sizeof err) == 0);
  CHECK(k.text && !strstr(k.text, "while"));
  adk_free(&k);
  CHECK(prep(powloop_ir, &k, err, sizeof err) == 0);
  CHECK(k.text && strstr(k.text, "while"));
  CHECK(k.af && k.af->nparams == 5);
  /* a second call does not add another adjoint */
  int nf = k.m->nfuncs;
  CHECK(wf_ad_kernel(k.m, 0, err, sizeof err) == 0 && k.m->nfuncs == nf);
  adk_free(&k);
}

/* Occurrences of `needle` in the adjoint function's text (from its header). */
static int count_in_adjoint(const adk *k, const char *needle) {
  const char *p = k->text ? strstr(k->text, "kernel @adj_") : NULL;
  int n = 0;
  for (; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  return n;
}

/* The division rule divides once (1 / b, then multiplies), and x / sqrt(y)
** shares that reciprocal with the sqrt rule: one div and one sqrt in the
** whole adjoint. Gradients are checked against central differences. */
static const char *div_ir = "kernel @dv(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                            "  %3:i32 = tid 0\n"
                            "  %4:f64 = load %0, %3\n"
                            "  %5:f64 = load %1, %3\n"
                            "  %6:f64 = div %4, %5\n"
                            "  store %2, %3, %6\n"
                            "  ret\n"
                            "}\n";
static const char *divsqrt_ir = "kernel @ds(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) {\n"
                                "  %3:i32 = tid 0\n"
                                "  %4:f64 = load %0, %3\n"
                                "  %5:f64 = load %1, %3\n"
                                "  %6:f64 = mul %5, %5\n"
                                "  %7:f64 = sqrt %6\n"
                                "  %8:f64 = div %4, %7\n"
                                "  store %2, %3, %8\n"
                                "  ret\n"
                                "}\n";

static void test_div_rule(void) {
  adk k;
  char err[512];
  CHECK(prep(div_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, " = div ") == 1);
  adk_free(&k);
  CHECK(prep(divsqrt_ir, &k, err, sizeof err) == 0);
  CHECK(count_in_adjoint(&k, " = div ") == 1);
  CHECK(count_in_adjoint(&k, " = sqrt ") == 1);
  adk_free(&k);
  GRADCHECK("div", div_ir, 8, 3, 2, {8, 8, 8}, 0.5, 2.0, {0});
  GRADCHECK("div sqrt", divsqrt_ir, 8, 3, 2, {8, 8, 8}, 0.5, 2.0, {0});
}

/* A weft.func call left in the kernel (no custom gradient): inlined by
** the transform itself, then differentiated as usual. */
static void test_calls_inlined(void) {
  adk k;
  char err[512];
  CHECK(prep(call_ir, &k, err, sizeof err) == 0);
  CHECK(k.text && !strstr(k.text, "call @"));
  adk_free(&k);
  wf_module *m = wf_ir_parse(call_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_kernel(m, 0, err, sizeof err) == -1);
  CHECK_STR(err, "autodiff: 'f' is not a kernel");
  wf_module_free(m);
}

/* ---- custom gradients: "f$grad" and "f$replay" ---- */
/* y = sq(x) + x with a custom gradient of sq that is NOT its derivative
** (10 adj), so the test sees which one was used: dy/dx = 11. */
static const char *custom_ir = "func @sq(%0:f64) -> f64 {\n"
                               "  %1:f64 = mul %0, %0\n"
                               "  ret %1\n"
                               "}\n"
                               "func @\"sq$grad\"(%0:f64, %1:f64) -> f64 {\n"
                               "  %2:f64 = const 10.0\n"
                               "  %3:f64 = mul %1, %2\n"
                               "  ret %3\n"
                               "}\n"
                               "kernel @cg(%0:array<f64,1>, %1:array<f64,1>) chunk \"@cg.lua\" {\n"
                               "  %2:i32 = tid 0\n"
                               "  %3:f64 = load %0, %2\n"
                               "  %4:f64 = call @sq(%3) !7:3\n"
                               "  %5:f64 = add %4, %3\n"
                               "  store %1, %2, %5\n"
                               "  ret\n"
                               "}\n";

/* y = x; for 1..n: y = cube(y) * 0.9 + sin(y), with the true derivative
** of cube as its custom gradient: checked against differences. */
static const char *custom_loop_ir = "func @cube(%0:f64) -> f64 {\n"
                                    "  %1:f64 = mul %0, %0\n"
                                    "  %2:f64 = mul %1, %0\n"
                                    "  ret %2\n"
                                    "}\n"
                                    "func @\"cube$grad\"(%0:f64, %1:f64) -> f64 {\n"
                                    "  %2:f64 = const 3.0\n"
                                    "  %3:f64 = mul %0, %0\n"
                                    "  %4:f64 = mul %3, %2\n"
                                    "  %5:f64 = mul %4, %1\n"
                                    "  ret %5\n"
                                    "}\n"
                                    "kernel @cl(%0:array<f64,1>, %1:array<f64,1>, %2:i32) {\n"
                                    "  %3:i32 = tid 0\n"
                                    "  %4:f64 = load %0, %3\n"
                                    "  %5:f64 = const 0.9\n"
                                    "  %6:i32 = const 1\n"
                                    "  %7:f64 = for %6, %2, %6 iter(%4) {\n"
                                    "  ^(%8:i32, %9:f64):\n"
                                    "    %10:f64 = call @cube(%9)\n"
                                    "    %11:f64 = mul %10, %5\n"
                                    "    %12:f64 = sin %9\n"
                                    "    %13:f64 = add %11, %12\n"
                                    "    yield %13\n"
                                    "  }\n"
                                    "  store %1, %3, %7\n"
                                    "  ret\n"
                                    "}\n";

/* A func with a side effect (a store) and a custom gradient: needs a
** replay function, which the adjoint's replay calls instead. */
static const char *effects_funcs =
    "func @put(%0:array<f64,1>, %1:i32, %2:f64) -> f64 {\n"
    "  store %0, %1, %2\n"
    "  %3:f64 = mul %2, %2\n"
    "  ret %3\n"
    "}\n"
    "func @\"put$grad\"(%0:array<f64,1>, %1:i32, %2:f64, %3:f64) -> f64 {\n"
    "  %4:f64 = add %2, %2\n"
    "  %5:f64 = mul %4, %3\n"
    "  ret %5\n"
    "}\n";
static const char *effects_kernel =
    "kernel @fx(%0:array<f64,1>, %1:array<f64,1>, %2:array<f64,1>) chunk \"@fx.lua\" {\n"
    "  %3:i32 = tid 0\n"
    "  %4:f64 = load %0, %3\n"
    "  %5:f64 = call @put(%2, %3, %4) !8:3\n"
    "  %6:f64 = mul %5, %5\n"
    "  store %1, %3, %6\n"
    "  ret\n"
    "}\n";
static const char *put_replay = "func @\"put$replay\"(%0:array<f64,1>, %1:i32, %2:f64) -> f64 {\n"
                                "  %3:f64 = mul %2, %2\n"
                                "  ret %3\n"
                                "}\n";

static void test_custom_grad(void) {
  char err[1024];
  /* the adjoint calls sq$grad (visible before optimize), then runs */
  wf_module *m = wf_ir_parse(custom_ir, NULL, err, sizeof err);
  CHECK(m && wf_ad_kernel(m, 2, err, sizeof err) == 0);
  char *text = m ? wf_ir_to_string(m) : NULL;
  CHECK_HAS(text, "= call @\"sq$grad\"(");
  free(text);
  wf_module_free(m);
  adk k;
  CHECK(prep(custom_ir, &k, err, sizeof err) == 0);
  CHECK(k.text && !strstr(k.text, "call @"));
  if (k.pk && k.ak) {
    double x[4] = {0.5, -1, 2, 3}, y[4] = {0}, gx[4] = {0}, gy[4] = {1, 2, 3, 4};
    wf_array a[4] = {mkarr(4, x), mkarr(4, y), mkarr(4, gx), mkarr(4, gy)};
    wf_array *pa[4] = {&a[0], &a[1], &a[2], &a[3]};
    launch(k.pf, k.pk, 4, pa, NULL);
    launch(k.af, k.ak, 4, pa, NULL);
    for (int i = 0; i < 4; i++) {
      CHECK(fabs(y[i] - (x[i] * x[i] + x[i])) < 1e-12);
      CHECK(fabs(gx[i] - 11 * (i + 1)) < 1e-12); /* the seeds gy were 1, 2, 3, 4 */
      CHECK(gy[i] == 0);                         /* y was overwritten: its old value's */
    }
  }
  adk_free(&k);
  GRADCHECK("custom grad in a loop", custom_loop_ir, 6, 2, 1, {6, 6}, 0.1, 0.9, {3});
  /* side effects without a replay function: a positioned error */
  char ir[2048];
  snprintf(ir, sizeof ir, "%s%s", effects_funcs, effects_kernel);
  CHECK(prep(ir, &k, err, sizeof err) == -1);
  CHECK_STR(err, "fx.lua:8: autodiff: weft.func 'put' has a custom gradient and side effects "
                 "(stores, atomics, prints or calls): give it a replay function too");
  adk_free(&k);
  /* with one: y = x^4 (and z = x); gradient from put$grad: 2 x adj(r),
  ** adj(r) = 2 r = 2 x^2 */
  snprintf(ir, sizeof ir, "%s%s%s", effects_funcs, put_replay, effects_kernel);
  CHECK(prep(ir, &k, err, sizeof err) == 0);
  if (k.pk && k.ak) {
    double x[3] = {0.5, -1, 2}, y[3] = {0}, z[3] = {0}, gx[3] = {0}, gy[3] = {1, 1, 1}, gz[3] = {0};
    wf_array a[6] = {mkarr(3, x),  mkarr(3, y),  mkarr(3, z),
                     mkarr(3, gx), mkarr(3, gy), mkarr(3, gz)};
    wf_array *pa[6] = {&a[0], &a[1], &a[2], &a[3], &a[4], &a[5]};
    launch(k.pf, k.pk, 3, pa, NULL);
    launch(k.af, k.ak, 3, pa, NULL);
    for (int i = 0; i < 3; i++) {
      CHECK(z[i] == x[i] && y[i] == x[i] * x[i] * x[i] * x[i]);
      CHECK(fabs(gx[i] - 4 * x[i] * x[i] * x[i]) < 1e-12);
    }
  }
  adk_free(&k);
  /* a gradient with the wrong signature */
  static const char *bad_ir = "func @h(%0:f64, %1:i32) -> f64 {\n"
                              "  ret %0\n"
                              "}\n"
                              "func @\"h$grad\"(%0:f64, %1:i32, %2:f64) -> f64, f64 {\n"
                              "  ret %2, %2\n"
                              "}\n"
                              "kernel @bh(%0:array<f64,1>) chunk \"@bh.lua\" {\n"
                              "  %1:i32 = tid 0\n"
                              "  %2:f64 = load %0, %1\n"
                              "  %3:f64 = call @h(%2, %1) !5:2\n"
                              "  store %0, %1, %3\n"
                              "  ret\n"
                              "}\n";
  CHECK(prep(bad_ir, &k, err, sizeof err) == -1);
  CHECK_STR(err, "bh.lua:5: autodiff: the custom gradient of weft.func 'h' must take its "
                 "arguments and the adjoint of each result, and return the adjoint of each float "
                 "argument in order");
  adk_free(&k);
}

int main(void) {
  char err[512];
  J = wf_jit_new(err, sizeof err);
  RT = wf_rt_new();
  if (!J || !RT) {
    fprintf(stderr, "no JIT: %s\n", err);
    return 1;
  }
  test_structure();
  test_div_rule();
  test_calls_inlined();
  test_custom_grad();
  test_loops();
  test_branches_aggs();
  test_fusion();
  test_ops();
  test_jvp();
  test_overwrite();
  if (last_ir) adk_free(&last_k);
  wf_jit_free(J);
  wf_rt_free(RT);
  WTEST_DONE();
}
