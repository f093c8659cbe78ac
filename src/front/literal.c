/*
** literal.c -- untyped numbers in the typed lowering.
**
** Takes number literals (RV_LIT) and conditionals of them (RV_WEAK, see
** wf_weak in lower.h) as expressions produce them, and gives them a type
** where they are used: typed constants checked to fit (wf_lo_lit_as),
** SELECTs of constants or arithmetic done in the type of the use
** (wf_lo_weak_as), conversions as weft.T(x) does (wf_lo_num_cast). Folds
** arithmetic and comparisons on literals leaf by leaf, with Lua's double
** arithmetic (wf_lo_fold_lits, wf_lo_weak_binop).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)
#define TN(t) wf_lo_tname(F->C, (t))

static const wf_type *t_bool(wf_fstate *F) {
  return wf_t_bool(F->C->T);
}

wf_rv wf_lo_mklit(double num, int isint) {
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_LIT;
  r.num = num;
  r.isint = isint;
  return r;
}

/* The range of int type t: lo <= v < hi (exact in double). */
static void int_range(const wf_type *t, double *lo, double *hi) {
  *lo = t->is_signed ? -ldexp(1, t->bits - 1) : 0;
  *hi = ldexp(1, t->is_signed ? t->bits - 1 : t->bits);
}

/* An integer-valued double in int type t's range, as the constant's bits. */
int64_t wf_lo_int_bits(double v) {
  return v >= 0x1p63 ? (int64_t)(uint64_t)v : (int64_t)v;
}

/* The shortest text that reads back as v (integers in full). */
static const char *numtext(wf_fstate *F, double v) {
  char *buf = wf_front_alloc(F->C, 40);
  snprintf(buf, 40, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, 40, "%.17g", v);
  return buf;
}

/* Check that the number v fits int type t (a literal never wraps). */
void wf_lo_check_int_fits(wf_fstate *F, double v, const wf_type *t, wf_expr *at) {
  double lo, hi;
  int_range(t, &lo, &hi);
  if (!(v >= lo && v < hi))
    ERR(at, "cannot use the number %s as %s (out of range %s..%s)", numtext(F, v), TN(t),
        numtext(F, lo), numtext(F, hi - 1));
}

/* Materialize a literal as a constant of type t, checking it fits. */
wf_val wf_lo_lit_as(wf_fstate *F, wf_rv *r, const wf_type *t, wf_expr *at) {
  if (t->kind == WF_T_INT) {
    if (!isfinite(r->num) || r->num != floor(r->num))
      ERR(at, "cannot use the number %g as %s (not an integer)", r->num, TN(t));
    wf_lo_check_int_fits(F, r->num, t, at);
    return wf_b_consti(&F->b, t, wf_lo_int_bits(r->num));
  }
  if (t->kind == WF_T_FLOAT) {
    /* a finite literal past the type's largest value would become inf */
    double max = t->bits == 16 ? 65519.99 : t->bits == 32 ? 0x1.fffffefffffffp127 : INFINITY;
    if (isfinite(r->num) && fabs(r->num) > max)
      ERR(at, "cannot use the number %s as %s (out of range)", numtext(F, r->num), TN(t));
    return wf_b_constf(&F->b, t, r->num);
  }
  if (wf_lo_is_agg(t) && t->kind != WF_T_STRUCT)
    ERR(at, "cannot use the number %g as %s", r->num, TN(t));
  ERR(at, "cannot use a number as %s", TN(t));
}

/* Fold an arithmetic operation on two literals (Lua semantics). */
wf_rv wf_lo_fold_lits(int op, wf_rv a, wf_rv b) {
  double x = a.num, y = b.num, r = 0;
  int isint = a.isint && b.isint;
  switch (op) {
  case '+': r = x + y; break;
  case '-': r = x - y; break;
  case '*': r = x * y; break;
  case '/': /* always a float, as in Lua 5.3: 6 / 3 is 2.0 */
    r = x / y;
    isint = 0;
    break;
  case '%': r = x - floor(x / y) * y; break;
  case '^':
    r = pow(x, y);
    isint = 0;
    break;
  }
  return wf_lo_mklit(r, isint);
}

/* ======================================================================
** weak numbers: conditionals of literals (see wf_weak in lower.h)
** ====================================================================== */
#define WEAK_MAXLEAVES 64 /* folding literals leaf by leaf stops here */

wf_weak *wf_lo_weak_new(wf_fstate *F) {
  wf_weak *w = wf_front_alloc(F->C, sizeof *w);
  w->cond = WF_NOVAL;
  w->dyn = WF_NOVAL;
  w->loc = F->b.loc;
  return w;
}

const wf_weak *wf_lo_weak_leaf(wf_fstate *F, double num, int isint) {
  wf_weak *w = wf_lo_weak_new(F);
  w->num = num;
  w->isint = isint;
  w->integral = isfinite(num) && num == floor(num);
  return w;
}

const wf_weak *wf_lo_weak_node(wf_fstate *F, wf_val cond, const wf_weak *a, const wf_weak *b) {
  wf_weak *w = wf_lo_weak_new(F);
  w->cond = cond;
  w->isint = a->isint && b->isint;
  w->integral = a->integral && b->integral;
  w->a = a;
  w->b = b;
  return w;
}

const wf_weak *wf_lo_weak_dyn(wf_fstate *F, wf_val v, int isint, int integral) {
  wf_weak *w = wf_lo_weak_new(F);
  w->dyn = v;
  w->isint = isint;
  w->integral = integral;
  return w;
}

/* a op b (b NULL for op 'n', negation), done at the type of the use. */
static const wf_weak *weak_opnode(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b) {
  wf_weak *w = wf_lo_weak_new(F);
  w->op = op;
  w->a = a;
  w->b = b;
  int keeps = op == 'n' || op == '+' || op == '-' || op == '*' || op == '%';
  w->isint = keeps && a->isint && (!b || b->isint);
  w->integral = keeps && a->integral && (!b || b->integral);
  return w;
}

/* The weak number of an RV_LIT or RV_WEAK. */
const wf_weak *wf_lo_weak_of(wf_fstate *F, const wf_rv *r) {
  return r->kind == RV_WEAK ? r->weak : wf_lo_weak_leaf(F, r->num, r->isint);
}

int wf_lo_weak_isleaf(const wf_weak *w) {
  return w->cond == WF_NOVAL && !w->op;
}

/* An expression result for w (a literal leaf is a plain RV_LIT). */
wf_rv wf_lo_weak_rv(const wf_weak *w) {
  if (wf_lo_weak_isleaf(w) && w->dyn == WF_NOVAL) return wf_lo_mklit(w->num, w->isint);
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_WEAK;
  r.weak = w;
  r.isint = w->isint;
  return r;
}

wf_rv wf_lo_weak_select(wf_fstate *F, wf_val cond, const wf_rv *x, const wf_rv *y) {
  return wf_lo_weak_rv(wf_lo_weak_node(F, cond, wf_lo_weak_of(F, x), wf_lo_weak_of(F, y)));
}

/* Literal leaves under w when it is only conditionals of literals, else a
** number above any limit. */
static int weak_leaves(const wf_weak *w) {
  if (w->op || w->dyn != WF_NOVAL) return WEAK_MAXLEAVES + 1;
  if (w->cond == WF_NOVAL) return 1;
  int n = weak_leaves(w->a) + weak_leaves(w->b);
  return n > WEAK_MAXLEAVES ? WEAK_MAXLEAVES + 1 : n;
}

static int is_num_type(const wf_type *t) {
  return t->kind == WF_T_INT || t->kind == WF_T_FLOAT;
}

/* w as a value of scalar type t: SELECTs of constants of t, arithmetic
** on dyn leaves done in t. */
static wf_val weak_as1(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at) {
  if (w->cond != WF_NOVAL) {
    wf_val a = weak_as1(F, w->a, t, at), b = weak_as1(F, w->b, t, at);
    return wf_b_op3(&F->b, WF_OP_SELECT, t, w->cond, a, b);
  }
  if (!w->op && w->dyn == WF_NOVAL) {
    wf_rv r = wf_lo_mklit(w->num, w->isint);
    return wf_lo_lit_as(F, &r, t, at);
  }
  if (t->kind == WF_T_INT && !w->integral)
    ERR(at, "cannot use a number that is not always an integer as %s", TN(t));
  if (!is_num_type(t)) ERR(at, "cannot use a number as %s", TN(t));
  if (w->op >= WF_WEAK_CALL) {
    wf_op op = (wf_op)(w->op - WF_WEAK_CALL);
    wf_val a = weak_as1(F, w->a, t, at);
    if (t->kind == WF_T_INT && (wf_op_flags(op) & WF_OPF_INTID)) return a; /* floor(i) = i */
    if (!w->b) return wf_b_op1(&F->b, op, t, a);
    return wf_b_op2(&F->b, op, t, a, weak_as1(F, w->b, t, at));
  }
  if (w->op) {
    wf_val a = weak_as1(F, w->a, t, at);
    if (w->op == 'n') return wf_b_op1(&F->b, WF_OP_NEG, t, a);
    wf_val b = weak_as1(F, w->b, t, at);
    wf_rv r = wf_lo_arith(F, w->op, wf_lo_mkval(a, t), wf_lo_mkval(b, t), at);
    if (r.t != t) ERR(at, "cannot use a number as %s", TN(t));
    return r.v;
  }
  if (t == wf_vtype(F->fn, w->dyn)) return w->dyn;
  return wf_b_op1(&F->b, WF_OP_CAST, t, w->dyn);
}

/* The ops that build a weak number where it is used carry the position
** of the conditional (or arithmetic) that made it, not of the use. */
static wf_loc weak_at(wf_fstate *F, const wf_weak *w) {
  wf_loc saved = F->b.loc;
  if (w->loc.line > 0) F->b.loc = w->loc;
  return saved;
}

wf_val wf_lo_weak_as(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at) {
  wf_loc saved = weak_at(F, w);
  wf_val v = weak_as1(F, w, t, at);
  F->b.loc = saved;
  return v;
}

/* w as a bool (leaves are 0 or 1: folded comparisons). */
static wf_val weak_bool1(wf_fstate *F, const wf_weak *w) {
  if (w->cond == WF_NOVAL) return wf_b_consti(&F->b, t_bool(F), w->num != 0);
  wf_val a = weak_bool1(F, w->a), b = weak_bool1(F, w->b);
  return wf_b_op3(&F->b, WF_OP_SELECT, t_bool(F), w->cond, a, b);
}

wf_val wf_lo_weak_bool(wf_fstate *F, const wf_weak *w) {
  wf_loc saved = weak_at(F, w);
  wf_val v = weak_bool1(F, w);
  F->b.loc = saved;
  return v;
}

int wf_lo_num_integral(const wf_rv *r) {
  if (r->kind == RV_WEAK) return r->weak->integral;
  return r->kind == RV_LIT && isfinite(r->num) && r->num == floor(r->num);
}

/* Convert as weft.T(x) does: truncate to ints, x ~= 0 for bool. */
static wf_val weak_cast1(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at) {
  if (w->cond != WF_NOVAL) {
    wf_val a = weak_cast1(F, w->a, t, at), b = weak_cast1(F, w->b, t, at);
    return wf_b_op3(&F->b, WF_OP_SELECT, t, w->cond, a, b);
  }
  if (!w->op && w->dyn == WF_NOVAL) {
    double v = w->num;
    if (t->kind == WF_T_INT) {
      /* as the backends convert at run time (llvm.fptosi.sat, the CUDA
      ** prelude): truncated, saturated at the type's limits, NaN -> 0 */
      double lo, hi;
      int_range(t, &lo, &hi);
      uint64_t max = t->is_signed    ? (UINT64_C(1) << (t->bits - 1)) - 1
                     : t->bits == 64 ? UINT64_MAX
                                     : (UINT64_C(1) << t->bits) - 1;
      int64_t k = v != v    ? 0
                  : v <= lo ? (int64_t)lo
                  : v >= hi ? (int64_t)max
                            : wf_lo_int_bits(trunc(v));
      return wf_b_consti(&F->b, t, k);
    }
    if (t->kind == WF_T_BOOL) v = v != 0;
    return wf_lo_const(F, t, v);
  }
  if (t->kind == WF_T_FLOAT) return weak_as1(F, w, t, at);
  /* through float64, which holds every literal exactly */
  const wf_type *dt = wf_t_float(F->C->T, 64);
  wf_val d = weak_as1(F, w, dt, at);
  if (t->kind == WF_T_BOOL) return wf_b_op2(&F->b, WF_OP_NE, t, d, wf_b_constf(&F->b, dt, 0));
  return wf_b_op1(&F->b, WF_OP_CAST, t, d);
}

wf_val wf_lo_num_cast(wf_fstate *F, const wf_rv *r, const wf_type *t, wf_expr *at) {
  const wf_weak *w = wf_lo_weak_of(F, r);
  wf_loc saved = weak_at(F, w);
  wf_val v = weak_cast1(F, w, t, at);
  F->b.loc = saved;
  return v;
}

/* A comparison of two literals (bool as 0 or 1). */
static wf_rv fold_cmp(int op, double x, double y) {
  int r = 0;
  switch (op) {
  case TK_EQ: r = x == y; break;
  case TK_NE: r = x != y; break;
  case '<': r = x < y; break;
  case TK_LE: r = x <= y; break;
  case '>': r = x > y; break;
  case TK_GE: r = x >= y; break;
  }
  return wf_lo_mklit(r, 1);
}

static int is_arith(int op) {
  return op && strchr("+-*/%^", op) != NULL;
}

/* a op b leaf by leaf (arithmetic, or a comparison giving 0/1 leaves) for
** conditionals of literals (weak_leaves bounds the size). */
static const wf_weak *weak_fold(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b) {
  if (a->cond != WF_NOVAL || b->cond != WF_NOVAL) {
    const wf_weak *n = a->cond != WF_NOVAL ? a : b;
    const wf_weak *x = weak_fold(F, op, n == a ? a->a : a, n == b ? b->a : b);
    const wf_weak *y = weak_fold(F, op, n == a ? a->b : a, n == b ? b->b : b);
    return wf_lo_weak_node(F, n->cond, x, y);
  }
  wf_rv r = is_arith(op)
                ? wf_lo_fold_lits(op, wf_lo_mklit(a->num, a->isint), wf_lo_mklit(b->num, b->isint))
                : fold_cmp(op, a->num, b->num);
  return wf_lo_weak_leaf(F, r.num, r.isint);
}

/* a op b for two untyped numbers, one of them weak: folded when small,
** else (arithmetic) an op done at the type of the use; NULL for a
** comparison that cannot be folded. */
const wf_weak *wf_lo_weak_binop(wf_fstate *F, int op, const wf_rv *a, const wf_rv *b) {
  const wf_weak *wa = wf_lo_weak_of(F, a), *wb = wf_lo_weak_of(F, b);
  int na = weak_leaves(wa), nb = weak_leaves(wb);
  if (na <= WEAK_MAXLEAVES && nb <= WEAK_MAXLEAVES && na * nb <= WEAK_MAXLEAVES)
    return weak_fold(F, op, wa, wb);
  return is_arith(op) ? weak_opnode(F, op, wa, wb) : NULL;
}

const wf_weak *wf_lo_weak_call(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b, int isint,
                               int integral) {
  wf_weak *w = wf_lo_weak_new(F);
  w->op = WF_WEAK_CALL + op;
  w->a = a;
  w->b = b;
  w->isint = isint;
  w->integral = integral;
  return w;
}

const wf_weak *wf_lo_weak_neg(wf_fstate *F, const wf_weak *w) {
  if (weak_leaves(w) > WEAK_MAXLEAVES) return weak_opnode(F, 'n', w, NULL);
  if (w->cond != WF_NOVAL)
    return wf_lo_weak_node(F, w->cond, wf_lo_weak_neg(F, w->a), wf_lo_weak_neg(F, w->b));
  return wf_lo_weak_leaf(F, -w->num, w->isint);
}
