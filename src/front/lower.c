/*
** lower.c -- typed lowering of the kernel AST into SSA IR.
**
** Typing and emission happen in one walk: every expression lowers to a
** wf_rv (a typed IR value, an untyped number literal or conditional of
** literals, or a compile-time Lua value such as a type or a builtin).
** Statements rebind locals (see lower.h); `if` merges changed bindings
** through the if's results (a local both branches leave untyped merges into
** a weak conditional instead, see wf_var); a loop body is first probed
** (lowered into a scratch block) to learn which bindings it changes (and
** their types), then lowered for real with those bindings carried as block
** parameters. A loop met during a probe is only probed itself, and probes
** are remembered per loop and incoming binding types, so a nest of depth d
** costs O(d) body lowerings in the usual case, not 2^d.
**
** Early exits: `break` sets the loop's "(break)" flag and `return` sets
** "(ret)" (plus the return values); the statements after one that may exit
** are guarded by `if not flag`, and loops test the flags in their condition.
** Numeric for loops without exits use the FOR op; with exits they become
** WHILE loops carrying the induction variable.
**
** The lowering is three files: this one (variables, values, aggregates,
** arithmetic, comparisons, indexing, expressions, assignment, statements,
** functions), literal.c (untyped number literals and weak numbers) and
** flow.c (control-flow merging: `if`, and/or, loops). lower.h holds what
** they share.
**
** As in Lua 5.3, `/` always divides as floats (integer operands give
** float32, or float64 when one is 64-bit), `%` is floored (the result has
** the sign of the divisor) and `^` is always a float power; weft.floordiv
** is Lua's `//`, weft.idiv and weft.fmod are C's (and Warp's) `/` and `%`.
*/
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"

/* ======================================================================
** errors, names
** ====================================================================== */
void wf_lo_err(wf_fstate *F, int line, int col, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  wf_front_error(F->C, &F->src, line, col, "%s", msg);
}

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)

/* User-facing type name (the Lua name when the type came from Lua). */
const char *wf_lo_tname(wf_fctx *C, const wf_type *t) {
  (void)C;
  if (!t) return "nil";
  switch (t->kind) {
  case WF_T_BOOL: return "bool";
  case WF_T_INT:
    switch (t->bits) {
    case 8: return t->is_signed ? "int8" : "uint8";
    case 16: return t->is_signed ? "int16" : "uint16";
    case 32: return t->is_signed ? "int32" : "uint32";
    default: return t->is_signed ? "int64" : "uint64";
    }
  case WF_T_FLOAT: return t->bits == 16 ? "float16" : t->bits == 32 ? "float32" : "float64";
  default: return t->name ? t->name : "?";
  }
}
#define TN(t) wf_lo_tname(F->C, (t))

/* ======================================================================
** variables
** ====================================================================== */
int wf_lo_addvar(wf_fstate *F, const char *name, wf_val v, const wf_type *t) {
  if (F->nvars == F->capvars) {
    int nc = F->capvars ? F->capvars * 2 : 32;
    wf_var *nv = wf_front_alloc(F->C, sizeof(wf_var) * (size_t)nc);
    if (F->nvars) memcpy(nv, F->vars, sizeof(wf_var) * (size_t)F->nvars);
    F->vars = nv;
    F->capvars = nc;
  }
  wf_var *x = &F->vars[F->nvars];
  x->name = name;
  x->v = v;
  x->t = t;
  x->is_param = 0;
  x->islit = 0;
  x->weak = NULL;
  x->loopline = 0;
  x->loophasnum = 0;
  return F->nvars++;
}

int wf_lo_findvar(wf_fstate *F, const char *name) {
  for (int i = F->nvars - 1; i >= 0; i--)
    if (!strcmp(F->vars[i].name, name)) return i;
  return -1;
}

wf_lo_snap wf_lo_take_snap(wf_fstate *F) {
  wf_lo_snap s;
  s.n = F->nvars;
  s.v = wf_front_alloc(F->C, sizeof(wf_var) * (size_t)(s.n ? s.n : 1));
  if (s.n) memcpy(s.v, F->vars, sizeof(wf_var) * (size_t)s.n);
  return s;
}

void wf_lo_restore_snap(wf_fstate *F, wf_lo_snap s) {
  F->nvars = s.n;
  if (s.n) memcpy(F->vars, s.v, sizeof(wf_var) * (size_t)s.n);
}

/* ======================================================================
** values
** ====================================================================== */
wf_rv wf_lo_mkval(wf_val v, const wf_type *t) {
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_VAL;
  r.v = v;
  r.t = t;
  return r;
}

/* A constant of scalar type t (aggregates: every component). */
wf_val wf_lo_const(wf_fstate *F, const wf_type *t, double v) {
  if (t->kind == WF_T_FLOAT) return wf_b_constf(&F->b, t, v);
  if (t->kind == WF_T_INT || t->kind == WF_T_BOOL) return wf_b_consti(&F->b, t, (int64_t)v);
  int n = wf_t_arity(t);
  /* structs may have more than WF_MAX_COMP fields */
  wf_val *c = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++)
    c[i] = wf_lo_const(F, wf_t_component(F->C->T, t, i), v);
  return wf_b_agg(&F->b, t, n, c);
}

static const wf_type *t_i32(wf_fstate *F) {
  return wf_t_int(F->C->T, 32, 1);
}
static const wf_type *t_f32(wf_fstate *F) {
  return wf_t_float(F->C->T, 32);
}
static const wf_type *t_bool(wf_fstate *F) {
  return wf_t_bool(F->C->T);
}

/* Scalar element type of an aggregate (or the type itself for scalars). */
static const wf_type *scalar_of(const wf_type *t) {
  while (t && t->kind != WF_T_BOOL && t->kind != WF_T_INT && t->kind != WF_T_FLOAT && t->elem &&
         t->kind != WF_T_ARRAY)
    t = t->elem;
  return t;
}

int wf_lo_is_agg(const wf_type *t) {
  return t->kind == WF_T_VEC || t->kind == WF_T_MAT || t->kind == WF_T_QUAT ||
         t->kind == WF_T_TRANSFORM || t->kind == WF_T_STRUCT;
}

static const char *rvdesc(wf_fstate *F, wf_rv *r) {
  static const char *const lk[] = {[LV_TYPE] = "the type ",
                                   [LV_BUILTIN] = "the builtin ",
                                   [LV_FUNC] = "the weft.func ",
                                   [LV_NS] = "",
                                   [LV_TYPEFN] = "the type constructor "};
  char *buf = wf_front_alloc(F->C, 160);
  switch (r->kind) {
  case RV_NONE: return "no value";
  case RV_VAL: return TN(r->t);
  case RV_LIT:
  case RV_WEAK: return "a number";
  case RV_STR: return "a string";
  case RV_SHAPE: return "a shape";
  case RV_LUA:
    if (r->lk == LV_NS)
      snprintf(buf, 160, "the Lua table '%s'", r->str ? r->str : "?");
    else if (r->lk == LV_TYPE)
      snprintf(buf, 160, "the type %s", TN(r->t));
    else
      snprintf(buf, 160, "%s'%s'", (unsigned)r->lk < sizeof lk / sizeof *lk ? lk[r->lk] : "",
               r->str ? r->str : "?");
    return buf;
  }
  return "?";
}

/* Is v the quotient of a `/` on integers (a float DIV of a converted int)? */
static int int_quotient(wf_fstate *F, wf_val v) {
  const wf_inst *d = F->fn->vals[v].def;
  if (!d || d->op != WF_OP_DIV || d->nargs != 2) return 0;
  for (int k = 0; k < 2; k++) {
    const wf_inst *c = F->fn->vals[d->args[k]].def;
    if (c && c->op == WF_OP_CAST && wf_vtype(F->fn, c->args[0])->kind == WF_T_INT) return 1;
  }
  return 0;
}

#define DIV_HINT                                                                                   \
  " ('/' always divides as floats, as in Lua; for an integer quotient use weft.floordiv(a, b), "   \
  "Lua's //, or weft.idiv(a, b), which truncates like C)"

/* Why a value r of type has where want was needed (read from a number
** literal local typed by a loop, or a `/` of integers where an integer
** was wanted): appended to the error, or "". */
static const char *why(wf_fstate *F, const wf_rv *r, const wf_type *want) {
  if (r->kind == RV_VAL && r->t->kind == WF_T_FLOAT && want && want->kind == WF_T_INT &&
      int_quotient(F, r->v))
    return DIV_HINT;
  if (r->kind != RV_VAL || !r->why) return "";
  char *buf = wf_front_alloc(F->C, 400);
  const char *wn = want && (want->kind == WF_T_INT || want->kind == WF_T_FLOAT) ? TN(want) : NULL;
  char eg[160] = "", num[40];
  if (wn && r->why->hasnum) {
    /* the shortest form that reads back as the same number */
    snprintf(num, sizeof num, "%.15g", r->why->num);
    if (strtod(num, NULL) != r->why->num) snprintf(num, sizeof num, "%.17g", r->why->num);
    snprintf(eg, sizeof eg, ", e.g. local %s = weft.%s(%s)", r->why->name, wn, num);
  }
  snprintf(buf, 400,
           " (local '%s' was given a number literal and is assigned in the loop at line %d, "
           "which carries it as %s; give it its type where it is declared%s)",
           r->why->name, r->why->loopline, TN(r->t), eg);
  return buf;
}
/* why() for a binary operation on a and b */
#define WHY2(a, b, ta, tb) (*why(F, a, tb) ? why(F, a, tb) : why(F, b, ta))

wf_val wf_lo_value(wf_fstate *F, wf_rv *r, const wf_type *want, wf_expr *at) {
  switch (r->kind) {
  case RV_VAL:
    if (want && r->t != want) ERR(at, "expected %s, got %s%s", TN(want), TN(r->t), why(F, r, want));
    return r->v;
  case RV_LIT:
    if (!want) want = r->isint ? t_i32(F) : t_f32(F);
    return wf_lo_lit_as(F, r, want, at);
  case RV_WEAK:
    if (!want) want = r->isint ? t_i32(F) : t_f32(F);
    if (want->kind != WF_T_INT && want->kind != WF_T_FLOAT)
      ERR(at, "cannot use a number as %s", TN(want));
    return wf_lo_weak_as(F, r->weak, want, at);
  case RV_NONE: ERR(at, "expression has no value");
  case RV_STR: ERR(at, "strings are only supported as print's format argument");
  case RV_SHAPE: ERR(at, "x.shape must be indexed with a constant: x.shape[0]");
  case RV_LUA: ERR(at, "%s cannot be used as a value", rvdesc(F, r));
  }
  return WF_NOVAL;
}

/* ======================================================================
** component-wise arithmetic on aggregates
** ====================================================================== */
wf_val wf_lo_cw2(wf_fstate *F, wf_op op, const wf_type *t, wf_val a, wf_val b, int b_scalar) {
  if (wf_t_is_scalar(t)) return wf_b_op2(&F->b, op, t, a, b);
  int n = wf_t_arity(t); /* no structs here */
  wf_val c[WF_MAX_COMP];
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(F->C->T, t, i);
    wf_val ca = wf_b_extract(&F->b, a, i);
    wf_val cb = b_scalar ? b : wf_b_extract(&F->b, b, i);
    c[i] = wf_lo_cw2(F, op, ct, ca, cb, b_scalar);
  }
  return wf_b_agg(&F->b, t, n, c);
}

wf_val wf_lo_cw1(wf_fstate *F, wf_op op, const wf_type *t, wf_val a) {
  if (wf_t_is_scalar(t)) return wf_b_op1(&F->b, op, t, a);
  int n = wf_t_arity(t); /* no structs here */
  wf_val c[WF_MAX_COMP];
  for (int i = 0; i < n; i++)
    c[i] = wf_lo_cw1(F, op, wf_t_component(F->C->T, t, i), wf_b_extract(&F->b, a, i));
  return wf_b_agg(&F->b, t, n, c);
}

/* All components equal (bool). */
static wf_val cw_eq(wf_fstate *F, const wf_type *t, wf_val a, wf_val b) {
  if (wf_t_is_scalar(t)) return wf_b_op2(&F->b, WF_OP_EQ, t_bool(F), a, b);
  int n = wf_t_arity(t);
  wf_val acc = WF_NOVAL;
  for (int i = 0; i < n; i++) {
    wf_val e = cw_eq(F, wf_t_component(F->C->T, t, i), wf_b_extract(&F->b, a, i),
                     wf_b_extract(&F->b, b, i));
    acc = acc == WF_NOVAL ? e : wf_b_op2(&F->b, WF_OP_BAND, t_bool(F), acc, e);
  }
  return acc;
}

/* Dot product of two vectors of n scalars of type st. */
static wf_val dotv(wf_fstate *F, const wf_type *st, int n, wf_val a, wf_val b) {
  wf_val acc = WF_NOVAL;
  for (int i = 0; i < n; i++) {
    wf_val p = wf_b_op2(&F->b, WF_OP_MUL, st, wf_b_extract(&F->b, a, i), wf_b_extract(&F->b, b, i));
    acc = acc == WF_NOVAL ? p : wf_b_op2(&F->b, WF_OP_ADD, st, acc, p);
  }
  return acc;
}

/* mat (r x k) * mat (k x c) and mat * vec. */
static wf_val matmul(wf_fstate *F, const wf_type *ta, wf_val a, const wf_type *tb, wf_val b,
                     const wf_type *rt) {
  wf_types *T = F->C->T;
  const wf_type *st = ta->elem;
  int r = ta->rows, k = ta->cols;
  if (tb->kind == WF_T_VEC) {
    wf_val c[WF_MAX_COMP];
    for (int i = 0; i < r; i++)
      c[i] = dotv(F, st, k, wf_b_extract(&F->b, a, i), b);
    return wf_b_agg(&F->b, rt, r, c);
  }
  int cc = tb->cols;
  /* r, k and cc are each at most WF_MAX_COMP (matrices up to 64 x 64) */
  wf_val brow[WF_MAX_COMP];
  for (int j = 0; j < k; j++)
    brow[j] = wf_b_extract(&F->b, b, j);
  const wf_type *rowt = wf_t_vec(T, cc, st);
  wf_val rows[WF_MAX_COMP];
  for (int i = 0; i < r; i++) {
    wf_val arow = wf_b_extract(&F->b, a, i);
    wf_val ai[WF_MAX_COMP], c[WF_MAX_COMP];
    for (int j = 0; j < k; j++)
      ai[j] = wf_b_extract(&F->b, arow, j);
    for (int jc = 0; jc < cc; jc++) {
      wf_val acc = WF_NOVAL;
      for (int j = 0; j < k; j++) {
        wf_val p = wf_b_op2(&F->b, WF_OP_MUL, st, ai[j], wf_b_extract(&F->b, brow[j], jc));
        acc = acc == WF_NOVAL ? p : wf_b_op2(&F->b, WF_OP_ADD, st, acc, p);
      }
      c[jc] = acc;
    }
    rows[i] = wf_b_agg(&F->b, rowt, cc, c);
  }
  return wf_b_agg(&F->b, rt, r, rows);
}

/* Hamilton product of quaternions (x y z w). */
static wf_val quatmul(wf_fstate *F, const wf_type *t, wf_val a, wf_val b) {
  const wf_type *st = t->elem;
  wf_val ax = wf_b_extract(&F->b, a, 0), ay = wf_b_extract(&F->b, a, 1),
         az = wf_b_extract(&F->b, a, 2), aw = wf_b_extract(&F->b, a, 3);
  wf_val bx = wf_b_extract(&F->b, b, 0), by = wf_b_extract(&F->b, b, 1),
         bz = wf_b_extract(&F->b, b, 2), bw = wf_b_extract(&F->b, b, 3);
#define M(x, y) wf_b_op2(&F->b, WF_OP_MUL, st, x, y)
#define A(x, y) wf_b_op2(&F->b, WF_OP_ADD, st, x, y)
#define S(x, y) wf_b_op2(&F->b, WF_OP_SUB, st, x, y)
  wf_val c[4];
  c[0] = S(A(A(M(aw, bx), M(ax, bw)), M(ay, bz)), M(az, by));
  c[1] = A(A(S(M(aw, by), M(ax, bz)), M(ay, bw)), M(az, bx));
  c[2] = A(S(A(M(aw, bz), M(ax, by)), M(ay, bx)), M(az, bw));
  c[3] = S(S(S(M(aw, bw), M(ax, bx)), M(ay, by)), M(az, bz));
#undef M
#undef A
#undef S
  return wf_b_agg(&F->b, t, 4, c);
}

/* An aggregate of type t with every scalar component s. */
static wf_val splat(wf_fstate *F, const wf_type *t, wf_val s) {
  if (wf_t_is_scalar(t)) return s;
  int n = wf_t_arity(t);
  wf_val c[WF_MAX_COMP];
  for (int i = 0; i < n; i++)
    c[i] = splat(F, wf_t_component(F->C->T, t, i), s);
  return wf_b_agg(&F->b, t, n, c);
}

static const char *opverb(int op) {
  switch (op) {
  case '+': return "add";
  case '-': return "subtract";
  case '*': return "multiply";
  case '/': return "divide";
  case '%': return "take the remainder of";
  case '^': return "raise";
  default: return "compare";
  }
}

static wf_op arith_op(int op) {
  switch (op) {
  case '+': return WF_OP_ADD;
  case '-': return WF_OP_SUB;
  case '*': return WF_OP_MUL;
  case '/': return WF_OP_DIV;
  case '%': return WF_OP_MOD;
  default: return WF_OP_POW;
  }
}

/* Float type to compute `^` in for an int type. */
static const wf_type *pow_type(wf_fstate *F, const wf_type *t) {
  if (t->kind == WF_T_FLOAT) return t;
  return wf_t_float(F->C->T, t->bits == 64 ? 64 : 32);
}

wf_rv wf_lo_arith(wf_fstate *F, int op, wf_rv a, wf_rv b, wf_expr *at) {
  if (a.kind == RV_LIT && b.kind == RV_LIT) return wf_lo_fold_lits(op, a, b);
  /* a weak number stays weak: `(c and 1 or 0) * 0.5` */
  if (wf_lo_isnum(&a) && wf_lo_isnum(&b)) return wf_lo_weak_rv(wf_lo_weak_binop(F, op, &a, &b));
  if (!wf_lo_isnum(&a) && a.kind != RV_VAL) wf_lo_value(F, &a, NULL, at);
  if (!wf_lo_isnum(&b) && b.kind != RV_VAL) wf_lo_value(F, &b, NULL, at);
  const wf_type *ta = a.kind == RV_VAL ? a.t : NULL, *tb = b.kind == RV_VAL ? b.t : NULL;
  /* scalar op scalar (a literal adapts to the typed side) */
  const wf_type *sa = ta ? ta : tb, *sb = tb ? tb : ta;
  if (wf_t_is_scalar(sa) && wf_t_is_scalar(sb)) {
    if (sa != sb)
      ERR(at, "cannot %s %s and %s%s", opverb(op), TN(ta), TN(tb), WHY2(&a, &b, ta, tb));
    if (sa->kind == WF_T_BOOL) ERR(at, "cannot %s bool values", opverb(op));
    if (op == '^' || (op == '/' && sa->kind == WF_T_INT)) {
      /* a float power, and `/`, which always divides as floats (Lua):
      ** a literal operand is taken as the float type directly (`i ^ 0.5`
      ** on an int), typed ints are converted (to float32, or float64 for
      ** 64-bit ints); weft.idiv and weft.floordiv divide integers */
      const wf_type *ft = pow_type(F, sa);
      wf_val va = wf_lo_isnum(&a) ? wf_lo_value(F, &a, ft, at) : a.v;
      wf_val vb = wf_lo_isnum(&b) ? wf_lo_value(F, &b, ft, at) : b.v;
      if (a.kind == RV_VAL && ft != sa) va = wf_b_op1(&F->b, WF_OP_CAST, ft, va);
      if (b.kind == RV_VAL && ft != sa) vb = wf_b_op1(&F->b, WF_OP_CAST, ft, vb);
      return wf_lo_mkval(wf_b_op2(&F->b, arith_op(op), ft, va, vb), ft);
    }
    wf_val va = wf_lo_value(F, &a, sa, at), vb = wf_lo_value(F, &b, sa, at);
    return wf_lo_mkval(wf_b_op2(&F->b, arith_op(op), sa, va, vb), sa);
  }
  /* aggregates */
  if (ta && tb && ta == tb && (op == '+' || op == '-') && wf_lo_is_agg(ta) &&
      ta->kind != WF_T_STRUCT)
    return wf_lo_mkval(wf_lo_cw2(F, arith_op(op), ta, a.v, b.v, 0), ta);
  if (op == '*' || op == '/') {
    /* aggregate times / divided by a scalar */
    const wf_type *agt = ta && wf_lo_is_agg(ta) ? ta : NULL;
    if (agt && agt->kind != WF_T_STRUCT && (!tb || wf_t_is_scalar(tb))) {
      const wf_type *st = scalar_of(agt);
      wf_val s = wf_lo_value(F, &b, st, at);
      return wf_lo_mkval(wf_lo_cw2(F, arith_op(op), agt, a.v, s, 1), agt);
    }
    if (tb && wf_lo_is_agg(tb) && tb->kind != WF_T_STRUCT && (!ta || wf_t_is_scalar(ta))) {
      const wf_type *st = scalar_of(tb);
      wf_val s = wf_lo_value(F, &a, st, at);
      if (op == '*') return wf_lo_mkval(wf_lo_cw2(F, WF_OP_MUL, tb, b.v, s, 1), tb);
      /* Warp's scalar / vector and scalar / matrix: componentwise */
      return wf_lo_mkval(wf_lo_cw2(F, WF_OP_DIV, tb, splat(F, tb, s), b.v, 0), tb);
    }
    if (op == '*' && ta && tb && ta->kind == WF_T_VEC && tb->kind == WF_T_MAT &&
        ta->rows == tb->rows && ta->elem == tb->elem) {
      /* row vector times matrix: v^T M */
      wf_types *T = F->C->T;
      const wf_type *rt = wf_t_vec(T, tb->cols, tb->elem);
      const wf_type *mt = wf_t_mat(T, 1, ta->rows, ta->elem);
      wf_val row = wf_b_agg(&F->b, mt, 1, &a.v);
      wf_val m = matmul(F, mt, row, tb, b.v, wf_t_mat(T, 1, tb->cols, tb->elem));
      return wf_lo_mkval(wf_b_extract(&F->b, m, 0), rt);
    }
    if (op == '*' && ta && tb && ta->kind == WF_T_MAT && tb->kind == WF_T_VEC &&
        ta->cols == tb->rows && ta->elem == tb->elem) {
      const wf_type *rt = wf_t_vec(F->C->T, ta->rows, ta->elem);
      return wf_lo_mkval(matmul(F, ta, a.v, tb, b.v, rt), rt);
    }
    if (op == '*' && ta && tb && ta->kind == WF_T_MAT && tb->kind == WF_T_MAT &&
        ta->cols == tb->rows && ta->elem == tb->elem) {
      const wf_type *rt = wf_t_mat(F->C->T, ta->rows, tb->cols, ta->elem);
      return wf_lo_mkval(matmul(F, ta, a.v, tb, b.v, rt), rt);
    }
    if (op == '*' && ta && ta == tb && ta->kind == WF_T_QUAT)
      return wf_lo_mkval(quatmul(F, ta, a.v, b.v), ta);
    if (op == '*' && ta && ta == tb && ta->kind == WF_T_TRANSFORM) {
      /* Warp's transform_multiply: (rotate(a.q, b.p) + a.p, a.q b.q) */
      const wf_type *vt = wf_t_component(F->C->T, ta, 0), *qt = wf_t_component(F->C->T, ta, 1);
      wf_val aq = wf_b_extract(&F->b, a.v, 1);
      wf_val p = wf_bi_quat_rotate(F, qt, aq, vt, wf_b_extract(&F->b, b.v, 0));
      wf_val c[2] = {wf_lo_cw2(F, WF_OP_ADD, vt, p, wf_b_extract(&F->b, a.v, 0), 0),
                     quatmul(F, qt, aq, wf_b_extract(&F->b, b.v, 1))};
      return wf_lo_mkval(wf_b_agg(&F->b, ta, 2, c), ta);
    }
  }
  ERR(at, "cannot %s %s and %s", opverb(op), ta ? TN(ta) : "a number", tb ? TN(tb) : "a number");
}

/* ======================================================================
** comparisons and logic
** ====================================================================== */
static wf_rv compare(wf_fstate *F, int op, wf_rv a, wf_rv b, wf_expr *at) {
  if (a.kind == RV_LIT && b.kind == RV_LIT) {
    int r = 0;
    switch (op) {
    case TK_EQ: r = a.num == b.num; break;
    case TK_NE: r = a.num != b.num; break;
    case '<': r = a.num < b.num; break;
    case TK_LE: r = a.num <= b.num; break;
    case '>': r = a.num > b.num; break;
    case TK_GE: r = a.num >= b.num; break;
    }
    return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), r), t_bool(F));
  }
  if (wf_lo_isnum(&a) && wf_lo_isnum(&b)) {
    /* compared leaf by leaf, in double precision as Lua would */
    const wf_weak *w = wf_lo_weak_binop(F, op, &a, &b);
    if (w) return wf_lo_mkval(wf_lo_weak_bool(F, w), t_bool(F));
    /* in float64, which holds every literal exactly, as Lua compares */
    const wf_type *dt = wf_t_float(F->C->T, 64);
    a = wf_lo_mkval(wf_lo_value(F, &a, dt, at), dt);
  }
  if (!wf_lo_isnum(&a) && a.kind != RV_VAL) wf_lo_value(F, &a, NULL, at);
  if (!wf_lo_isnum(&b) && b.kind != RV_VAL) wf_lo_value(F, &b, NULL, at);
  const wf_type *t = a.kind == RV_VAL ? a.t : b.t;
  const wf_type *ta = a.kind == RV_VAL ? a.t : NULL, *tb = b.kind == RV_VAL ? b.t : NULL;
  if (ta && tb && ta != tb)
    ERR(at, "cannot compare %s and %s%s", TN(ta), TN(tb), WHY2(&a, &b, ta, tb));
  wf_val va = wf_lo_value(F, &a, t, at), vb = wf_lo_value(F, &b, t, at);
  const wf_type *bt = t_bool(F);
  if (op == TK_EQ || op == TK_NE) {
    if (t->kind == WF_T_ARRAY || t->kind == WF_T_RNG) ERR(at, "cannot compare %s values", TN(t));
    wf_val e = wf_t_is_scalar(t) ? wf_b_op2(&F->b, op == TK_EQ ? WF_OP_EQ : WF_OP_NE, bt, va, vb)
                                 : cw_eq(F, t, va, vb);
    if (!wf_t_is_scalar(t) && op == TK_NE) e = wf_b_op1(&F->b, WF_OP_NOT, bt, e);
    return wf_lo_mkval(e, bt);
  }
  if (t->kind != WF_T_INT && t->kind != WF_T_FLOAT)
    ERR(at, "cannot order %s values with '%s'", TN(t),
        wf_tok_name(op) ? wf_tok_name(op) : (op == '<' ? "<" : ">"));
  wf_op o = op == '<' ? WF_OP_LT : op == TK_LE ? WF_OP_LE : op == '>' ? WF_OP_GT : WF_OP_GE;
  return wf_lo_mkval(wf_b_op2(&F->b, o, bt, va, vb), bt);
}

wf_val wf_lo_as_bool(wf_fstate *F, wf_rv r, wf_expr *at, const char *what) {
  if (r.kind == RV_VAL && r.t->kind == WF_T_BOOL) return r.v;
  if (r.kind == RV_VAL || wf_lo_isnum(&r))
    ERR(at, "%s must be a bool, got %s", what, r.kind == RV_VAL ? TN(r.t) : "a number");
  return wf_lo_value(F, &r, t_bool(F), at);
}

/* ======================================================================
** indexing and fields
** ====================================================================== */
wf_val wf_lo_index_key(wf_fstate *F, wf_rv k, wf_expr *at) {
  if (k.kind == RV_LIT) {
    if (!isfinite(k.num) || k.num != floor(k.num))
      ERR(at, "index must be an integer, got %g", k.num);
    /* an index past int32 is an int64 (arrays may be that large) */
    const wf_type *it = k.num >= -0x1p31 && k.num < 0x1p31 ? t_i32(F) : wf_t_int(F->C->T, 64, 1);
    wf_lo_check_int_fits(F, k.num, it, at);
    return wf_b_consti(&F->b, it, (int64_t)k.num);
  }
  if (k.kind == RV_WEAK) {
    if (!k.weak->integral) ERR(at, "index must be an integer, got a number that may not be one");
    return wf_lo_value(F, &k, t_i32(F), at);
  }
  if (k.kind != RV_VAL) wf_lo_value(F, &k, NULL, at);
  if (k.t->kind != WF_T_INT)
    ERR(at, "index must be an integer, got %s%s", TN(k.t),
        k.t->kind == WF_T_FLOAT && int_quotient(F, k.v) ? DIV_HINT : "");
  if (k.t->bits == 32 || k.t->bits == 64) return k.v;
  return wf_b_op1(&F->b, WF_OP_CAST, t_i32(F), k.v);
}

/* Constant integer value of a literal rv, or -1 with ok = 0. */
static int const_index(wf_rv k, int *ok) {
  *ok = k.kind == RV_LIT && k.num == floor(k.num);
  if (!*ok) return -1;
  /* beyond int (2^31, 1e300, inf) converting is undefined: any value out
  ** of every range will do, the callers' messages print k.num */
  if (k.num < INT_MIN || k.num > INT_MAX) return k.num < 0 ? INT_MIN : INT_MAX;
  return (int)k.num;
}

/* A dynamic component index k of a t (0..n-1) is checked: an IF around
** a TRAP that stops the launch with the position. Indexing a named local
** (`stack[k]` of `local stack = weft.vector(64, weft.int32)()`, Warp's
** local arrays), or a row of a named local matrix (`m[r][c]`), is checked
** in every mode and the message names it; other aggregates (`v[i][k]` of
** an array v) only in debug mode, release mode giving component 0 there. */
static void check_component(wf_fstate *F, const wf_type *t, wf_val k, const char *local, int row) {
  int n = wf_t_arity(t);
  const wf_type *kt = wf_vtype(F->fn, k), *bt = t_bool(F);
  wf_val out = wf_b_op2(&F->b, WF_OP_GE, bt, k, wf_b_consti(&F->b, kt, n));
  if (kt->is_signed)
    out = wf_b_op2(&F->b, WF_OP_BOR, bt, out,
                   wf_b_op2(&F->b, WF_OP_LT, bt, k, wf_b_consti(&F->b, kt, 0)));
  wf_block *saved = F->b.block;
  wf_block *bt_blk = wf_b_newblock(F->fn, 0, NULL), *be_blk = wf_b_newblock(F->fn, 0, NULL);
  char msg[160];
  if (local)
    snprintf(msg, sizeof msg, "index out of range for %slocal '%.60s' of type %s (0..%d)",
             row ? "a row of " : "", local, TN(t), n - 1);
  else
    snprintf(msg, sizeof msg, "component index out of range for %s (0..%d)", TN(t), n - 1);
  F->b.block = bt_blk;
  wf_inst *tr = wf_b_inst(&F->b, WF_OP_TRAP, 0, NULL, 0, NULL, 0);
  tr->str = wf_ir_strdup(F->C->mod, msg); /* the module's arena: it outlives the front end's */
  tr->imm = local == NULL;
  wf_b_inst(&F->b, WF_OP_YIELD, 0, NULL, 0, NULL, 0);
  F->b.block = be_blk;
  wf_b_inst(&F->b, WF_OP_YIELD, 0, NULL, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_IF, 1, &out, 0, NULL, 2);
  in->blocks[0] = bt_blk;
  in->blocks[1] = be_blk;
  bt_blk->parent = in;
  be_blk->parent = in;
}

/* The local a dynamic index at `at` reads or writes, checked in every
** mode and named in the message: `stack[k]` names 'stack', `m[r][c]` of a
** local matrix m names m (*row = 1); NULL for other aggregates (v[i][k]
** of an array v). */
static const char *indexed_local(wf_fstate *F, wf_expr *at, int *row) {
  wf_expr *o = at->a;
  *row = 0;
  if (o && o->kind == E_INDEX && o->a && o->a->kind == E_NAME) {
    int vi = wf_lo_findvar(F, o->a->name);
    if (vi < 0 || !F->vars[vi].t || F->vars[vi].t->kind != WF_T_MAT) return NULL;
    *row = 1;
    o = o->a;
  }
  return o && o->kind == E_NAME ? o->name : NULL;
}

/* Aggregates of at least this many components take dynamic indices with
** EXTRACTD and INSERTD (a local array in memory on the backends); smaller
** ones (vec3, a mat44's rows) with select chains, which stay in registers. */
#define DYN_MIN_COMPONENTS 5

/* Component c of an aggregate with a dynamic index. */
static wf_val dyn_extract(wf_fstate *F, const wf_type *t, wf_val agg, wf_val key, const char *local,
                          int row) {
  check_component(F, t, key, local, row);
  int n = wf_t_arity(t);
  if (n >= DYN_MIN_COMPONENTS) return wf_b_extractd(&F->b, agg, key);
  const wf_type *ct = wf_t_component(F->C->T, t, 0);
  const wf_type *kt = wf_vtype(F->fn, key);
  wf_val r = wf_b_extract(&F->b, agg, 0);
  for (int i = 1; i < n; i++) {
    wf_val ki = wf_b_consti(&F->b, kt, i);
    wf_val eq = wf_b_op2(&F->b, WF_OP_EQ, t_bool(F), key, ki);
    r = wf_b_op3(&F->b, WF_OP_SELECT, ct, eq, wf_b_extract(&F->b, agg, i), r);
  }
  return r;
}

/* Warp's t[i] of a transform: its 7 scalars px py pz qx qy qz qw, as a
** vector (to = 0), or that vector back as the transform of type tt. */
static wf_val transform_flat(wf_fstate *F, const wf_type *tt, wf_val v, int to) {
  wf_val c[7];
  if (!to) {
    for (int i = 0; i < 7; i++)
      c[i] = wf_b_extract(&F->b, wf_b_extract(&F->b, v, i < 3 ? 0 : 1), i < 3 ? i : i - 3);
    return wf_b_agg(&F->b, wf_t_vec(F->C->T, 7, tt->elem), 7, c);
  }
  for (int i = 0; i < 7; i++)
    c[i] = wf_b_extract(&F->b, v, i);
  wf_val pq[2] = {wf_b_agg(&F->b, wf_t_component(F->C->T, tt, 0), 3, c),
                  wf_b_agg(&F->b, wf_t_component(F->C->T, tt, 1), 4, c + 3)};
  return wf_b_agg(&F->b, tt, 2, pq);
}

/* Index into an aggregate value (v[i], m[i]). */
static wf_rv index_agg(wf_fstate *F, wf_rv obj, wf_rv key, wf_expr *at) {
  const wf_type *t = obj.t;
  if (t->kind == WF_T_TRANSFORM) {
    obj = wf_lo_mkval(transform_flat(F, t, obj.v, 0), wf_t_vec(F->C->T, 7, t->elem));
    t = obj.t;
  }
  if (t->kind != WF_T_VEC && t->kind != WF_T_MAT && t->kind != WF_T_QUAT)
    ERR(at, "cannot index a value of type %s", TN(t));
  int n = wf_t_arity(t), ok;
  int c = const_index(key, &ok);
  const wf_type *ct = wf_t_component(F->C->T, t, 0);
  if (ok) {
    if (c < 0 || c >= n) ERR(at, "index %.14g out of range for %s (0..%d)", key.num, TN(t), n - 1);
    return wf_lo_mkval(wf_b_extract(&F->b, obj.v, c), ct);
  }
  wf_val k = wf_lo_index_key(F, key, at);
  int row;
  const char *local = indexed_local(F, at, &row);
  return wf_lo_mkval(dyn_extract(F, t, obj.v, k, local, row), ct);
}

/* Index into an array value with one or more keys: peel with VIEW, load
** when all dimensions are indexed. */
static wf_rv index_array(wf_fstate *F, wf_rv arr, int nk, wf_rv *keys, wf_expr **kexp, int *used) {
  const wf_type *t = arr.t;
  int nd = t->ndim;
  if (nk >= nd) {
    wf_val args[5];
    args[0] = arr.v;
    for (int i = 0; i < nd; i++)
      args[1 + i] = wf_lo_index_key(F, keys[i], kexp[i]);
    const wf_type *et = t->elem;
    wf_val r = wf_b_inst(&F->b, WF_OP_LOAD, nd + 1, args, 1, &et, 0)->res[0];
    *used = nd;
    return wf_lo_mkval(r, et);
  }
  wf_val a = arr.v;
  for (int i = 0; i < nk; i++) {
    wf_val k = wf_lo_index_key(F, keys[i], kexp[i]);
    const wf_type *vt = wf_t_array(F->C->T, t->elem, nd - 1 - i);
    a = wf_b_op2(&F->b, WF_OP_VIEW, vt, a, k);
  }
  *used = nk;
  return wf_lo_mkval(a, wf_t_array(F->C->T, t->elem, nd - nk));
}

/* Field index of name in an aggregate type, or -1. */
static int field_index(const wf_type *t, const char *name) {
  if (t->kind == WF_T_VEC || t->kind == WF_T_QUAT) {
    int n = wf_t_arity(t);
    /* x y z w name the first four components of vectors of any length */
    if (name[0] && !name[1]) {
      const char *p = strchr("xyzw", name[0]);
      if (p && p - "xyzw" < n) return (int)(p - "xyzw");
    }
    return -1;
  }
  if (t->kind == WF_T_TRANSFORM) return !strcmp(name, "p") ? 0 : !strcmp(name, "q") ? 1 : -1;
  if (t->kind == WF_T_STRUCT)
    for (int i = 0; i < t->nfields; i++)
      if (!strcmp(t->fields[i].name, name)) return i;
  return -1;
}

static wf_rv lower_field(wf_fstate *F, wf_expr *e) {
  wf_rv obj = wf_lo_expr(F, e->a);
  if (obj.kind == RV_LUA) return wf_res_field(F, obj, e->name, e);
  if (obj.kind != RV_VAL) ERR(e, "cannot access field '%s' of %s", e->name, rvdesc(F, &obj));
  const wf_type *t = obj.t;
  if (t->kind == WF_T_ARRAY) {
    if (!strcmp(e->name, "shape")) {
      wf_rv r = obj;
      r.kind = RV_SHAPE;
      return r;
    }
    ERR(e, "arrays have no field '%s' in kernels (use .shape[k] or #a)", e->name);
  }
  int i = field_index(t, e->name);
  if (i < 0) ERR(e, "%s has no field '%s'", TN(t), e->name);
  return wf_lo_mkval(wf_b_extract(&F->b, obj.v, i), wf_t_component(F->C->T, t, i));
}

/* Lower a chain of [] on top of some base: arrays take as many keys as
** they have dimensions at once. */
static wf_rv lower_index(wf_fstate *F, wf_expr *e) {
  wf_expr *chain[16];
  int n = 0;
  wf_expr *x = e;
  while (x->kind == E_INDEX && n < 16) {
    chain[n++] = x;
    x = x->a;
  }
  wf_rv obj = wf_lo_expr(F, x);
  /* keys in source order */
  for (int i = n - 1; i >= 0;) {
    wf_expr *ie = chain[i];
    if (obj.kind == RV_SHAPE) {
      wf_rv k = wf_lo_expr(F, ie->b);
      int ok, d = const_index(k, &ok);
      if (!ok) ERR(ie->b, "x.shape must be indexed with a constant");
      if (d < 0 || d >= obj.t->ndim)
        ERR(ie->b, "shape index %.14g out of range for a %d-d array", k.num, obj.t->ndim);
      wf_inst *in = wf_b_inst(&F->b, WF_OP_SHAPE, 1, &obj.v, 1, (const wf_type *[]){t_i32(F)}, 0);
      in->imm = d;
      obj = wf_lo_mkval(in->res[0], t_i32(F));
      i--;
      continue;
    }
    if (obj.kind != RV_VAL) ERR(ie, "cannot index %s", rvdesc(F, &obj));
    if (obj.t->kind == WF_T_ARRAY) {
      wf_rv keys[16];
      wf_expr *kexp[16];
      int nk = 0;
      for (int j = i; j >= 0 && nk < obj.t->ndim; j--, nk++) {
        kexp[nk] = chain[j]->b;
        keys[nk] = wf_lo_expr(F, chain[j]->b);
      }
      int used;
      F->b.loc = (wf_loc){ie->line, ie->col};
      obj = index_array(F, obj, nk, keys, kexp, &used);
      i -= used;
      continue;
    }
    wf_rv k = wf_lo_expr(F, ie->b);
    obj = index_agg(F, obj, k, ie);
    i--;
  }
  return obj;
}

/* ======================================================================
** expressions
** ====================================================================== */
/* Nesting the lowering recurses through (a C frame or two per level).
** Lua's parser bounds parentheses and blocks but not chains of fields or
** calls (v.x.x.x..., f()()()...); left-deep arithmetic chains (a + b + c
** ...), which Lua does not bound either, are lowered without recursion. */
#define WF_MAX_EXPR_DEPTH 1000

static wf_rv lower_expr1(wf_fstate *F, wf_expr *e);

wf_rv wf_lo_expr(wf_fstate *F, wf_expr *e) {
  if (F->edepth >= WF_MAX_EXPR_DEPTH)
    ERR(e, "expression nested too deeply (more than %d levels)", WF_MAX_EXPR_DEPTH);
  F->edepth++;
  wf_rv r = lower_expr1(F, e);
  F->edepth--;
  return r;
}

/* a op b for a binary-operator node e whose operands are lowered. */
static wf_rv lower_binop(wf_fstate *F, wf_expr *e, wf_rv a, wf_rv b) {
  F->b.loc = (wf_loc){e->line, e->col};
  switch (e->op) {
  case '+':
  case '-':
  case '*':
  case '/':
  case '%':
  case '^': return wf_lo_arith(F, e->op, a, b, e);
  default: return compare(F, e->op, a, b, e);
  }
}

/* A left-deep chain of binary operators (((x op b1) op b2) ...) op bn,
** lowered bottom up in a loop, operands in source order as recursion
** would give them. */
static wf_rv lower_binchain(wf_fstate *F, wf_expr *e) {
  int n = 0;
  wf_expr *x = e;
  for (; x->kind == E_BIN; x = x->a)
    n++;
  wf_expr **spine = wf_front_alloc(F->C, sizeof(wf_expr *) * (size_t)n);
  int k = n;
  for (wf_expr *y = e; y->kind == E_BIN; y = y->a)
    spine[--k] = y;
  wf_rv acc = wf_lo_expr(F, x);
  for (int i = 0; i < n; i++) {
    wf_rv b = wf_lo_expr(F, spine[i]->b);
    acc = lower_binop(F, spine[i], acc, b);
  }
  return acc;
}

static wf_rv lower_expr1(wf_fstate *F, wf_expr *e) {
  F->b.loc = (wf_loc){e->line, e->col};
  switch (e->kind) {
  case E_NUM: return wf_lo_mklit(e->num, e->isint);
  case E_TRUE:
  case E_FALSE: return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), e->kind == E_TRUE), t_bool(F));
  case E_NIL: ERR(e, "nil is not supported in kernels");
  case E_STR: {
    wf_rv r;
    memset(&r, 0, sizeof r);
    r.kind = RV_STR;
    r.str = e->name;
    return r;
  }
  case E_NAME: {
    int vi = wf_lo_findvar(F, e->name);
    if (vi >= 0) {
      wf_var *x = &F->vars[vi];
      if (x->islit) return x->weak ? wf_lo_weak_rv(x->weak) : wf_lo_mklit(x->num, x->litint);
      if (x->v == WF_NOVAL) ERR(e, "local '%s' is used before it has a value", e->name);
      wf_rv r = wf_lo_mkval(x->v, x->t);
      if (x->loopline) {
        wf_why *w = wf_front_alloc(F->C, sizeof *w);
        w->name = x->name;
        w->loopline = x->loopline;
        w->hasnum = x->loophasnum;
        w->num = x->loopnum;
        r.why = w;
      }
      return r;
    }
    return wf_res_name(F, e->name, e);
  }
  case E_PAREN: {
    wf_rv r = wf_lo_expr(F, e->a);
    return r;
  }
  case E_FIELD: return lower_field(F, e);
  case E_INDEX: return lower_index(F, e);
  case E_CALL:
  case E_METHOD: {
    wf_rv out[WF_MAXRET];
    int n = wf_lo_call(F, e, 1, out);
    if (n == 0) {
      wf_rv r;
      memset(&r, 0, sizeof r);
      r.kind = RV_NONE;
      return r;
    }
    return out[0];
  }
  case E_BIN: return lower_binchain(F, e);
  case E_UN: {
    wf_rv a = wf_lo_expr(F, e->a);
    F->b.loc = (wf_loc){e->line, e->col};
    if (e->op == '-') {
      if (a.kind == RV_LIT) return wf_lo_mklit(-a.num, a.isint);
      if (a.kind == RV_WEAK) return wf_lo_weak_rv(wf_lo_weak_neg(F, a.weak));
      wf_val v = wf_lo_value(F, &a, NULL, e->a);
      if (a.t->kind == WF_T_BOOL || a.t->kind == WF_T_ARRAY || a.t->kind == WF_T_STRUCT ||
          a.t->kind == WF_T_RNG)
        ERR(e, "cannot negate %s", TN(a.t));
      return wf_lo_mkval(wf_lo_cw1(F, WF_OP_NEG, a.t, v), a.t);
    }
    if (e->op == TK_NOT) {
      wf_val v = wf_lo_as_bool(F, a, e->a, "operand of 'not'");
      return wf_lo_mkval(wf_b_op1(&F->b, WF_OP_NOT, t_bool(F), v), t_bool(F));
    }
    /* '#': a vector's length, a matrix's rows (a constant), an array's first dimension */
    if (a.kind == RV_VAL && (a.t->kind == WF_T_VEC || a.t->kind == WF_T_QUAT ||
                             a.t->kind == WF_T_MAT || a.t->kind == WF_T_TRANSFORM))
      return wf_lo_mklit(a.t->kind == WF_T_TRANSFORM ? 7 : wf_t_arity(a.t), 1);
    if (a.kind != RV_VAL || a.t->kind != WF_T_ARRAY)
      ERR(e, "'#' needs an array, got %s", rvdesc(F, &a));
    wf_inst *in = wf_b_inst(&F->b, WF_OP_SHAPE, 1, &a.v, 1, (const wf_type *[]){t_i32(F)}, 0);
    in->imm = 0;
    return wf_lo_mkval(in->res[0], t_i32(F));
  }
  case E_AND:
  case E_OR: return wf_lo_andor(F, e);
  case E_TABLE: ERR(e, "table constructors are only supported as struct values: P{...}");
  case E_FUNC: ERR(e, "function definitions (closures) are not supported inside kernels");
  case E_VARARG: ERR(e, "varargs ('...') are not supported in kernels");
  case E_NATIVE: return wf_lo_native(F, e);
  }
  ERR(e, "unsupported expression");
}

int wf_lo_call(wf_fstate *F, wf_expr *e, int want, wf_rv *out) {
  if (e->kind == E_METHOD) ERR(e, "method calls (':%s') are not supported in kernels", e->name);
  wf_rv callee = wf_lo_expr(F, e->a);
  F->b.loc = (wf_loc){e->line, e->col};
  if (callee.kind == RV_LUA) {
    switch (callee.lk) {
    case LV_BUILTIN: return wf_bi_call(F, callee.str, e, want, out);
    case LV_TYPE: return wf_bi_construct(F, callee.t, e, out);
    case LV_FUNC: return wf_res_callfunc(F, callee, e, want, out);
    case LV_TYPEFN: out[0] = wf_res_calltypefn(F, callee, e); return 1;
    default: break;
    }
  }
  ERR(e, "cannot call %s", rvdesc(F, &callee));
}

/* Lower an expression list into exactly n values (the last expression
** may give several: calls), Lua style. Missing values are an error. */
static void lower_exprlist(wf_fstate *F, int ne, wf_expr **es, int n, wf_rv *out, wf_expr *at) {
  int k = 0;
  for (int i = 0; i < ne; i++) {
    wf_expr *e = es[i];
    if (i == ne - 1 && (e->kind == E_CALL || e->kind == E_METHOD) && n - k > 1) {
      wf_rv tmp[WF_MAXRET];
      int need = n - k;
      int got = wf_lo_call(F, e, need, tmp);
      if (got < need)
        ERR(e, "the call gives %d value%s, %d needed", got, got == 1 ? "" : "s", need);
      for (int j = 0; j < need; j++)
        out[k++] = tmp[j];
      continue;
    }
    wf_rv r = wf_lo_expr(F, e);
    if (k < n) out[k++] = r;
  }
  if (k < n) ERR(at, "%d value%s given, %d needed", k, k == 1 ? "" : "s", n);
}

/* ======================================================================
** assignment
** ====================================================================== */
void wf_lo_assign_var(wf_fstate *F, int vi, wf_rv r, wf_expr *at) {
  wf_var *x = &F->vars[vi];
  /* a scalar parameter assigned becomes a local (Lua); an array cannot
  ** be rebound */
  if (x->is_param && x->t && x->t->kind == WF_T_ARRAY)
    ERR(at, "cannot assign to parameter '%s' of type %s", x->name, TN(x->t));
  if (r.kind == RV_NONE) ERR(at, "the call gives no value to assign to '%s'", x->name);
  if (x->islit && wf_lo_isnum(&r)) {
    if (vi >= F->loopbase) {
      /* still untyped (see wf_var): `acc = acc + 0.5` */
      x->num = r.num;
      x->litint = r.isint;
      x->weak = r.kind == RV_WEAK ? r.weak : NULL;
      return;
    }
    /* else the loop carries it: typed here, as before */
  }
  if (x->loopline && x->t && r.kind == RV_VAL && r.t != x->t) {
    /* why the local has its type */
    wf_why w = {x->name, x->loopline, x->loophasnum, x->loopnum};
    wf_rv xr = wf_lo_mkval(x->v, x->t);
    xr.why = &w;
    ERR(at, "expected %s, got %s%s", TN(x->t), TN(r.t), why(F, &xr, r.t));
  }
  wf_val v = wf_lo_value(F, &r, x->t, at);
  if (!x->t) x->t = wf_vtype(F->fn, v);
  F->vars[vi].v = v;
  F->vars[vi].islit = 0;
  F->vars[vi].weak = NULL;
}

/* Rebuild aggregate `agg` of type t with component c (const or dynamic
** key) replaced by v. */
static wf_val insert_comp(wf_fstate *F, const wf_type *t, wf_val agg, wf_rv key, int fi, wf_val v,
                          wf_expr *at) {
  if (fi >= 0) return wf_b_insert(&F->b, agg, fi, v);
  int ok, c = const_index(key, &ok);
  int n = wf_t_arity(t);
  if (t->kind == WF_T_TRANSFORM) { /* t[i] = x: through the 7 scalars */
    if (ok && (c < 0 || c >= 7)) ERR(at, "index %.14g out of range for %s (0..6)", key.num, TN(t));
    const wf_type *vt = wf_t_vec(F->C->T, 7, t->elem);
    wf_val flat = insert_comp(F, vt, transform_flat(F, t, agg, 0), key, -1, v, at);
    return transform_flat(F, t, flat, 1);
  }
  if (ok) {
    if (c < 0 || c >= n) ERR(at, "index %.14g out of range for %s (0..%d)", key.num, TN(t), n - 1);
    return wf_b_insert(&F->b, agg, c, v);
  }
  wf_val k = wf_lo_index_key(F, key, at);
  int row;
  const char *local = indexed_local(F, at, &row);
  check_component(F, t, k, local, row);
  if (n >= DYN_MIN_COMPONENTS) return wf_b_insertd(&F->b, agg, k, v);
  const wf_type *kt = wf_vtype(F->fn, k);
  const wf_type *ct = wf_t_component(F->C->T, t, 0);
  wf_val comps[WF_MAX_COMP];
  for (int i = 0; i < n; i++) {
    wf_val eq = wf_b_op2(&F->b, WF_OP_EQ, t_bool(F), k, wf_b_consti(&F->b, kt, i));
    comps[i] = wf_b_op3(&F->b, WF_OP_SELECT, ct, eq, v, wf_b_extract(&F->b, agg, i));
  }
  return wf_b_agg(&F->b, t, n, comps);
}

/* Assign r to the place described by target expression e. */
static void assign_to(wf_fstate *F, wf_expr *e, wf_rv r) {
  F->b.loc = (wf_loc){e->line, e->col};
  if (e->kind == E_NAME) {
    int vi = wf_lo_findvar(F, e->name);
    if (vi < 0) ERR(e, "cannot assign to '%s': only locals of the kernel can be assigned", e->name);
    wf_lo_assign_var(F, vi, r, e);
    return;
  }
  /* array store: a[i][j] = v with all dimensions indexed */
  if (e->kind == E_INDEX) {
    wf_expr *chain[16];
    int n = 0;
    wf_expr *x = e;
    while (x->kind == E_INDEX && n < 16)
      chain[n++] = x, x = x->a;
    /* peel to find the array base: evaluate the base object */
    wf_rv base = wf_lo_expr(F, x);
    if (base.kind == RV_VAL && base.t->kind == WF_T_ARRAY && n <= base.t->ndim) {
      const wf_type *t = base.t;
      if (n < t->ndim)
        ERR(e, "cannot assign to a %d-d view of %s; index all %d dimensions", t->ndim - n, TN(t),
            t->ndim);
      wf_val args[6];
      args[0] = base.v;
      for (int i = 0; i < n; i++) {
        wf_expr *ke = chain[n - 1 - i]->b;
        args[1 + i] = wf_lo_index_key(F, wf_lo_expr(F, ke), ke);
      }
      F->b.loc = (wf_loc){e->line, e->col};
      if (r.kind == RV_NONE) ERR(e, "the call gives no value to store");
      args[1 + n] = wf_lo_value(F, &r, t->elem, e);
      wf_b_inst(&F->b, WF_OP_STORE, n + 2, args, 0, NULL, 0);
      return;
    }
  }
  if (e->kind == E_INDEX || e->kind == E_FIELD) {
    wf_rv obj = wf_lo_expr(F, e->a);
    if (obj.kind == RV_LUA) ERR(e, "cannot assign to a field of %s", rvdesc(F, &obj));
    /* a number (literal, number local, upvalue, weft.constant) has no
    ** components to assign; other non-values raise their own message */
    if (wf_lo_isnum(&obj)) {
      if (e->kind == E_FIELD) ERR(e, "cannot assign to field '%s' of a number", e->name);
      ERR(e, "cannot index a number");
    }
    if (obj.kind == RV_SHAPE) ERR(e, "cannot assign to an array's shape");
    if (obj.kind != RV_VAL) wf_lo_value(F, &obj, NULL, e->a);
    if (obj.kind != RV_VAL || !obj.t) ERR(e, "cannot assign to this expression");
    const wf_type *t = obj.t;
    if (t->kind == WF_T_ARRAY) {
      if (e->kind == E_FIELD) ERR(e, "cannot assign to field '%s' of an array", e->name);
      ERR(e, "cannot assign to a view of %s", TN(t));
    }
    int fi = -1;
    wf_rv key;
    memset(&key, 0, sizeof key);
    const wf_type *ct;
    if (e->kind == E_FIELD) {
      fi = field_index(t, e->name);
      if (fi < 0) ERR(e, "%s has no field '%s'", TN(t), e->name);
      ct = wf_t_component(F->C->T, t, fi);
    } else {
      if (t->kind != WF_T_VEC && t->kind != WF_T_MAT && t->kind != WF_T_QUAT &&
          t->kind != WF_T_TRANSFORM)
        ERR(e, "cannot index a value of type %s", TN(t));
      key = wf_lo_expr(F, e->b);
      ct = t->kind == WF_T_TRANSFORM ? t->elem : wf_t_component(F->C->T, t, 0);
    }
    F->b.loc = (wf_loc){e->line, e->col};
    if (r.kind == RV_NONE) ERR(e, "the call gives no value to assign");
    wf_val v = wf_lo_value(F, &r, ct, e);
    wf_val nv = insert_comp(F, t, obj.v, key, fi, v, e);
    /* components of a parameter can be changed (the local copy) */
    if (e->a->kind == E_NAME) {
      int vi = wf_lo_findvar(F, e->a->name);
      if (vi >= 0) {
        F->vars[vi].v = nv;
        return;
      }
    }
    assign_to(F, e->a, wf_lo_mkval(nv, t));
    return;
  }
  ERR(e, "cannot assign to this expression");
}

/* ======================================================================
** statements
** ====================================================================== */

wf_rv wf_lo_br_rest(wf_fstate *F, void *arg) {
  wf_lo_rest *ra = arg;
  wf_lo_stmts(F, ra->b, ra->from);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

static wf_rv br_block(wf_fstate *F, void *arg) {
  wf_lo_stmts(F, (wf_block_ast *)arg, 0);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

/* not (break or return or goto continue): whether execution continues here. */
wf_val wf_lo_continuing(wf_fstate *F) {
  const wf_type *bt = t_bool(F);
  wf_val c = wf_b_op1(&F->b, WF_OP_NOT, bt, F->vars[F->retflag].v);
  if (F->brk >= 0)
    c = wf_b_op2(&F->b, WF_OP_BAND, bt, c, wf_b_op1(&F->b, WF_OP_NOT, bt, F->vars[F->brk].v));
  if (F->cont >= 0)
    c = wf_b_op2(&F->b, WF_OP_BAND, bt, c, wf_b_op1(&F->b, WF_OP_NOT, bt, F->vars[F->cont].v));
  return c;
}

void wf_lo_stmts(wf_fstate *F, wf_block_ast *b, int from) {
  int scope = F->nvars;
  for (int i = from; i < b->n; i++) {
    wf_stmt *s = b->s[i];
    int nb = F->nbreaks, nr = F->nreturns, nc = F->nconts;
    wf_lo_stmt(F, s);
    if (s->kind == S_BREAK || s->kind == S_RETURN || s->kind == S_GOTO) break;
    if ((F->nbreaks != nb || F->nreturns != nr || F->nconts != nc) && i + 1 < b->n) {
      /* the statement may exit: guard the rest of the block */
      F->b.loc = (wf_loc){b->s[i + 1]->line, b->s[i + 1]->col};
      wf_lo_rest ra = {b, i + 1};
      wf_lo_if(F, wf_lo_continuing(F), wf_lo_br_rest, &ra, NULL, NULL, 0, NULL);
      break;
    }
  }
  F->nvars = scope;
}

static void lower_local(wf_fstate *F, wf_stmt *s) {
  int n = s->nnames;
  wf_rv vals[64];
  if (n > 64) wf_lo_err(F, s->line, s->col, "too many locals in one statement");
  if (s->nexprs) {
    /* Lua: extra names get nil; we require a value for each name unless
    ** there are no values at all. */
    wf_expr at = {0};
    at.line = s->line;
    at.col = s->col;
    lower_exprlist(F, s->nexprs, s->exprs, n, vals, &at);
  }
  for (int i = 0; i < n; i++) {
    wf_val v = WF_NOVAL;
    const wf_type *t = NULL;
    if (s->nexprs) {
      wf_expr *src = i < s->nexprs ? s->exprs[i] : s->exprs[s->nexprs - 1];
      if (vals[i].kind == RV_NONE)
        wf_lo_err(F, src->line, src->col, "the call gives no value for local '%s'", s->names[i]);
      if (vals[i].kind == RV_LUA)
        wf_lo_err(F, src->line, src->col, "local '%s' cannot hold %s", s->names[i],
                  rvdesc(F, &vals[i]));
      if (wf_lo_isnum(&vals[i])) {
        /* an untyped literal local (see wf_var), possibly weak */
        int vi = wf_lo_addvar(F, s->names[i], WF_NOVAL, NULL);
        F->vars[vi].islit = 1;
        F->vars[vi].litint = vals[i].isint;
        F->vars[vi].num = vals[i].num;
        F->vars[vi].weak = vals[i].kind == RV_WEAK ? vals[i].weak : NULL;
        continue;
      }
      v = wf_lo_value(F, &vals[i], NULL, src);
      t = wf_vtype(F->fn, v);
    }
    wf_lo_addvar(F, s->names[i], v, t);
  }
}

static void lower_assign(wf_fstate *F, wf_stmt *s) {
  int n = s->ntargets;
  wf_rv vals[64];
  if (n > 64) wf_lo_err(F, s->line, s->col, "too many targets in one assignment");
  wf_expr at = {0};
  at.line = s->line;
  at.col = s->col;
  lower_exprlist(F, s->nexprs, s->exprs, n, vals, &at);
  /* typed values first, so a later target sees the old values (Lua) */
  for (int i = 0; i < n; i++)
    if (vals[i].kind == RV_LUA)
      wf_lo_err(F, s->targets[i]->line, s->targets[i]->col, "cannot assign %s",
                rvdesc(F, &vals[i]));
  for (int i = 0; i < n; i++)
    assign_to(F, s->targets[i], vals[i]);
}

static wf_rv br_ifchain(wf_fstate *F, void *arg);

typedef struct ifarg {
  wf_stmt *s;
  int k; /* next condition index */
} ifarg;

/* if conds[k] then blocks[k] else (the rest of the chain) */
static void lower_ifchain(wf_fstate *F, wf_stmt *s, int k) {
  wf_rv c = wf_lo_expr(F, s->conds[k]);
  wf_val cv = wf_lo_as_bool(F, c, s->conds[k], "if condition");
  F->b.loc = (wf_loc){s->line, s->col};
  ifarg *next = wf_front_alloc(F->C, sizeof *next);
  next->s = s;
  next->k = k + 1;
  int has_more = k + 1 < s->nconds || s->has_else;
  wf_lo_if(F, cv, br_block, &s->blocks[k], has_more ? br_ifchain : NULL, next, 0, NULL);
}

static wf_rv br_ifchain(wf_fstate *F, void *arg) {
  ifarg *a = arg;
  if (a->k < a->s->nconds)
    lower_ifchain(F, a->s, a->k);
  else
    wf_lo_stmts(F, &a->s->blocks[a->s->nconds], 0);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

static void lower_return(wf_fstate *F, wf_stmt *s) {
  if (F->is_kernel && s->nexprs)
    wf_lo_err(F, s->line, s->col, "kernels cannot return values (a bare 'return' ends the thread)");
  int n = s->nexprs;
  wf_rv vals[WF_MAXRET];
  if (n > WF_MAXRET)
    wf_lo_err(F, s->line, s->col, "too many return values (at most %d)", WF_MAXRET);
  if (n) {
    /* a trailing call may give several values */
    wf_expr *last = s->exprs[n - 1];
    if (last->kind == E_CALL || last->kind == E_METHOD) {
      for (int i = 0; i < n - 1; i++)
        vals[i] = wf_lo_expr(F, s->exprs[i]);
      wf_rv tmp[WF_MAXRET];
      int got = wf_lo_call(F, last, WF_MAXRET - (n - 1), tmp);
      for (int j = 0; j < got; j++)
        vals[n - 1 + j] = tmp[j];
      n = n - 1 + got;
    } else {
      for (int i = 0; i < n; i++)
        vals[i] = wf_lo_expr(F, s->exprs[i]);
    }
  }
  F->b.loc = (wf_loc){s->line, s->col};
  if (F->nret < 0)
    F->nret = n;
  else if (F->nret != n)
    wf_lo_err(F, s->line, s->col, "this return gives %d value%s, an earlier one %d", n,
              n == 1 ? "" : "s", F->nret);
  for (int i = 0; i < n; i++) {
    wf_var *x = &F->vars[F->retvars[i]];
    wf_expr *at = i < s->nexprs ? s->exprs[i] : s->exprs[s->nexprs - 1];
    if (vals[i].kind == RV_NONE)
      wf_lo_err(F, at->line, at->col, "the call gives no value to return");
    if (x->t && vals[i].kind == RV_VAL && vals[i].t != x->t)
      wf_lo_err(F, at->line, at->col, "return value %d is %s here but %s in an earlier return",
                i + 1, TN(vals[i].t), TN(x->t));
    wf_val v = wf_lo_value(F, &vals[i], x->t, at);
    x->t = wf_vtype(F->fn, v);
    x->v = v;
  }
  F->vars[F->retflag].v = wf_b_consti(&F->b, t_bool(F), 1);
  F->nreturns++;
}

void wf_lo_stmt(wf_fstate *F, wf_stmt *s) {
  F->b.loc = (wf_loc){s->line, s->col};
  switch (s->kind) {
  case S_LOCAL: lower_local(F, s); return;
  case S_ASSIGN: lower_assign(F, s); return;
  case S_CALL: {
    wf_rv out[WF_MAXRET];
    wf_lo_call(F, s->exprs[0], 0, out);
    return;
  }
  case S_IF: lower_ifchain(F, s, 0); return;
  case S_FORNUM: wf_lo_for(F, s); return;
  case S_WHILE: wf_lo_while(F, s, 0); return;
  case S_FORIN: wf_lo_forin(F, s); return;
  case S_REPEAT: wf_lo_while(F, s, 1); return;
  case S_DO: wf_lo_stmts(F, &s->body, 0); return;
  case S_BREAK:
    if (F->brk < 0) wf_lo_err(F, s->line, s->col, "'break' outside a loop");
    F->vars[F->brk].v = wf_b_consti(&F->b, t_bool(F), 1);
    F->nbreaks++;
    return;
  case S_RETURN: lower_return(F, s); return;
  case S_GOTO: /* to the end of the loop's body (parse.c checked it) */
    if (F->cont < 0) wf_lo_err(F, s->line, s->col, "'goto' outside a loop");
    F->vars[F->cont].v = wf_b_consti(&F->b, t_bool(F), 1);
    F->nconts++;
    return;
  case S_LABEL: wf_lo_err(F, s->line, s->col, "labels are not supported here");
  }
}

/* ======================================================================
** functions
** ====================================================================== */
wf_func *wf_lo_function(wf_fctx *C, int fnref, const char *name, int is_kernel, int nparams,
                        const wf_type *const *ptypes, const char *const *pnames,
                        const wf_src *src) {
  wf_res_push(C, fnref); /* the function itself decides between look-alikes */
  wf_funcast *fa = wf_parse_function(C, src, nparams, pnames, lua_gettop(C->L));
  lua_pop(C->L, 1);
  wf_fstate *F = wf_front_alloc(C, sizeof *F);
  F->C = C;
  F->src = *src;
  F->is_kernel = is_kernel;
  F->fnidx = fnref;
  F->brk = -1;
  F->cont = -1;
  F->nret = -1;
  F->parent = C->cur;
  wf_res_push(C, fnref);
  F->fnptr = lua_topointer(C->L, -1);
  lua_pop(C->L, 1);
  C->cur = F;
  F->fn = wf_func_new(C->mod, name, is_kernel, nparams, ptypes, 0, NULL);
  F->fn->chunk = wf_ir_strdup(C->mod, src->chunk);
  wf_b_init(&F->b, F->fn, F->fn->body);
  F->b.loc = (wf_loc){fa->line, fa->col};
  for (int i = 0; i < nparams; i++) {
    int vi = wf_lo_addvar(F, fa->params[i], F->fn->params[i], ptypes[i]);
    F->vars[vi].is_param = 1;
  }
  F->retflag = wf_lo_addvar(F, "(ret)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  for (int i = 0; i < WF_MAXRET; i++)
    F->retvars[i] = wf_lo_addvar(F, "(r)", WF_NOVAL, NULL);
  wf_lo_stmts(F, &fa->body, 0);
  F->b.loc = (wf_loc){fa->lastline, 1};
  int nret = F->nret < 0 ? 0 : F->nret;
  wf_val rv[WF_MAXRET];
  const wf_type **rt = wf_ir_alloc(C->mod, sizeof(wf_type *) * (size_t)(nret ? nret : 1));
  for (int i = 0; i < nret; i++) {
    wf_var *x = &F->vars[F->retvars[i]];
    rt[i] = x->t;
    rv[i] = wf_lo_var_value(F, x, x->t);
  }
  wf_b_inst(&F->b, WF_OP_RET, nret, rv, 0, NULL, 0);
  F->fn->nret = nret;
  F->fn->rettypes = rt;
  C->cur = F->parent;
  return F->fn;
}
