/*
** luamath.c -- LuaJIT's math functions that have no op of their own, and
** the division helpers for code ported from C or Warp.
**
** Takes a call of math.rad, math.deg, math.ldexp, math.frexp, math.modf,
** math.fmod, two-argument math.log, weft.idiv or weft.fmod; gives primitive
** ops with LuaJIT's results: rad and deg multiply by LuaJIT's constants,
** log(x, b) is log2(x) * (1 / log2(b)) as LuaJIT computes it, fmod is C's
** (exact, the sign of the dividend), ldexp scales by powers of two, and
** frexp and modf give two results. Untyped number arguments fold in double
** precision, as Lua computes them; integer arguments become float32 (float64
** for 64-bit ones), as `/` does. weft.idiv and weft.fmod on integers are
** C's `/` and `%` (truncating; a zero divisor traps). The scalar math
** builtins of the op table on untyped numbers give untyped numbers.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "front/lower.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)
#define TN(t) wf_lo_tname(F->C, (t))
#define B (&F->b)

static const wf_type *t_i32(wf_fstate *F) {
  return wf_t_int(F->C->T, 32, 1);
}

/* LuaJIT's constants for math.deg and math.rad (lib_math.c) */
#define DEG_PER_RAD 57.29577951308232
#define RAD_PER_DEG 0.017453292519943295

static int nargs_check(wf_fstate *F, const char *name, wf_expr *call, int n, wf_rv *a) {
  if (call->nargs != n)
    ERR(call, "%s expects %d argument%s, got %d", name, n, n == 1 ? "" : "s", call->nargs);
  for (int i = 0; i < n; i++)
    a[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  return n;
}

/* The common scalar type of n arguments: the typed ones' (all the same),
** else int32 for integer literals and float32 for others. */
static const wf_type *common(wf_fstate *F, const char *name, int n, wf_rv *a, wf_expr *call) {
  const wf_type *t = NULL;
  int allint = 1;
  for (int i = 0; i < n; i++) {
    if (a[i].kind == RV_VAL) {
      if (a[i].t->kind != WF_T_INT && a[i].t->kind != WF_T_FLOAT)
        ERR(call->args[i], "%s expects numbers, got %s", name, TN(a[i].t));
      if (t && a[i].t != t)
        ERR(call->args[i], "%s: arguments have different types: %s and %s", name, TN(t),
            TN(a[i].t));
      t = a[i].t;
    } else if (!wf_lo_isnum(&a[i])) {
      wf_lo_value(F, &a[i], NULL, call->args[i]);
    } else {
      allint = allint && a[i].isint;
    }
  }
  if (!t) t = allint ? t_i32(F) : wf_t_float(F->C->T, 32);
  return t;
}

/* The float type an int type computes in (as `/`): float32, or float64. */
static const wf_type *float_of(wf_fstate *F, const wf_type *t) {
  if (t->kind == WF_T_FLOAT) return t;
  return wf_t_float(F->C->T, t->bits == 64 ? 64 : 32);
}

/* Argument r as a value of float type ft (a typed int is converted). */
static wf_val as_float(wf_fstate *F, wf_rv *r, const wf_type *ft, wf_expr *at) {
  if (r->kind == RV_VAL && r->t->kind == WF_T_INT) return wf_b_op1(B, WF_OP_CAST, ft, r->v);
  return wf_lo_value(F, r, ft, at);
}

static int all_lits(int n, const wf_rv *a) {
  for (int i = 0; i < n; i++)
    if (a[i].kind != RV_LIT) return 0;
  return 1;
}

static wf_val C(wf_fstate *F, const wf_type *t, double v) {
  return wf_lo_const(F, t, v);
}

/* x * 2^e for a float x of type t and an int32 e: three exact power-of-two
** factors (each inside the type's normal range), so that only the last
** multiply rounds, as ldexp does (but for results that go subnormal
** before the last factor). */
static wf_val scale2(wf_fstate *F, const wf_type *t, wf_val x, wf_val e) {
  const wf_type *it = t_i32(F), *bt = wf_t_bool(F->C->T);
  int lim = t->bits == 64 ? 2200 : t->bits == 32 ? 330 : 60;
  wf_val lo = wf_b_consti(B, it, -lim), hi = wf_b_consti(B, it, lim);
  e = wf_b_op3(B, WF_OP_SELECT, it, wf_b_op2(B, WF_OP_LT, bt, e, lo), lo, e);
  e = wf_b_op3(B, WF_OP_SELECT, it, wf_b_op2(B, WF_OP_GT, bt, e, hi), hi, e);
  wf_val e1 = wf_b_op2(B, WF_OP_DIV, it, e, wf_b_consti(B, it, 3));
  wf_val e3 = wf_b_op2(B, WF_OP_SUB, it, e, wf_b_op2(B, WF_OP_ADD, it, e1, e1));
  wf_val p1 = wf_b_op1(B, WF_OP_EXP2, t, wf_b_op1(B, WF_OP_CAST, t, e1));
  wf_val p3 = wf_b_op1(B, WF_OP_EXP2, t, wf_b_op1(B, WF_OP_CAST, t, e3));
  wf_val r = wf_b_op2(B, WF_OP_MUL, t, wf_b_op2(B, WF_OP_MUL, t, x, p1), p1);
  return wf_b_op2(B, WF_OP_MUL, t, r, p3);
}

/* math.rad(x), math.deg(x): x times LuaJIT's constant. */
static int rad_deg(wf_fstate *F, const char *name, wf_expr *call, wf_rv *out) {
  wf_rv a[1];
  nargs_check(F, name, call, 1, a);
  double k = name[0] == 'r' ? RAD_PER_DEG : DEG_PER_RAD;
  if (a[0].kind == RV_LIT) {
    out[0] = wf_lo_mklit(a[0].num * k, 0);
    return 1;
  }
  if (a[0].kind == RV_WEAK) { /* untyped: x * k at the type of the use */
    wf_rv kr = wf_lo_mklit(k, 0);
    out[0] = wf_lo_weak_rv(wf_lo_weak_binop(F, '*', &a[0], &kr));
    return 1;
  }
  const wf_type *ft = float_of(F, common(F, name, 1, a, call));
  wf_val x = as_float(F, &a[0], ft, call->args[0]);
  out[0] = wf_lo_mkval(wf_b_op2(B, WF_OP_MUL, ft, x, C(F, ft, k)), ft);
  return 1;
}

/* math.log(x, base) = log2(x) * (1 / log2(base)), as LuaJIT. */
static int log_base(wf_fstate *F, wf_expr *call, wf_rv *out) {
  wf_rv a[2];
  nargs_check(F, "log", call, 2, a);
  if (all_lits(2, a)) {
    out[0] = wf_lo_mklit(log2(a[0].num) * (1.0 / log2(a[1].num)), 0);
    return 1;
  }
  if (wf_lo_isnum(&a[0]) && wf_lo_isnum(&a[1])) { /* untyped: at the type of the use */
    wf_rv x = wf_lo_weak_rv(wf_lo_weak_call(F, WF_OP_LOG2, wf_lo_weak_of(F, &a[0]), NULL, 0, 0));
    wf_rv b = wf_lo_weak_rv(wf_lo_weak_call(F, WF_OP_LOG2, wf_lo_weak_of(F, &a[1]), NULL, 0, 0));
    wf_rv one = wf_lo_mklit(1, 0);
    wf_rv inv = wf_lo_weak_rv(wf_lo_weak_binop(F, '/', &one, &b));
    out[0] = wf_lo_weak_rv(wf_lo_weak_binop(F, '*', &x, &inv));
    return 1;
  }
  const wf_type *ft = float_of(F, common(F, "log", 2, a, call));
  wf_val x = wf_b_op1(B, WF_OP_LOG2, ft, as_float(F, &a[0], ft, call->args[0]));
  wf_val b = wf_b_op1(B, WF_OP_LOG2, ft, as_float(F, &a[1], ft, call->args[1]));
  wf_val r = wf_b_op2(B, WF_OP_MUL, ft, x, wf_b_op2(B, WF_OP_DIV, ft, C(F, ft, 1), b));
  out[0] = wf_lo_mkval(r, ft);
  return 1;
}

/* weft.idiv(a, b): truncating division (C's and Warp's `/` on integers);
** weft.fmod(a, b), math.fmod: the remainder with the sign of a (C's `%`
** on integers, C's fmod on floats). */
static int idiv_fmod(wf_fstate *F, const char *name, wf_expr *call, wf_rv *out) {
  int isdiv = name[0] == 'i';
  wf_rv a[2];
  nargs_check(F, name, call, 2, a);
  const wf_type *t = common(F, name, 2, a, call);
  if (all_lits(2, a)) {
    double x = a[0].num, y = a[1].num;
    int isint = a[0].isint && a[1].isint;
    if (isint && y == 0) ERR(call->args[1], "%s: integer division by zero", name);
    out[0] = wf_lo_mklit(isdiv ? trunc(x / y) : fmod(x, y), isint);
    return 1;
  }
  if (!isdiv && wf_lo_isnum(&a[0]) && wf_lo_isnum(&a[1])) {
    /* untyped: at the type of the use (a float: fmod is not integral) */
    const wf_weak *wa = wf_lo_weak_of(F, &a[0]), *wb = wf_lo_weak_of(F, &a[1]);
    out[0] = wf_lo_weak_rv(wf_lo_weak_call(F, WF_OP_FMOD, wa, wb, 0, 0));
    return 1;
  }
  wf_val x = wf_lo_value(F, &a[0], t, call->args[0]), y = wf_lo_value(F, &a[1], t, call->args[1]);
  wf_val r;
  if (t->kind == WF_T_INT) {
    /* DIV on integers truncates (and traps on a zero divisor) */
    wf_val q = wf_b_op2(B, WF_OP_DIV, t, x, y);
    r = isdiv ? q : wf_b_op2(B, WF_OP_SUB, t, x, wf_b_op2(B, WF_OP_MUL, t, q, y));
  } else if (isdiv) {
    r = wf_b_op1(B, WF_OP_TRUNC, t, wf_b_op2(B, WF_OP_DIV, t, x, y));
  } else {
    r = wf_b_op2(B, WF_OP_FMOD, t, x, y);
  }
  out[0] = wf_lo_mkval(r, t);
  return 1;
}

/* The float type of a one-argument function's argument (ints converted). */
/* An untyped argument computes in float64, which holds it exactly. */
static wf_val float1(wf_fstate *F, const char *name, wf_expr *call, wf_rv *a, const wf_type **ft) {
  *ft = wf_lo_isnum(&a[0]) ? wf_t_float(F->C->T, 64) : float_of(F, common(F, name, 1, a, call));
  return as_float(F, &a[0], *ft, call->args[0]);
}

/* A result of type t, untyped (a float64 or int dyn leaf, as Lua's number
** would be) when the argument was. */
static wf_rv result(wf_fstate *F, const wf_rv *arg, wf_val v, const wf_type *t, int integral) {
  if (!wf_lo_isnum(arg)) return wf_lo_mkval(v, t);
  return wf_lo_weak_rv(wf_lo_weak_dyn(F, v, t->kind == WF_T_INT, integral));
}

/* math.ldexp(m, e): m * 2^e, e truncated to an integer (LuaJIT). */
static int ldexp_call(wf_fstate *F, wf_expr *call, wf_rv *out) {
  wf_rv a[2];
  nargs_check(F, "ldexp", call, 2, a);
  if (all_lits(2, a)) {
    out[0] = wf_lo_mklit(ldexp(a[0].num, (int)fmax(-1e5, fmin(1e5, trunc(a[1].num)))), 0);
    return 1;
  }
  const wf_type *ft;
  wf_val m = float1(F, "ldexp", call, a, &ft);
  wf_val e;
  if (wf_lo_isnum(&a[1]))
    e = wf_lo_num_cast(F, &a[1], t_i32(F), call->args[1]);
  else if (a[1].kind == RV_VAL && (a[1].t->kind == WF_T_INT || a[1].t->kind == WF_T_FLOAT))
    e = a[1].t == t_i32(F) ? a[1].v : wf_b_op1(B, WF_OP_CAST, t_i32(F), a[1].v);
  else
    ERR(call->args[1], "ldexp expects a number exponent, got %s",
        a[1].kind == RV_VAL ? TN(a[1].t) : "a value");
  out[0] = result(F, &a[0], scale2(F, ft, m, e), ft, 0);
  return 1;
}

/* math.frexp(x): m, e with x = m * 2^e, 0.5 <= |m| < 1 (m = x, e = 0 for
** zero, infinities and NaN), e an int32. */
static int frexp_call(wf_fstate *F, wf_expr *call, wf_rv *out) {
  wf_rv a[1];
  nargs_check(F, "frexp", call, 1, a);
  if (a[0].kind == RV_LIT) {
    int e;
    double m = frexp(a[0].num, &e);
    out[0] = wf_lo_mklit(m, 0);
    out[1] = wf_lo_mklit(e, 1);
    return 2;
  }
  const wf_type *ft, *it = t_i32(F), *bt = wf_t_bool(F->C->T);
  wf_val x = float1(F, "frexp", call, a, &ft);
  wf_val ax = wf_b_op1(B, WF_OP_ABS, ft, x);
  /* an estimate from log2, then one correction each way */
  wf_val ef = wf_b_op2(B, WF_OP_ADD, ft,
                       wf_b_op1(B, WF_OP_FLOOR, ft, wf_b_op1(B, WF_OP_LOG2, ft, ax)), C(F, ft, 1));
  wf_val fin = wf_b_op2(B, WF_OP_BAND, bt, wf_b_op2(B, WF_OP_NE, bt, ax, C(F, ft, 0)),
                        wf_b_op2(B, WF_OP_LT, bt, ax, C(F, ft, INFINITY)));
  ef = wf_b_op3(B, WF_OP_SELECT, ft, fin, ef, C(F, ft, 0));
  wf_val e = wf_b_op1(B, WF_OP_CAST, it, ef);
  wf_val m = scale2(F, ft, x, wf_b_op1(B, WF_OP_NEG, it, e));
  wf_val am = wf_b_op1(B, WF_OP_ABS, ft, m);
  wf_val big = wf_b_op2(B, WF_OP_BAND, bt, fin, wf_b_op2(B, WF_OP_GE, bt, am, C(F, ft, 1)));
  wf_val small = wf_b_op2(B, WF_OP_BAND, bt, fin, wf_b_op2(B, WF_OP_LT, bt, am, C(F, ft, 0.5)));
  m = wf_b_op3(B, WF_OP_SELECT, ft, big, wf_b_op2(B, WF_OP_MUL, ft, m, C(F, ft, 0.5)), m);
  m = wf_b_op3(B, WF_OP_SELECT, ft, small, wf_b_op2(B, WF_OP_MUL, ft, m, C(F, ft, 2)), m);
  wf_val one = wf_b_consti(B, it, 1);
  e = wf_b_op3(B, WF_OP_SELECT, it, big, wf_b_op2(B, WF_OP_ADD, it, e, one), e);
  e = wf_b_op3(B, WF_OP_SELECT, it, small, wf_b_op2(B, WF_OP_SUB, it, e, one), e);
  out[0] = result(F, &a[0], m, ft, 0);
  out[1] = result(F, &a[0], e, it, 1);
  return 2;
}

/* math.modf(x): the integral part trunc(x) and the fractional part, which
** has the sign of x (-0 for -3.0 and -inf, as C's modf and LuaJIT). */
static int modf_call(wf_fstate *F, wf_expr *call, wf_rv *out) {
  wf_rv a[1];
  nargs_check(F, "modf", call, 1, a);
  if (a[0].kind == RV_LIT) {
    double ip, fp = modf(a[0].num, &ip);
    out[0] = wf_lo_mklit(ip, 0);
    out[1] = wf_lo_mklit(fp, 0);
    return 2;
  }
  const wf_type *ft, *bt = wf_t_bool(F->C->T);
  wf_val x = float1(F, "modf", call, a, &ft);
  wf_val ip = wf_b_op1(B, WF_OP_TRUNC, ft, x);
  /* the zero with x's sign: x itself for +-0 */
  wf_val pos =
      wf_b_op3(B, WF_OP_SELECT, ft, wf_b_op2(B, WF_OP_GT, bt, x, C(F, ft, 0)), C(F, ft, 0), x);
  wf_val z =
      wf_b_op3(B, WF_OP_SELECT, ft, wf_b_op2(B, WF_OP_LT, bt, x, C(F, ft, 0)), C(F, ft, -0.0), pos);
  wf_val fp = wf_b_op3(B, WF_OP_SELECT, ft, wf_b_op2(B, WF_OP_EQ, bt, ip, x), z,
                       wf_b_op2(B, WF_OP_SUB, ft, x, ip));
  out[0] = result(F, &a[0], ip, ft, 1);
  out[1] = result(F, &a[0], fp, ft, 0);
  return 2;
}

/* ---- a scalar builtin of the op table on untyped numbers ----
** math.sqrt(2) or weft.sin(k) of a loop's untyped counter gives an untyped
** number as `2 * k` does: folded in double precision (as Lua) when every
** argument is a literal, else a weak op done at the type of the use. */

/* The table's libm functions, by op (cast back by arity to call). */
typedef void (*anyfn)(void);
#define wf_erfinv NULL /* in the CPU runtime only: not folded */
#define wf_erfcinv NULL
#define LM_FN(X, e, s, na, fl, libm, llvm, cuda, fold) [WF_OP_##e] = (anyfn)libm,
static const anyfn libm_fn[WF_OP__COUNT] = {WF_MATHDEF(LM_FN, _)};
#undef LM_FN
#undef wf_erfinv
#undef wf_erfcinv

/* The scalar math op builtin `name` is (sqrt, pow, min, abs, ...), or -1. */
static int math_op(const char *name) {
  for (int op = 0; op < WF_OP__COUNT; op++) {
    if (!(wf_op_flags(op) & WF_OPF_BUILTIN) || strcmp(name, wf_opinfo_tab[op].name)) continue;
    if (wf_opinfo_tab[op].ty == WF_TY_FLOAT || op == WF_OP_MIN || op == WF_OP_MAX ||
        op == WF_OP_ABS || op == WF_OP_FLOORDIV)
      return op;
    return -1;
  }
  return -1;
}

/* Fold op on literals x[0..n) in double precision; 0 when it cannot. */
static int fold_call(int op, int n, const wf_rv *x, double *r) {
  double a = x[0].num, b = n > 1 ? x[1].num : 0;
  switch (op) {
  case WF_OP_MIN:
  case WF_OP_MAX:
    *r = a;
    for (int i = 1; i < n; i++) /* Lua's: a NaN first gives the other */
      *r = op == WF_OP_MIN ? (x[i].num < *r ? x[i].num : *r) : (x[i].num > *r ? x[i].num : *r);
    return 1;
  case WF_OP_ABS: *r = fabs(a); return 1;
  case WF_OP_FLOORDIV: *r = floor(a / b); return !(x[0].isint && x[1].isint && b == 0);
  default: break;
  }
  anyfn f = libm_fn[op];
  if (!f) return 0;
  *r = n == 1 ? ((double (*)(double))f)(a) : ((double (*)(double, double))f)(a, b);
  return 1;
}

/* math.max(a, b, c) and the like as a weak number: min/max pairwise in
** order (a NaN first gives the other operand, as LuaJIT's interpreter). */
static wf_rv untyped_call(wf_fstate *F, int op, int n, wf_rv *x) {
  int isint = 1, integral = 1;
  for (int i = 0; i < n; i++) {
    isint = isint && x[i].isint;
    integral = integral && wf_lo_num_integral(&x[i]);
  }
  int keeps = op == WF_OP_MIN || op == WF_OP_MAX || op == WF_OP_ABS || op == WF_OP_FLOORDIV ||
              (wf_op_flags(op) & WF_OPF_INTID);
  if (!keeps) isint = integral = 0;
  if (op == WF_OP_FLOORDIV) integral = 1;
  double r;
  if (all_lits(n, x) && fold_call(op, n, x, &r)) return wf_lo_mklit(r, isint && r == floor(r));
  const wf_weak *w = wf_lo_weak_of(F, &x[0]);
  if (n == 1) return wf_lo_weak_rv(wf_lo_weak_call(F, op, w, NULL, isint, integral));
  for (int i = 1; i < n; i++)
    w = wf_lo_weak_call(F, op, w, wf_lo_weak_of(F, &x[i]), isint, integral);
  return wf_lo_weak_rv(w);
}

/* A call of a scalar math builtin: lower its arguments once; when all are
** untyped numbers, an untyped result; else the arguments are bound to
** pseudo-locals "(arg)" and the call, rewritten to read them, goes on to
** the builtin's own lowering (returns -1 with *call replaced). */
static int math_call(wf_fstate *F, int op, wf_expr **callp, wf_rv *out) {
  wf_expr *call = *callp;
  int n = call->nargs, na = wf_opinfo_tab[op].nargs;
  int minmax = op == WF_OP_MIN || op == WF_OP_MAX;
  if (minmax ? n < 2 || n > 8 : n != na) return -1; /* the builtin's own message */
  for (int i = 0; i < n; i++)                       /* already rewritten */
    if (call->args[i]->kind == E_NAME && call->args[i]->name[0] == '(') return -1;
  wf_rv x[8];
  int untyped = 1;
  for (int i = 0; i < n; i++) {
    x[i] = wf_lo_expr(F, call->args[i]);
    if (x[i].kind != RV_VAL && !wf_lo_isnum(&x[i])) wf_lo_value(F, &x[i], NULL, call->args[i]);
    untyped = untyped && wf_lo_isnum(&x[i]);
  }
  F->b.loc = (wf_loc){call->line, call->col};
  if (untyped) {
    out[0] = untyped_call(F, op, n, x);
    return 1;
  }
  wf_expr *c2 = wf_front_alloc(F->C, sizeof *c2);
  *c2 = *call;
  c2->args = wf_front_alloc(F->C, sizeof(wf_expr *) * (size_t)n);
  for (int i = 0; i < n; i++) {
    wf_expr *a = wf_front_alloc(F->C, sizeof *a);
    *a = *call->args[i];
    a->kind = E_NAME;
    a->name = "(arg)";
    int vi = wf_lo_addvar(F, a->name, WF_NOVAL, NULL);
    if (x[i].kind == RV_VAL) {
      F->vars[vi].v = x[i].v;
      F->vars[vi].t = x[i].t;
    } else {
      F->vars[vi].islit = 1;
      F->vars[vi].litint = x[i].isint;
      F->vars[vi].num = x[i].num;
      F->vars[vi].weak = x[i].kind == RV_WEAK ? x[i].weak : NULL;
    }
    /* each argument its own name: the last one bound is found first */
    char *nm = wf_front_alloc(F->C, 16);
    snprintf(nm, 16, "(arg%d)", i);
    F->vars[vi].name = nm;
    a->name = nm;
    c2->args[i] = a;
  }
  *callp = c2;
  return -1;
}

int wf_bi_luamath(wf_fstate *F, const char *name, wf_expr **callp, wf_rv *out) {
  wf_expr *call = *callp;
  if (!strcmp(name, "rad") || !strcmp(name, "deg")) return rad_deg(F, name, call, out);
  if (!strcmp(name, "log") && call->nargs == 2) return log_base(F, call, out);
  if (!strcmp(name, "idiv") || !strcmp(name, "fmod")) return idiv_fmod(F, name, call, out);
  if (!strcmp(name, "ldexp")) return ldexp_call(F, call, out);
  if (!strcmp(name, "frexp")) return frexp_call(F, call, out);
  if (!strcmp(name, "modf")) return modf_call(F, call, out);
  int op = math_op(name);
  if (op >= 0) return math_call(F, op, callp, out);
  return -1;
}
