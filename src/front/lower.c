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
** Integer `/` truncates toward zero (as in C and Warp); `%` follows Lua (the
** result has the sign of the divisor); `^` is always a float power.
*/
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
static int addvar(wf_fstate *F, const char *name, wf_val v, const wf_type *t) {
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

typedef struct snap {
  int n;
  wf_var *v;
} snap;

static snap take_snap(wf_fstate *F) {
  snap s;
  s.n = F->nvars;
  s.v = wf_front_alloc(F->C, sizeof(wf_var) * (size_t)(s.n ? s.n : 1));
  if (s.n) memcpy(s.v, F->vars, sizeof(wf_var) * (size_t)s.n);
  return s;
}

static void restore_snap(wf_fstate *F, snap s) {
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

static wf_rv mklit(double num, int isint) {
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_LIT;
  r.num = num;
  r.isint = isint;
  return r;
}

/* A constant of scalar type t (aggregates: every component). */
wf_val wf_lo_const(wf_fstate *F, const wf_type *t, double v) {
  if (t->kind == WF_T_FLOAT) return wf_b_constf(&F->b, t, v);
  if (t->kind == WF_T_INT || t->kind == WF_T_BOOL) return wf_b_consti(&F->b, t, (int64_t)v);
  int n = wf_t_arity(t);
  /* structs may have more than WF_MAX_COMP fields */
  wf_val *c = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) c[i] = wf_lo_const(F, wf_t_component(F->C->T, t, i), v);
  return wf_b_agg(&F->b, t, n, c);
}

static const wf_type *t_i32(wf_fstate *F) { return wf_t_int(F->C->T, 32, 1); }
static const wf_type *t_f32(wf_fstate *F) { return wf_t_float(F->C->T, 32); }
static const wf_type *t_bool(wf_fstate *F) { return wf_t_bool(F->C->T); }

/* Scalar element type of an aggregate (or the type itself for scalars). */
static const wf_type *scalar_of(const wf_type *t) {
  while (t && t->kind != WF_T_BOOL && t->kind != WF_T_INT && t->kind != WF_T_FLOAT && t->elem &&
         t->kind != WF_T_ARRAY)
    t = t->elem;
  return t;
}

static int is_agg(const wf_type *t) {
  return t->kind == WF_T_VEC || t->kind == WF_T_MAT || t->kind == WF_T_QUAT ||
         t->kind == WF_T_TRANSFORM || t->kind == WF_T_STRUCT;
}

/* The range of int type t: lo <= v < hi (exact in double). */
static void int_range(const wf_type *t, double *lo, double *hi) {
  *lo = t->is_signed ? -ldexp(1, t->bits - 1) : 0;
  *hi = ldexp(1, t->is_signed ? t->bits - 1 : t->bits);
}

/* An integer-valued double in int type t's range, as the constant's bits. */
static int64_t int_bits(double v) { return v >= 0x1p63 ? (int64_t)(uint64_t)v : (int64_t)v; }

/* The shortest text that reads back as v (integers in full). */
static const char *numtext(wf_fstate *F, double v) {
  char *buf = wf_front_alloc(F->C, 40);
  snprintf(buf, 40, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, 40, "%.17g", v);
  return buf;
}

/* Check that the number v fits int type t (a literal never wraps). */
static void check_int_fits(wf_fstate *F, double v, const wf_type *t, wf_expr *at) {
  double lo, hi;
  int_range(t, &lo, &hi);
  if (!(v >= lo && v < hi))
    ERR(at, "cannot use the number %s as %s (out of range %s..%s)", numtext(F, v), TN(t),
        numtext(F, lo), numtext(F, hi - 1));
}

/* Materialize a literal as a constant of type t, checking it fits. */
static wf_val lit_as(wf_fstate *F, wf_rv *r, const wf_type *t, wf_expr *at) {
  if (t->kind == WF_T_INT) {
    if (!isfinite(r->num) || r->num != floor(r->num))
      ERR(at, "cannot use the number %g as %s (not an integer)", r->num, TN(t));
    check_int_fits(F, r->num, t, at);
    return wf_b_consti(&F->b, t, int_bits(r->num));
  }
  if (t->kind == WF_T_FLOAT) {
    /* a finite literal past the type's largest value would become inf */
    double max = t->bits == 16 ? 65519.99 : t->bits == 32 ? 0x1.fffffefffffffp127 : INFINITY;
    if (isfinite(r->num) && fabs(r->num) > max)
      ERR(at, "cannot use the number %s as %s (out of range)", numtext(F, r->num), TN(t));
    return wf_b_constf(&F->b, t, r->num);
  }
  if (is_agg(t) && t->kind != WF_T_STRUCT) ERR(at, "cannot use the number %g as %s", r->num, TN(t));
  ERR(at, "cannot use a number as %s", TN(t));
}

static const char *rvdesc(wf_fstate *F, wf_rv *r) {
  static const char *const lk[] = {"the type ", "the builtin ", "the weft.func ", ""};
  char *buf = wf_front_alloc(F->C, 160);
  switch (r->kind) {
  case RV_NONE: return "no value";
  case RV_VAL: return TN(r->t);
  case RV_LIT: case RV_WEAK: return "a number";
  case RV_STR: return "a string";
  case RV_SHAPE: return "a shape";
  case RV_LUA:
    if (r->lk == LV_NS) snprintf(buf, 160, "the Lua table '%s'", r->str ? r->str : "?");
    else if (r->lk == LV_TYPE) snprintf(buf, 160, "the type %s", TN(r->t));
    else snprintf(buf, 160, "%s'%s'", lk[r->lk], r->str ? r->str : "?");
    return buf;
  }
  return "?";
}

static wf_val weak_as(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at);

/* Number literal local x is carried by the innermost loop: remember that
** for error messages. */
static void loop_typed(wf_fstate *F, wf_var *x) {
  x->loopline = F->loopline;
  x->loophasnum = !x->weak;
  x->loopnum = x->num;
}

/* Why a value r of type has (read from a number literal local typed by a
** loop) where want was needed: appended to the error, or "". */
static const char *why(wf_fstate *F, const wf_rv *r, const wf_type *want) {
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
    return lit_as(F, r, want, at);
  case RV_WEAK:
    if (!want) want = r->isint ? t_i32(F) : t_f32(F);
    if (want->kind != WF_T_INT && want->kind != WF_T_FLOAT)
      ERR(at, "cannot use a number as %s", TN(want));
    return weak_as(F, r->weak, want, at);
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
    for (int i = 0; i < r; i++) c[i] = dotv(F, st, k, wf_b_extract(&F->b, a, i), b);
    return wf_b_agg(&F->b, rt, r, c);
  }
  int cc = tb->cols;
  /* r, k and cc are each at most WF_MAX_COMP (matrices up to 64 x 64) */
  wf_val brow[WF_MAX_COMP];
  for (int j = 0; j < k; j++) brow[j] = wf_b_extract(&F->b, b, j);
  const wf_type *rowt = wf_t_vec(T, cc, st);
  wf_val rows[WF_MAX_COMP];
  for (int i = 0; i < r; i++) {
    wf_val arow = wf_b_extract(&F->b, a, i);
    wf_val ai[WF_MAX_COMP], c[WF_MAX_COMP];
    for (int j = 0; j < k; j++) ai[j] = wf_b_extract(&F->b, arow, j);
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

/* Fold an arithmetic operation on two literals (Lua semantics). */
static wf_rv fold_lits(int op, wf_rv a, wf_rv b) {
  double x = a.num, y = b.num, r = 0;
  int isint = a.isint && b.isint;
  switch (op) {
  case '+': r = x + y; break;
  case '-': r = x - y; break;
  case '*': r = x * y; break;
  case '/': r = x / y; isint = isint && r == floor(r); break;
  case '%': r = x - floor(x / y) * y; break;
  case '^': r = pow(x, y); isint = 0; break;
  }
  return mklit(r, isint);
}

/* ======================================================================
** weak numbers: conditionals of literals (see wf_weak in lower.h)
** ====================================================================== */
#define WEAK_MAXLEAVES 64 /* folding literals leaf by leaf stops here */

static wf_weak *weak_new(wf_fstate *F) {
  wf_weak *w = wf_front_alloc(F->C, sizeof *w);
  w->cond = WF_NOVAL;
  w->dyn = WF_NOVAL;
  w->loc = F->b.loc;
  return w;
}

static const wf_weak *weak_leaf(wf_fstate *F, double num, int isint) {
  wf_weak *w = weak_new(F);
  w->num = num;
  w->isint = isint;
  w->integral = isfinite(num) && num == floor(num);
  return w;
}

static const wf_weak *weak_node(wf_fstate *F, wf_val cond, const wf_weak *a, const wf_weak *b) {
  wf_weak *w = weak_new(F);
  w->cond = cond;
  w->isint = a->isint && b->isint;
  w->integral = a->integral && b->integral;
  w->a = a;
  w->b = b;
  return w;
}

static const wf_weak *weak_dyn(wf_fstate *F, wf_val v, int isint, int integral) {
  wf_weak *w = weak_new(F);
  w->dyn = v;
  w->isint = isint;
  w->integral = integral;
  return w;
}

/* a op b (b NULL for op 'n', negation), done at the type of the use. */
static const wf_weak *weak_opnode(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b) {
  wf_weak *w = weak_new(F);
  w->op = op;
  w->a = a;
  w->b = b;
  int keeps = op == 'n' || op == '+' || op == '-' || op == '*' || op == '%';
  w->isint = keeps && a->isint && (!b || b->isint);
  w->integral = keeps && a->integral && (!b || b->integral);
  return w;
}

/* The weak number of an RV_LIT or RV_WEAK. */
static const wf_weak *weak_of(wf_fstate *F, const wf_rv *r) {
  return r->kind == RV_WEAK ? r->weak : weak_leaf(F, r->num, r->isint);
}

static int weak_isleaf(const wf_weak *w) { return w->cond == WF_NOVAL && !w->op; }

/* An expression result for w (a literal leaf is a plain RV_LIT). */
static wf_rv weak_rv(const wf_weak *w) {
  if (weak_isleaf(w) && w->dyn == WF_NOVAL) return mklit(w->num, w->isint);
  wf_rv r;
  memset(&r, 0, sizeof r);
  r.kind = RV_WEAK;
  r.weak = w;
  r.isint = w->isint;
  return r;
}

wf_rv wf_lo_weak_select(wf_fstate *F, wf_val cond, const wf_rv *x, const wf_rv *y) {
  return weak_rv(weak_node(F, cond, weak_of(F, x), weak_of(F, y)));
}

/* Literal leaves under w when it is only conditionals of literals, else a
** number above any limit. */
static int weak_leaves(const wf_weak *w) {
  if (w->op || w->dyn != WF_NOVAL) return WEAK_MAXLEAVES + 1;
  if (w->cond == WF_NOVAL) return 1;
  int n = weak_leaves(w->a) + weak_leaves(w->b);
  return n > WEAK_MAXLEAVES ? WEAK_MAXLEAVES + 1 : n;
}

static int is_num_type(const wf_type *t) { return t->kind == WF_T_INT || t->kind == WF_T_FLOAT; }

/* w as a value of scalar type t: SELECTs of constants of t, arithmetic
** on dyn leaves done in t. */
static wf_val weak_as1(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at) {
  if (w->cond != WF_NOVAL) {
    wf_val a = weak_as1(F, w->a, t, at), b = weak_as1(F, w->b, t, at);
    return wf_b_op3(&F->b, WF_OP_SELECT, t, w->cond, a, b);
  }
  if (!w->op && w->dyn == WF_NOVAL) {
    wf_rv r = mklit(w->num, w->isint);
    return lit_as(F, &r, t, at);
  }
  if (t->kind == WF_T_INT && !w->integral)
    ERR(at, "cannot use a number that is not always an integer as %s", TN(t));
  if (!is_num_type(t)) ERR(at, "cannot use a number as %s", TN(t));
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

static wf_val weak_as(wf_fstate *F, const wf_weak *w, const wf_type *t, wf_expr *at) {
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

static wf_val weak_bool(wf_fstate *F, const wf_weak *w) {
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
      uint64_t max = t->is_signed ? (UINT64_C(1) << (t->bits - 1)) - 1
                     : t->bits == 64 ? UINT64_MAX
                                     : (UINT64_C(1) << t->bits) - 1;
      int64_t k = v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)max : int_bits(trunc(v));
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
  const wf_weak *w = weak_of(F, r);
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
  return mklit(r, 1);
}

static int is_arith(int op) { return op && strchr("+-*/%^", op) != NULL; }

/* a op b leaf by leaf (arithmetic, or a comparison giving 0/1 leaves) for
** conditionals of literals (weak_leaves bounds the size). */
static const wf_weak *weak_fold(wf_fstate *F, int op, const wf_weak *a, const wf_weak *b) {
  if (a->cond != WF_NOVAL || b->cond != WF_NOVAL) {
    const wf_weak *n = a->cond != WF_NOVAL ? a : b;
    const wf_weak *x = weak_fold(F, op, n == a ? a->a : a, n == b ? b->a : b);
    const wf_weak *y = weak_fold(F, op, n == a ? a->b : a, n == b ? b->b : b);
    return weak_node(F, n->cond, x, y);
  }
  wf_rv r = is_arith(op) ? fold_lits(op, mklit(a->num, a->isint), mklit(b->num, b->isint))
                         : fold_cmp(op, a->num, b->num);
  return weak_leaf(F, r.num, r.isint);
}

/* a op b for two untyped numbers, one of them weak: folded when small,
** else (arithmetic) an op done at the type of the use; NULL for a
** comparison that cannot be folded. */
static const wf_weak *weak_binop(wf_fstate *F, int op, const wf_rv *a, const wf_rv *b) {
  const wf_weak *wa = weak_of(F, a), *wb = weak_of(F, b);
  int na = weak_leaves(wa), nb = weak_leaves(wb);
  if (na <= WEAK_MAXLEAVES && nb <= WEAK_MAXLEAVES && na * nb <= WEAK_MAXLEAVES)
    return weak_fold(F, op, wa, wb);
  return is_arith(op) ? weak_opnode(F, op, wa, wb) : NULL;
}

static const wf_weak *weak_neg(wf_fstate *F, const wf_weak *w) {
  if (weak_leaves(w) > WEAK_MAXLEAVES) return weak_opnode(F, 'n', w, NULL);
  if (w->cond != WF_NOVAL) return weak_node(F, w->cond, weak_neg(F, w->a), weak_neg(F, w->b));
  return weak_leaf(F, -w->num, w->isint);
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
  if (a.kind == RV_LIT && b.kind == RV_LIT) return fold_lits(op, a, b);
  /* a weak number stays weak: `(c and 1 or 0) * 0.5` */
  if (wf_lo_isnum(&a) && wf_lo_isnum(&b)) return weak_rv(weak_binop(F, op, &a, &b));
  if (!wf_lo_isnum(&a) && a.kind != RV_VAL) wf_lo_value(F, &a, NULL, at);
  if (!wf_lo_isnum(&b) && b.kind != RV_VAL) wf_lo_value(F, &b, NULL, at);
  const wf_type *ta = a.kind == RV_VAL ? a.t : NULL, *tb = b.kind == RV_VAL ? b.t : NULL;
  /* scalar op scalar (a literal adapts to the typed side) */
  const wf_type *sa = ta ? ta : tb, *sb = tb ? tb : ta;
  if (wf_t_is_scalar(sa) && wf_t_is_scalar(sb)) {
    if (sa != sb)
      ERR(at, "cannot %s %s and %s%s", opverb(op), TN(ta), TN(tb), WHY2(&a, &b, ta, tb));
    if (sa->kind == WF_T_BOOL) ERR(at, "cannot %s bool values", opverb(op));
    if (op == '^') {
      /* a float power: a literal operand is taken as the float type
      ** directly (`i ^ 0.5` on an int), typed ints are converted */
      const wf_type *ft = pow_type(F, sa);
      wf_val va = wf_lo_isnum(&a) ? wf_lo_value(F, &a, ft, at) : a.v;
      wf_val vb = wf_lo_isnum(&b) ? wf_lo_value(F, &b, ft, at) : b.v;
      if (a.kind == RV_VAL && ft != sa) va = wf_b_op1(&F->b, WF_OP_CAST, ft, va);
      if (b.kind == RV_VAL && ft != sa) vb = wf_b_op1(&F->b, WF_OP_CAST, ft, vb);
      return wf_lo_mkval(wf_b_op2(&F->b, WF_OP_POW, ft, va, vb), ft);
    }
    wf_val va = wf_lo_value(F, &a, sa, at), vb = wf_lo_value(F, &b, sa, at);
    return wf_lo_mkval(wf_b_op2(&F->b, arith_op(op), sa, va, vb), sa);
  }
  /* aggregates */
  if (ta && tb && ta == tb && (op == '+' || op == '-') && is_agg(ta) && ta->kind != WF_T_STRUCT)
    return wf_lo_mkval(wf_lo_cw2(F, arith_op(op), ta, a.v, b.v, 0), ta);
  if (op == '*' || op == '/') {
    /* aggregate times / divided by a scalar */
    const wf_type *agt = ta && is_agg(ta) ? ta : NULL;
    if (agt && agt->kind != WF_T_STRUCT && (!tb || wf_t_is_scalar(tb))) {
      const wf_type *st = scalar_of(agt);
      wf_val s = wf_lo_value(F, &b, st, at);
      return wf_lo_mkval(wf_lo_cw2(F, arith_op(op), agt, a.v, s, 1), agt);
    }
    if (op == '*' && tb && is_agg(tb) && tb->kind != WF_T_STRUCT && (!ta || wf_t_is_scalar(ta))) {
      const wf_type *st = scalar_of(tb);
      wf_val s = wf_lo_value(F, &a, st, at);
      return wf_lo_mkval(wf_lo_cw2(F, WF_OP_MUL, tb, b.v, s, 1), tb);
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
    const wf_weak *w = weak_binop(F, op, &a, &b);
    if (w) return wf_lo_mkval(weak_bool(F, w), t_bool(F));
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
    ERR(at, "cannot order %s values with '%s'", TN(t), wf_tok_name(op) ? wf_tok_name(op) : (op == '<' ? "<" : ">"));
  wf_op o = op == '<' ? WF_OP_LT : op == TK_LE ? WF_OP_LE : op == '>' ? WF_OP_GT : WF_OP_GE;
  return wf_lo_mkval(wf_b_op2(&F->b, o, bt, va, vb), bt);
}

static wf_val as_bool(wf_fstate *F, wf_rv r, wf_expr *at, const char *what) {
  if (r.kind == RV_VAL && r.t->kind == WF_T_BOOL) return r.v;
  if (r.kind == RV_VAL || wf_lo_isnum(&r))
    ERR(at, "%s must be a bool, got %s", what, r.kind == RV_VAL ? TN(r.t) : "a number");
  return wf_lo_value(F, &r, t_bool(F), at);
}

/* ======================================================================
** structured if: both branches lowered into fresh blocks; the bindings
** changed in either branch (and an optional expression value) become the
** if's results.
** ====================================================================== */
typedef wf_rv (*branch_fn)(wf_fstate *F, void *arg);


static wf_val undef_of(wf_fstate *F, const wf_type *t) {
  return wf_b_inst(&F->b, WF_OP_UNDEF, 0, NULL, 1, &t, 0)->res[0];
}

/* The value of local x where it merges into type t: its SSA value, its
** literal as a constant of t, or undef when it never got a value. */
static wf_val var_value(wf_fstate *F, wf_var *x, const wf_type *t) {
  if (x->v != WF_NOVAL) return x->v;
  if (x->islit && x->weak) {
    if (t->kind == WF_T_INT && !x->weak->integral)
      wf_lo_err(F, F->b.loc.line, F->b.loc.col,
                "local '%s' holds a number that is not always an integer here but %s elsewhere",
                x->name, TN(t));
    if (t->kind != WF_T_INT && t->kind != WF_T_FLOAT)
      wf_lo_err(F, F->b.loc.line, F->b.loc.col, "local '%s' holds a number here but %s elsewhere",
                x->name, TN(t));
    wf_expr here;
    memset(&here, 0, sizeof here);
    here.line = F->b.loc.line;
    here.col = F->b.loc.col;
    return weak_as(F, x->weak, t, &here);
  }
  if (x->islit) {
    if (t->kind == WF_T_INT && x->num != floor(x->num))
      wf_lo_err(F, F->b.loc.line, F->b.loc.col,
                "local '%s' holds the number %g here but %s elsewhere", x->name, x->num, TN(t));
    if (t->kind == WF_T_INT) {
      wf_expr here;
      memset(&here, 0, sizeof here);
      here.line = F->b.loc.line;
      here.col = F->b.loc.col;
      check_int_fits(F, x->num, t, &here);
      return wf_b_consti(&F->b, t, int_bits(x->num));
    }
    if (t->kind == WF_T_FLOAT) return wf_lo_const(F, t, x->num);
    wf_lo_err(F, F->b.loc.line, F->b.loc.col, "local '%s' holds a number here but %s elsewhere", x->name,
              TN(t));
  }
  return undef_of(F, t);
}

/* Has local binding b changed from a (a new value or a new untyped number)? */
static int binding_changed(const wf_var *a, const wf_var *b) {
  if (a->v != b->v || a->islit != b->islit) return 1;
  return a->islit && (a->weak != b->weak || a->litint != b->litint ||
                      memcmp(&a->num, &b->num, sizeof a->num));
}

/* The weak number an untyped local holds. */
static const wf_weak *var_weak(wf_fstate *F, const wf_var *x) {
  return x->weak ? x->weak : weak_leaf(F, x->num, x->litint);
}

/* Local x holds the weak number w from now on. */
static void set_weak(wf_var *x, const wf_weak *w) {
  x->v = WF_NOVAL;
  x->t = NULL;
  x->islit = 1;
  x->weak = weak_isleaf(w) && w->dyn == WF_NOVAL ? NULL : w;
  x->num = w->num;
  x->litint = w->isint;
}

#define WEAK_MAXNODES 128 /* a merged weak conditional grows up to this */

/* Nodes of w, shared parts counted once per use (what building it costs),
** or a number above lim. */
static int weak_size(const wf_weak *w, int lim) {
  if (!w) return 0;
  int n = 1;
  if (w->cond != WF_NOVAL || w->op) {
    n += weak_size(w->a, lim);
    if (n <= lim) n += weak_size(w->b, lim);
  }
  return n;
}

/* The locals an `if` merges as weak conditionals, and the values of its
** branches (those from mark on: conditions, dyn leaves) they use, which
** become results of the if. */
typedef struct wmerge {
  wf_val mark;
  int nvar, nv, capv;
  int *var;
  const wf_weak **wt, **we;
  wf_val *v;
  int *side; /* 0: then, 1: else */
} wmerge;

static void wmerge_val(wf_fstate *F, wmerge *m, wf_val v, int side) {
  if (v == WF_NOVAL || v < m->mark) return;
  for (int k = 0; k < m->nv; k++)
    if (m->v[k] == v) return;
  if (m->nv == m->capv) {
    int nc = m->capv ? m->capv * 2 : 8;
    wf_val *nv = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)nc);
    int *ns = wf_front_alloc(F->C, sizeof(int) * (size_t)nc);
    if (m->nv) memcpy(nv, m->v, sizeof(wf_val) * (size_t)m->nv);
    if (m->nv) memcpy(ns, m->side, sizeof(int) * (size_t)m->nv);
    m->v = nv;
    m->side = ns;
    m->capv = nc;
  }
  m->v[m->nv] = v;
  m->side[m->nv] = side;
  m->nv++;
}

static void wmerge_scan(wf_fstate *F, wmerge *m, const wf_weak *w, int side) {
  if (!w) return;
  wmerge_val(F, m, w->cond, side);
  wmerge_val(F, m, w->dyn, side);
  wmerge_scan(F, m, w->a, side);
  wmerge_scan(F, m, w->b, side);
}

static void wmerge_add(wf_fstate *F, wmerge *m, int vi, const wf_weak *wt, const wf_weak *we) {
  if (!m->var) {
    /* at most one per visible local: sized on first use */
    int cap = F->nvars + 1;
    m->var = wf_front_alloc(F->C, sizeof(int) * (size_t)cap);
    m->wt = wf_front_alloc(F->C, sizeof(wf_weak *) * (size_t)cap);
    m->we = wf_front_alloc(F->C, sizeof(wf_weak *) * (size_t)cap);
  }
  m->var[m->nvar] = vi;
  m->wt[m->nvar] = wt;
  m->we[m->nvar] = we;
  m->nvar++;
  wmerge_scan(F, m, wt, 0);
  wmerge_scan(F, m, we, 1);
}

static wf_val wmerge_res(const wmerge *m, wf_val v, const wf_val *res) {
  if (v == WF_NOVAL || v < m->mark) return v;
  for (int k = 0; k < m->nv; k++)
    if (m->v[k] == v) return res[k];
  return v; /* cannot happen: every value was scanned */
}

/* w with the branches' values replaced by the if's results res[]. */
static const wf_weak *weak_map(wf_fstate *F, const wf_weak *w, const wmerge *m, const wf_val *res) {
  if (!w) return NULL;
  const wf_weak *a = weak_map(F, w->a, m, res), *b = weak_map(F, w->b, m, res);
  wf_val c = wmerge_res(m, w->cond, res), d = wmerge_res(m, w->dyn, res);
  if (a == w->a && b == w->b && c == w->cond && d == w->dyn) return w;
  wf_weak *n = weak_new(F);
  *n = *w;
  n->a = a;
  n->b = b;
  n->cond = c;
  n->dyn = d;
  return n;
}

/* Lower one branch into a new block; returns the block, fills snap/value. */
static wf_block *lower_branch(wf_fstate *F, branch_fn fn, void *arg, snap s0, snap *out, wf_rv *val) {
  wf_block *blk = wf_b_newblock(F->fn, 0, NULL);
  wf_block *saved = F->b.block;
  wf_loc loc = F->b.loc;
  F->b.block = blk;
  wf_rv r;
  memset(&r, 0, sizeof r);
  if (fn) r = fn(F, arg);
  if (val) *val = r;
  F->nvars = s0.n; /* drop the branch's locals */
  *out = take_snap(F);
  restore_snap(F, s0);
  F->b.block = saved;
  F->b.loc = loc;
  return blk;
}

static wf_rv emit_if(wf_fstate *F, wf_val cond, branch_fn thenf, void *targ, branch_fn elsef,
                     void *earg, int want_value, wf_expr *at) {
  /* statements pass no expression: errors point at the statement */
  wf_expr here;
  if (!at) {
    memset(&here, 0, sizeof here);
    here.line = F->b.loc.line;
    here.col = F->b.loc.col;
    at = &here;
  }
  snap s0 = take_snap(F);
  snap st, se;
  wf_rv tv, ev;
  wf_val mark = (wf_val)F->fn->nvals; /* values from here on are the branches' */
  wf_block *bt = lower_branch(F, thenf, targ, s0, &st, want_value ? &tv : NULL);
  wf_block *be = lower_branch(F, elsef, earg, s0, &se, want_value ? &ev : NULL);
  /* result type of the value */
  const wf_type *vt = NULL;
  int weak = 0;
  if (want_value) {
    if (tv.kind == RV_VAL) vt = tv.t;
    if (ev.kind == RV_VAL) {
      if (vt && vt != ev.t)
        ERR(at, "the two branches give different types: %s and %s", TN(vt), TN(ev.t));
      vt = ev.t;
    }
    if (!vt && wf_lo_isnum(&tv) && wf_lo_isnum(&ev)) {
      if (want_value == 2) {
        /* a weak value (see wf_weak): two literals need no result; else
        ** the branches yield the number as float64, exact for literals */
        weak = tv.kind == RV_LIT && ev.kind == RV_LIT ? 1 : 2;
        vt = weak == 2 ? wf_t_float(F->C->T, 64) : NULL;
      } else {
        vt = (tv.isint && ev.isint) ? t_i32(F) : t_f32(F);
      }
    }
    if (!vt && !weak) {
      wf_rv *bad = (tv.kind != RV_VAL && !wf_lo_isnum(&tv)) ? &tv : &ev;
      wf_lo_value(F, bad, NULL, at);
    }
    if (weak == 1) want_value = 0;
  }
  /* bindings changed in either branch */
  int nm = 0;
  int *idx = wf_front_alloc(F->C, sizeof(int) * (size_t)(s0.n + 1));
  const wf_type **types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(s0.n + 2));
  if (want_value) types[nm] = vt;
  int off = want_value ? 1 : 0;
  /* untyped in both branches: a weak conditional (wmerge), or a float64
  ** dyn leaf when that would grow too big (isdyn) */
  wmerge wm;
  memset(&wm, 0, sizeof wm);
  wm.mark = mark;
  char *isdyn = wf_front_alloc(F->C, (size_t)(s0.n + 1));
  for (int i = 0; i < s0.n; i++) {
    if (!binding_changed(&s0.v[i], &st.v[i]) && !binding_changed(&s0.v[i], &se.v[i])) continue;
    if (st.v[i].islit && se.v[i].islit) {
      const wf_weak *wt = var_weak(F, &st.v[i]), *we = var_weak(F, &se.v[i]);
      if (weak_size(wt, WEAK_MAXNODES) + weak_size(we, WEAK_MAXNODES) < WEAK_MAXNODES) {
        wmerge_add(F, &wm, i, wt, we);
        continue;
      }
      isdyn[nm] = 1;
      idx[nm] = i;
      types[off + nm] = wf_t_float(F->C->T, 64);
      nm++;
      continue;
    }
    const wf_type *t = st.v[i].t ? st.v[i].t : se.v[i].t;
    if (st.v[i].t && se.v[i].t && st.v[i].t != se.v[i].t)
      ERR(at, "local '%s' gets different types in the two branches: %s and %s", s0.v[i].name,
          TN(st.v[i].t), TN(se.v[i].t));
    idx[nm] = i;
    types[off + nm] = t;
    nm++;
  }
  /* the branches' values the merged weak conditionals use: more results */
  int nr = off + nm + wm.nv;
  if (wm.nv) {
    const wf_type **nt = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(nr + 1));
    memcpy(nt, types, sizeof(wf_type *) * (size_t)(off + nm));
    for (int k = 0; k < wm.nv; k++) nt[off + nm + k] = wf_vtype(F->fn, wm.v[k]);
    types = nt;
  }
  /* yields */
  wf_block *blocks[2] = {bt, be};
  snap *snaps[2] = {&st, &se};
  wf_rv *vals[2] = {&tv, &ev};
  wf_block *saved = F->b.block;
  for (int k = 0; k < 2; k++) {
    F->b.block = blocks[k];
    wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(nr + 1));
    if (want_value) ys[0] = wf_lo_value(F, vals[k], vt, at);
    for (int j = 0; j < nm; j++) {
      wf_var *x = &snaps[k]->v[idx[j]];
      ys[off + j] = var_value(F, x, types[off + j]);
    }
    /* a value of one branch; the other yields a zero, never selected */
    for (int j = 0; j < wm.nv; j++)
      ys[off + nm + j] = wm.side[j] == k ? wm.v[j] : wf_lo_const(F, types[off + nm + j], 0);
    wf_b_inst(&F->b, WF_OP_YIELD, nr, ys, 0, NULL, 0);
  }
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_IF, 1, &cond, nr, types, 2);
  in->blocks[0] = bt;
  in->blocks[1] = be;
  bt->parent = in;
  be->parent = in;
  for (int j = 0; j < nm; j++) {
    wf_var *x = &F->vars[idx[j]];
    if (isdyn[j]) {
      const wf_var *a = &st.v[idx[j]], *b = &se.v[idx[j]];
      const wf_weak *w = weak_dyn(F, in->res[off + j], var_weak(F, a)->isint && var_weak(F, b)->isint,
                                  var_weak(F, a)->integral && var_weak(F, b)->integral);
      set_weak(x, w);
      continue;
    }
    x->v = in->res[off + j];
    x->t = types[off + j];
    x->islit = 0;
    x->weak = NULL;
  }
  for (int j = 0; j < wm.nvar; j++) {
    const wf_weak *a = weak_map(F, wm.wt[j], &wm, in->res + off + nm);
    const wf_weak *b = weak_map(F, wm.we[j], &wm, in->res + off + nm);
    set_weak(&F->vars[wm.var[j]], weak_node(F, cond, a, b));
  }
  wf_rv r;
  memset(&r, 0, sizeof r);
  if (weak) F->b.loc = (wf_loc){at->line, at->col};
  if (weak == 1) return weak_rv(weak_node(F, cond, weak_of(F, &tv), weak_of(F, &ev)));
  if (weak == 2)
    return weak_rv(weak_dyn(F, in->res[0], tv.isint && ev.isint,
                            wf_lo_num_integral(&tv) && wf_lo_num_integral(&ev)));
  if (want_value) r = wf_lo_mkval(in->res[0], vt);
  return r;
}

static wf_rv br_expr(wf_fstate *F, void *arg) { return wf_lo_expr(F, (wf_expr *)arg); }
static wf_rv br_true(wf_fstate *F, void *arg) {
  (void)arg;
  return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), 1), t_bool(F));
}
static wf_rv br_false(wf_fstate *F, void *arg) {
  (void)arg;
  return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
}

static wf_rv br_boolexpr_while(wf_fstate *F, void *arg) {
  wf_expr *e = (wf_expr *)arg;
  wf_rv r = wf_lo_expr(F, e);
  return wf_lo_mkval(as_bool(F, r, e, "while condition"), t_bool(F));
}

static wf_rv br_boolexpr(wf_fstate *F, void *arg) {
  wf_expr *e = (wf_expr *)arg;
  wf_rv r = wf_lo_expr(F, e);
  return wf_lo_mkval(as_bool(F, r, e, "operand of 'and'/'or'"), t_bool(F));
}

/* Does evaluating e have no side effects and no memory reads? Then a
** short-circuit can evaluate it eagerly. */
static int simple_expr(wf_expr *e) {
  switch (e->kind) {
  case E_NUM: case E_TRUE: case E_FALSE: case E_NAME: return 1;
  case E_PAREN: case E_UN: return simple_expr(e->a);
  case E_BIN: /* '/' and '%' may trap on integer zero */
    return e->op != '/' && e->op != '%' && simple_expr(e->a) && simple_expr(e->b);
  case E_AND: case E_OR: return simple_expr(e->a) && simple_expr(e->b);
  case E_FIELD: return simple_expr(e->a);
  default: return 0;
  }
}

static wf_rv lower_andor(wf_fstate *F, wf_expr *e) {
  /* `c and x or y` with a non-bool x: a conditional value */
  if (e->kind == E_OR && e->a->kind == E_AND) {
    wf_rv c = wf_lo_expr(F, e->a->a);
    wf_val cv = as_bool(F, c, e->a->a, "condition of 'c and x or y'");
    if (simple_expr(e->a->b) && simple_expr(e->b)) {
      /* both sides cheap and safe: a select when x is not a bool */
      snap s0 = take_snap(F);
      wf_inst *mark = F->b.block->last;
      wf_rv x = wf_lo_expr(F, e->a->b);
      if (!(x.kind == RV_VAL && x.t->kind == WF_T_BOOL)) {
        wf_rv y = wf_lo_expr(F, e->b);
        /* two untyped numbers: a weak number that takes its type from
        ** where it is used, as a literal does */
        if (wf_lo_isnum(&x) && wf_lo_isnum(&y)) {
          F->b.loc = (wf_loc){e->line, e->col};
          return wf_lo_weak_select(F, cv, &x, &y);
        }
        const wf_type *t = x.kind == RV_VAL ? x.t : y.kind == RV_VAL ? y.t : NULL;
        if (x.kind == RV_VAL && y.kind == RV_VAL && x.t != y.t)
          ERR(e, "'c and x or y' gives different types: %s and %s", TN(x.t), TN(y.t));
        if (!t) t = (x.isint && y.isint) ? t_i32(F) : t_f32(F);
        wf_val xv = wf_lo_value(F, &x, t, e->a->b), yv = wf_lo_value(F, &y, t, e->b);
        return wf_lo_mkval(wf_b_op3(&F->b, WF_OP_SELECT, t, cv, xv, yv), t);
      }
      (void)mark;
      restore_snap(F, s0);
      /* x is a bool: plain and/or below (the lowered x stays unused) */
      wf_val a = cv;
      wf_val xa = x.v;
      wf_val ab = wf_b_op2(&F->b, WF_OP_BAND, t_bool(F), a, xa);
      wf_rv rb = wf_lo_expr(F, e->b);
      wf_val yb = as_bool(F, rb, e->b, "operand of 'or'");
      return wf_lo_mkval(wf_b_op2(&F->b, WF_OP_BOR, t_bool(F), ab, yb), t_bool(F));
    }
    /* general case: lazily evaluated branches */
    wf_rv probe;
    {
      /* type of x decides between select semantics and boolean logic */
      snap s0 = take_snap(F);
      wf_block *scratch = wf_b_newblock(F->fn, 0, NULL);
      wf_block *saved = F->b.block;
      F->b.block = scratch;
      probe = wf_lo_expr(F, e->a->b);
      F->b.block = saved;
      restore_snap(F, s0);
    }
    if (!(probe.kind == RV_VAL && probe.t->kind == WF_T_BOOL))
      return emit_if(F, cv, br_expr, e->a->b, br_expr, e->b, 2, e);
    wf_rv ab = emit_if(F, cv, br_boolexpr, e->a->b, br_false, NULL, 1, e->a);
    return emit_if(F, ab.v, br_true, NULL, br_boolexpr, e->b, 1, e);
  }
  wf_rv a = wf_lo_expr(F, e->a);
  wf_val av = as_bool(F, a, e->a, e->kind == E_AND ? "operand of 'and'" : "operand of 'or'");
  if (simple_expr(e->b)) {
    wf_rv b = wf_lo_expr(F, e->b);
    wf_val bv = as_bool(F, b, e->b, e->kind == E_AND ? "operand of 'and'" : "operand of 'or'");
    return wf_lo_mkval(wf_b_op2(&F->b, e->kind == E_AND ? WF_OP_BAND : WF_OP_BOR, t_bool(F), av, bv),
                       t_bool(F));
  }
  if (e->kind == E_AND) return emit_if(F, av, br_boolexpr, e->b, br_false, NULL, 1, e);
  return emit_if(F, av, br_true, NULL, br_boolexpr, e->b, 1, e);
}

/* ======================================================================
** indexing and fields
** ====================================================================== */
wf_val wf_lo_index_key(wf_fstate *F, wf_rv k, wf_expr *at) {
  if (k.kind == RV_LIT) {
    if (!isfinite(k.num) || k.num != floor(k.num)) ERR(at, "index must be an integer, got %g", k.num);
    /* an index past int32 is an int64 (arrays may be that large) */
    const wf_type *it = k.num >= -0x1p31 && k.num < 0x1p31 ? t_i32(F) : wf_t_int(F->C->T, 64, 1);
    check_int_fits(F, k.num, it, at);
    return wf_b_consti(&F->b, it, (int64_t)k.num);
  }
  if (k.kind == RV_WEAK) {
    if (!k.weak->integral) ERR(at, "index must be an integer, got a number that may not be one");
    return wf_lo_value(F, &k, t_i32(F), at);
  }
  if (k.kind != RV_VAL) wf_lo_value(F, &k, NULL, at);
  if (k.t->kind != WF_T_INT) ERR(at, "index must be an integer, got %s", TN(k.t));
  if (k.t->bits == 32 || k.t->bits == 64) return k.v;
  return wf_b_op1(&F->b, WF_OP_CAST, t_i32(F), k.v);
}

/* Constant integer value of a literal rv, or -1 with ok = 0. */
static int const_index(wf_rv k, int *ok) {
  *ok = k.kind == RV_LIT && k.num == floor(k.num);
  return *ok ? (int)k.num : -1;
}

/* Debug builds check a dynamic component index k of a t (0..n-1): an IF
** around a debug-only TRAP, which release builds drop. Out of range, the
** select chains below give component 0 (release) or stop the launch with
** the position (debug). */
static void check_component(wf_fstate *F, const wf_type *t, wf_val k) {
  int n = wf_t_arity(t);
  const wf_type *kt = wf_vtype(F->fn, k), *bt = t_bool(F);
  wf_val out = wf_b_op2(&F->b, WF_OP_GE, bt, k, wf_b_consti(&F->b, kt, n));
  if (kt->is_signed)
    out = wf_b_op2(&F->b, WF_OP_BOR, bt, out,
                   wf_b_op2(&F->b, WF_OP_LT, bt, k, wf_b_consti(&F->b, kt, 0)));
  wf_block *saved = F->b.block;
  wf_block *bt_blk = wf_b_newblock(F->fn, 0, NULL), *be_blk = wf_b_newblock(F->fn, 0, NULL);
  char msg[96];
  snprintf(msg, sizeof msg, "component index out of range for %s (0..%d)", TN(t), n - 1);
  F->b.block = bt_blk;
  wf_inst *tr = wf_b_inst(&F->b, WF_OP_TRAP, 0, NULL, 0, NULL, 0);
  tr->str = wf_ir_strdup(F->C->mod, msg); /* the module's arena: it outlives the front end's */
  tr->imm = 1;
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

/* Component c of an aggregate with a dynamic index: a select chain. */
static wf_val dyn_extract(wf_fstate *F, const wf_type *t, wf_val agg, wf_val key) {
  check_component(F, t, key);
  int n = wf_t_arity(t);
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

/* Index into an aggregate value (v[i], m[i]). */
static wf_rv index_agg(wf_fstate *F, wf_rv obj, wf_rv key, wf_expr *at) {
  const wf_type *t = obj.t;
  if (t->kind != WF_T_VEC && t->kind != WF_T_MAT && t->kind != WF_T_QUAT)
    ERR(at, "cannot index a value of type %s", TN(t));
  int n = wf_t_arity(t), ok;
  int c = const_index(key, &ok);
  const wf_type *ct = wf_t_component(F->C->T, t, 0);
  if (ok) {
    if (c < 0 || c >= n) ERR(at, "index %d out of range for %s (0..%d)", c, TN(t), n - 1);
    return wf_lo_mkval(wf_b_extract(&F->b, obj.v, c), ct);
  }
  wf_val k = wf_lo_index_key(F, key, at);
  return wf_lo_mkval(dyn_extract(F, t, obj.v, k), ct);
}

/* Index into an array value with one or more keys: peel with VIEW, load
** when all dimensions are indexed. */
static wf_rv index_array(wf_fstate *F, wf_rv arr, int nk, wf_rv *keys, wf_expr **kexp, int *used) {
  const wf_type *t = arr.t;
  int nd = t->ndim;
  if (nk >= nd) {
    wf_val args[5];
    args[0] = arr.v;
    for (int i = 0; i < nd; i++) args[1 + i] = wf_lo_index_key(F, keys[i], kexp[i]);
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
        ERR(ie->b, "shape index %d out of range for a %d-d array", d, obj.t->ndim);
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
  case '+': case '-': case '*': case '/': case '%': case '^': return wf_lo_arith(F, e->op, a, b, e);
  default: return compare(F, e->op, a, b, e);
  }
}

/* A left-deep chain of binary operators (((x op b1) op b2) ...) op bn,
** lowered bottom up in a loop, operands in source order as recursion
** would give them. */
static wf_rv lower_binchain(wf_fstate *F, wf_expr *e) {
  int n = 0;
  wf_expr *x = e;
  for (; x->kind == E_BIN; x = x->a) n++;
  wf_expr **spine = wf_front_alloc(F->C, sizeof(wf_expr *) * (size_t)n);
  int k = n;
  for (wf_expr *y = e; y->kind == E_BIN; y = y->a) spine[--k] = y;
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
  case E_NUM: return mklit(e->num, e->isint);
  case E_TRUE: case E_FALSE:
    return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), e->kind == E_TRUE), t_bool(F));
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
      if (x->islit) return x->weak ? weak_rv(x->weak) : mklit(x->num, x->litint);
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
  case E_CALL: case E_METHOD: {
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
      if (a.kind == RV_LIT) return mklit(-a.num, a.isint);
      if (a.kind == RV_WEAK) return weak_rv(weak_neg(F, a.weak));
      wf_val v = wf_lo_value(F, &a, NULL, e->a);
      if (a.t->kind == WF_T_BOOL || a.t->kind == WF_T_ARRAY || a.t->kind == WF_T_STRUCT ||
          a.t->kind == WF_T_RNG)
        ERR(e, "cannot negate %s", TN(a.t));
      return wf_lo_mkval(wf_lo_cw1(F, WF_OP_NEG, a.t, v), a.t);
    }
    if (e->op == TK_NOT) {
      wf_val v = as_bool(F, a, e->a, "operand of 'not'");
      return wf_lo_mkval(wf_b_op1(&F->b, WF_OP_NOT, t_bool(F), v), t_bool(F));
    }
    /* '#' */
    if (a.kind != RV_VAL || a.t->kind != WF_T_ARRAY)
      ERR(e, "'#' needs an array, got %s", rvdesc(F, &a));
    wf_inst *in = wf_b_inst(&F->b, WF_OP_SHAPE, 1, &a.v, 1, (const wf_type *[]){t_i32(F)}, 0);
    in->imm = 0;
    return wf_lo_mkval(in->res[0], t_i32(F));
  }
  case E_AND: case E_OR: return lower_andor(F, e);
  case E_TABLE: ERR(e, "table constructors are only supported as struct values: P{...}");
  case E_FUNC: ERR(e, "function definitions (closures) are not supported inside kernels");
  case E_VARARG: ERR(e, "varargs ('...') are not supported in kernels");
  }
  ERR(e, "unsupported expression");
}

int wf_lo_call(wf_fstate *F, wf_expr *e, int want, wf_rv *out) {
  if (e->kind == E_METHOD)
    ERR(e, "method calls (':%s') are not supported in kernels", e->name);
  wf_rv callee = wf_lo_expr(F, e->a);
  F->b.loc = (wf_loc){e->line, e->col};
  if (callee.kind == RV_LUA) {
    switch (callee.lk) {
    case LV_BUILTIN: return wf_bi_call(F, callee.str, e, want, out);
    case LV_TYPE: return wf_bi_construct(F, callee.t, e, out);
    case LV_FUNC: return wf_res_callfunc(F, callee, e, want, out);
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
      for (int j = 0; j < need; j++) out[k++] = tmp[j];
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
  if (x->is_param && x->t && (wf_t_is_scalar(x->t) || x->t->kind == WF_T_ARRAY))
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
  if (ok) {
    if (c < 0 || c >= n) ERR(at, "index %d out of range for %s (0..%d)", c, TN(t), n - 1);
    return wf_b_insert(&F->b, agg, c, v);
  }
  wf_val k = wf_lo_index_key(F, key, at);
  check_component(F, t, k);
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
    while (x->kind == E_INDEX && n < 16) chain[n++] = x, x = x->a;
    /* peel to find the array base: evaluate the base object */
    wf_rv base = wf_lo_expr(F, x);
    if (base.kind == RV_VAL && base.t->kind == WF_T_ARRAY && n <= base.t->ndim) {
      const wf_type *t = base.t;
      if (n < t->ndim)
        ERR(e, "cannot assign to a %d-d view of %s; index all %d dimensions", t->ndim - n,
            TN(t), t->ndim);
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
      if (t->kind != WF_T_VEC && t->kind != WF_T_MAT && t->kind != WF_T_QUAT)
        ERR(e, "cannot index a value of type %s", TN(t));
      key = wf_lo_expr(F, e->b);
      ct = wf_t_component(F->C->T, t, 0);
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
static void lower_stmt(wf_fstate *F, wf_stmt *s);
static void lower_stmts(wf_fstate *F, wf_block_ast *b, int from);

typedef struct restarg {
  wf_block_ast *b;
  int from;
} restarg;

static wf_rv br_rest(wf_fstate *F, void *arg) {
  restarg *ra = arg;
  lower_stmts(F, ra->b, ra->from);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

static wf_rv br_block(wf_fstate *F, void *arg) {
  lower_stmts(F, (wf_block_ast *)arg, 0);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

/* not (break or return): whether execution continues here. */
static wf_val continuing(wf_fstate *F) {
  const wf_type *bt = t_bool(F);
  wf_val c = wf_b_op1(&F->b, WF_OP_NOT, bt, F->vars[F->retflag].v);
  if (F->brk >= 0)
    c = wf_b_op2(&F->b, WF_OP_BAND, bt, c, wf_b_op1(&F->b, WF_OP_NOT, bt, F->vars[F->brk].v));
  return c;
}

static void lower_stmts(wf_fstate *F, wf_block_ast *b, int from) {
  int scope = F->nvars;
  for (int i = from; i < b->n; i++) {
    wf_stmt *s = b->s[i];
    int nb = F->nbreaks, nr = F->nreturns;
    lower_stmt(F, s);
    if (s->kind == S_BREAK || s->kind == S_RETURN) break;
    if ((F->nbreaks != nb || F->nreturns != nr) && i + 1 < b->n) {
      /* the statement may exit: guard the rest of the block */
      F->b.loc = (wf_loc){b->s[i + 1]->line, b->s[i + 1]->col};
      restarg ra = {b, i + 1};
      emit_if(F, continuing(F), br_rest, &ra, NULL, NULL, 0, NULL);
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
        int vi = addvar(F, s->names[i], WF_NOVAL, NULL);
        F->vars[vi].islit = 1;
        F->vars[vi].litint = vals[i].isint;
        F->vars[vi].num = vals[i].num;
        F->vars[vi].weak = vals[i].kind == RV_WEAK ? vals[i].weak : NULL;
        continue;
      }
      v = wf_lo_value(F, &vals[i], NULL, src);
      t = wf_vtype(F->fn, v);
    }
    addvar(F, s->names[i], v, t);
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
  for (int i = 0; i < n; i++) assign_to(F, s->targets[i], vals[i]);
}

static wf_rv br_ifchain(wf_fstate *F, void *arg);

typedef struct ifarg {
  wf_stmt *s;
  int k; /* next condition index */
} ifarg;

/* if conds[k] then blocks[k] else (the rest of the chain) */
static void lower_ifchain(wf_fstate *F, wf_stmt *s, int k) {
  wf_rv c = wf_lo_expr(F, s->conds[k]);
  wf_val cv = as_bool(F, c, s->conds[k], "if condition");
  F->b.loc = (wf_loc){s->line, s->col};
  ifarg *next = wf_front_alloc(F->C, sizeof *next);
  next->s = s;
  next->k = k + 1;
  int has_more = k + 1 < s->nconds || s->has_else;
  emit_if(F, cv, br_block, &s->blocks[k], has_more ? br_ifchain : NULL, next, 0, NULL);
}

static wf_rv br_ifchain(wf_fstate *F, void *arg) {
  ifarg *a = arg;
  if (a->k < a->s->nconds) lower_ifchain(F, a->s, a->k);
  else lower_stmts(F, &a->s->blocks[a->s->nconds], 0);
  wf_rv r;
  memset(&r, 0, sizeof r);
  return r;
}

/* ---- loops ---- */

/* What a loop body does to the bindings visible before it: the vars it
** changes (idx[], their types after the body in types[]), whether it may
** break or return, and how many return statements it lowers (nreturns
** grows by that much whenever the loop is lowered). idx and types have
** room for every var visible at the loop (cap). */
typedef struct loopinfo {
  int n, cap;
  int *idx;
  const wf_type **types;
  int exits, dret;
} loopinfo;

/* What a probe depends on, per visible var: its type, its literal state
** and which earlier var holds the same SSA value (a body "changes" a var
** when its value differs afterwards), but not the values themselves. So
** the probe of an inner loop made while probing the enclosing one also
** serves the enclosing loop's real lowering, where the carried vars are
** block parameters of the same types: each body of a nest is lowered a
** bounded number of times instead of twice per nesting level. */
typedef struct sigvar {
  const wf_type *t;
  const wf_weak *weak;
  double num;
  int flags; /* 1 literal, 2 integer literal, 4 no value, 8 parameter */
  int alias; /* the first var holding the same value, or -1 */
} sigvar;

struct wf_loopmemo {
  wf_fstate *F;
  int nsig;
  sigvar *sig;
  loopinfo li;
  struct wf_loopmemo *next;
};

static sigvar *loop_sig(wf_fstate *F) {
  int n = F->nvars;
  sigvar *sg = wf_front_alloc(F->C, sizeof(sigvar) * (size_t)(n ? n : 1));
  /* first var holding each value: an open-addressing table of var indices */
  int hn = 16;
  while (hn < 2 * n) hn *= 2;
  int *h = wf_front_alloc(F->C, sizeof(int) * (size_t)hn);
  for (int k = 0; k < hn; k++) h[k] = -1;
  for (int i = 0; i < n; i++) {
    wf_var *x = &F->vars[i];
    sg[i].t = x->t;
    sg[i].weak = x->islit ? x->weak : NULL;
    sg[i].num = x->islit ? x->num : 0;
    sg[i].flags = (x->islit ? 1 : 0) | (x->islit && x->litint ? 2 : 0) |
                  (x->v == WF_NOVAL ? 4 : 0) | (x->is_param ? 8 : 0);
    sg[i].alias = -1;
    if (x->v == WF_NOVAL) continue;
    unsigned k = ((unsigned)x->v * 2654435761u) & (unsigned)(hn - 1);
    while (h[k] >= 0 && F->vars[h[k]].v != x->v) k = (k + 1) & (unsigned)(hn - 1);
    if (h[k] >= 0) sg[i].alias = h[k];
    else h[k] = i;
  }
  return sg;
}

/* Same shape and leaves (the conditions' values do not matter). */
static int weak_same(const wf_weak *a, const wf_weak *b) {
  if (!a || !b) return a == b;
  if ((a->cond == WF_NOVAL) != (b->cond == WF_NOVAL)) return 0;
  if (a->op != b->op) return 0;
  if (a->cond == WF_NOVAL && !a->op)
    return (a->dyn == WF_NOVAL) == (b->dyn == WF_NOVAL) && a->isint == b->isint &&
           a->integral == b->integral && !memcmp(&a->num, &b->num, sizeof a->num);
  return weak_same(a->a, b->a) && weak_same(a->b, b->b);
}

static int sig_same(const sigvar *a, int na, const sigvar *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (a[i].t != b[i].t || a[i].flags != b[i].flags || a[i].alias != b[i].alias ||
        memcmp(&a[i].num, &b[i].num, sizeof a[i].num) || !weak_same(a[i].weak, b[i].weak))
      return 0;
  return 1;
}

typedef void (*loop_body_fn)(wf_fstate *F, void *arg, wf_val iv);

/* Lower body() into a scratch block with the current bindings and fill li
** with what it changed. Restores all state. Loops met inside are not
** lowered for real (F->probing): only their effect is applied. */
static void probe_loop(wf_fstate *F, loop_body_fn body, void *arg, const wf_type *ivt,
                       loopinfo *li) {
  snap s0 = take_snap(F);
  int nb = F->nbreaks, nr = F->nreturns;
  wf_block *scratch = wf_b_newblock(F->fn, ivt ? 1 : 0, ivt ? &ivt : NULL);
  wf_block *saved = F->b.block;
  wf_loc loc = F->b.loc;
  F->b.block = scratch;
  F->probing++;
  body(F, arg, ivt ? scratch->params[0] : WF_NOVAL);
  F->probing--;
  F->nvars = s0.n;
  li->cap = s0.n + 1;
  li->idx = wf_front_alloc(F->C, sizeof(int) * (size_t)li->cap);
  li->types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)li->cap);
  li->n = 0;
  for (int i = 0; i < s0.n; i++)
    if (F->vars[i].v != s0.v[i].v) {
      li->idx[li->n] = i;
      li->types[li->n] = F->vars[i].t;
      li->n++;
    }
  li->exits = F->nbreaks != nb || F->nreturns != nr;
  li->dret = F->nreturns - nr;
  restore_snap(F, s0);
  F->nbreaks = nb;
  F->nreturns = nr;
  F->b.block = saved;
  F->b.loc = loc;
}

/* What loop statement s changes from the current bindings: remembered
** from an earlier probe with the same signature, else probed now. li gets
** its own arrays (the real lowering may add to them). */
static void loop_info(wf_fstate *F, wf_stmt *s, loop_body_fn body, void *arg, const wf_type *ivt,
                      loopinfo *li) {
  sigvar *sg = loop_sig(F);
  struct wf_loopmemo *m;
  for (m = s->memo; m; m = m->next)
    if (m->F == F && sig_same(m->sig, m->nsig, sg, F->nvars)) break;
  if (!m) {
    m = wf_front_alloc(F->C, sizeof *m);
    m->F = F;
    m->nsig = F->nvars;
    m->sig = sg;
    probe_loop(F, body, arg, ivt, &m->li);
    m->next = s->memo;
    s->memo = m;
  }
  *li = m->li;
  li->cap = F->nvars + 1;
  li->idx = wf_front_alloc(F->C, sizeof(int) * (size_t)li->cap);
  li->types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)li->cap);
  memcpy(li->idx, m->li.idx, sizeof(int) * (size_t)m->li.n);
  memcpy(li->types, m->li.types, sizeof(wf_type *) * (size_t)m->li.n);
}

/* While an enclosing loop is probed, a loop only needs its effect: the
** vars it changes hold values of their new types after it. */
static void loop_effect(wf_fstate *F, const loopinfo *li) {
  for (int j = 0; j < li->n; j++) {
    wf_var *x = &F->vars[li->idx[j]];
    x->v = undef_of(F, li->types[j]);
    x->t = li->types[j];
    if (x->islit) loop_typed(F, x);
    x->islit = 0;
    x->weak = NULL;
  }
  F->nreturns += li->dret;
}

/* Index of a var in idx[], or -1. */
static int find_idx(int n, const int *idx, int vi) {
  for (int j = 0; j < n; j++)
    if (idx[j] == vi) return j;
  return -1;
}

/* Check a real lowering against its probe: vars the body changed that are
** not carried (a probe sees two vars holding one value where the real
** bindings are two block parameters, and `a = b` then changes a only for
** real) are added to li. Returns how many; the caller lowers again. */
static int extra_changes(wf_fstate *F, snap entry, loopinfo *li) {
  int added = 0;
  for (int i = 0; i < entry.n; i++) {
    if (F->vars[i].v == entry.v[i].v || find_idx(li->n, li->idx, i) >= 0) continue;
    if (li->n >= li->cap) break; /* cannot happen: cap > entry.n */
    li->idx[li->n] = i;
    li->types[li->n] = F->vars[i].t;
    li->n++;
    added++;
  }
  return added;
}

/* After lowering a loop region: extra_changes, and when it added locals,
** back to the block outside (the caller then lowers the loop again). */
static int region_changed(wf_fstate *F, snap entry, loopinfo *li, wf_block *saved) {
  int extra = extra_changes(F, entry, li);
  if (extra) F->b.block = saved;
  return extra;
}

typedef struct forarg {
  wf_stmt *s;
} forarg;

static void for_body(wf_fstate *F, void *arg, wf_val iv) {
  wf_stmt *s = ((forarg *)arg)->s;
  int scope = F->nvars;
  addvar(F, s->names[0], iv, wf_vtype(F->fn, iv));
  lower_stmts(F, &s->body, 0);
  F->nvars = scope;
}

typedef struct whilearg {
  wf_stmt *s;
} whilearg;

static void while_probe_body(wf_fstate *F, void *arg, wf_val iv) {
  (void)iv;
  wf_stmt *s = ((whilearg *)arg)->s;
  wf_rv c = wf_lo_expr(F, s->conds[0]);
  as_bool(F, c, s->conds[0], "while condition");
  lower_stmts(F, &s->body, 0);
}

/* Lower the statements of a repeat body from `from` on, then its until
** condition, which sees the body's locals. When a statement may exit
** (break or return), the rest of the body and the condition go into the
** `if not exiting` branch, whose value is the condition (true when
** exiting: the loop stops through its flags anyway). Returns the bool. */
typedef struct repeatarg {
  wf_stmt *s;
  int from;
} repeatarg;

static wf_val repeat_until(wf_fstate *F, wf_stmt *s, int from);

static wf_rv br_repeat_rest(wf_fstate *F, void *arg) {
  repeatarg *ra = arg;
  return wf_lo_mkval(repeat_until(F, ra->s, ra->from), t_bool(F));
}

static wf_val repeat_until(wf_fstate *F, wf_stmt *s, int from) {
  wf_block_ast *b = &s->body;
  for (int i = from; i < b->n; i++) {
    int b0 = F->nbreaks, r0 = F->nreturns;
    lower_stmt(F, b->s[i]);
    if (b->s[i]->kind == S_BREAK || b->s[i]->kind == S_RETURN) break;
    if ((F->nbreaks != b0 || F->nreturns != r0) && i + 1 < b->n) {
      F->b.loc = (wf_loc){b->s[i + 1]->line, b->s[i + 1]->col};
      repeatarg ra = {s, i + 1};
      return emit_if(F, continuing(F), br_repeat_rest, &ra, br_true, NULL, 1, s->conds[0]).v;
    }
  }
  wf_rv c = wf_lo_expr(F, s->conds[0]);
  return as_bool(F, c, s->conds[0], "until condition");
}

static void repeat_body(wf_fstate *F, void *arg, wf_val iv) {
  (void)iv;
  repeat_until(F, ((whilearg *)arg)->s, 0);
}

/* The values of the carried vars (initial values before the loop, yielded
** values at the end of a block). */
static void current_vals(wf_fstate *F, const loopinfo *li, wf_val *out) {
  for (int j = 0; j < li->n; j++) out[j] = var_value(F, &F->vars[li->idx[j]], li->types[j]);
}

/* The carried vars take the values vals[0..n) (typed values, no longer
** literals). */
static void bind_vals(wf_fstate *F, const wf_val *vals, const loopinfo *li) {
  for (int j = 0; j < li->n; j++) {
    wf_var *x = &F->vars[li->idx[j]];
    x->v = vals[j];
    x->t = li->types[j];
    if (x->islit) loop_typed(F, x);
    x->islit = 0;
    x->weak = NULL;
  }
}

/* In a loop block: the carried vars are its parameters from off on. */
static void bind_params(wf_fstate *F, wf_block *blk, int off, const loopinfo *li) {
  bind_vals(F, blk->params + off, li);
}

/* After the loop: the carried vars hold its results from res[off] on. */
static void bind_results(wf_fstate *F, wf_inst *in, int off, const loopinfo *li) {
  bind_vals(F, in->res + off, li);
}

/* exit test: brk or ret, from the carried flags */
static wf_val exit_flag(wf_fstate *F, const loopinfo *li) {
  const wf_type *bt = t_bool(F);
  wf_val c = WF_NOVAL;
  if (find_idx(li->n, li->idx, F->brk) >= 0) c = F->vars[F->brk].v;
  if (find_idx(li->n, li->idx, F->retflag) >= 0) {
    wf_val r = F->vars[F->retflag].v;
    c = c == WF_NOVAL ? r : wf_b_op2(&F->b, WF_OP_BOR, bt, c, r);
  }
  return c;
}

/* The real lowering of a numeric for: a FOR op, or a WHILE carrying the
** induction variable when the body may exit. Returns 0 when done, else
** the number of vars added to li (nothing was linked; lower again). */
static int for_real(wf_fstate *F, forarg *fa, const wf_type *t, const wf_val *bv, int stepsign,
                    loopinfo *li, snap entry) {
  wf_stmt *s = fa->s;
  int n = li->n;
  wf_val *inits = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 4));
  const wf_type **ptypes = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(n + 1));
  ptypes[0] = t;
  for (int j = 0; j < n; j++) ptypes[1 + j] = li->types[j];
  wf_block *saved = F->b.block;
  if (!li->exits) {
    inits[0] = bv[0];
    inits[1] = bv[1];
    inits[2] = bv[2];
    current_vals(F, li, inits + 3);
    wf_block *body = wf_b_newblock(F->fn, n + 1, ptypes);
    F->b.block = body;
    bind_params(F, body, 1, li);
    for_body(F, fa, body->params[0]);
    int extra = region_changed(F, entry, li, saved);
    if (extra) return extra;
    wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
    current_vals(F, li, ys);
    F->b.loc = (wf_loc){s->line, s->col};
    wf_b_inst(&F->b, WF_OP_YIELD, n, ys, 0, NULL, 0);
    F->b.block = saved;
    wf_inst *in = wf_b_inst(&F->b, WF_OP_FOR, n + 3, inits, n, li->types, 1);
    in->blocks[0] = body;
    body->parent = in;
    bind_results(F, in, 0, li);
    return 0;
  }
  /* while form: carried (i, vars...) */
  inits[0] = bv[0];
  current_vals(F, li, inits + 1);
  const wf_type *bt = t_bool(F);
  /* before: condition */
  wf_block *before = wf_b_newblock(F->fn, n + 1, ptypes);
  F->b.block = before;
  bind_params(F, before, 1, li);
  wf_val iv = before->params[0];
  wf_val inrange;
  if (stepsign > 0) inrange = wf_b_op2(&F->b, WF_OP_LE, bt, iv, bv[1]);
  else if (stepsign < 0) inrange = wf_b_op2(&F->b, WF_OP_GE, bt, iv, bv[1]);
  else {
    wf_val pos = wf_b_op2(&F->b, WF_OP_GT, bt, bv[2], wf_lo_const(F, t, 0));
    inrange = wf_b_op3(&F->b, WF_OP_SELECT, bt, pos, wf_b_op2(&F->b, WF_OP_LE, bt, iv, bv[1]),
                       wf_b_op2(&F->b, WF_OP_GE, bt, iv, bv[1]));
  }
  wf_val ex = exit_flag(F, li);
  if (ex != WF_NOVAL)
    inrange = wf_b_op2(&F->b, WF_OP_BAND, bt, inrange, wf_b_op1(&F->b, WF_OP_NOT, bt, ex));
  wf_val *cargs = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 2));
  cargs[0] = inrange;
  cargs[1] = iv;
  current_vals(F, li, cargs + 2);
  wf_b_inst(&F->b, WF_OP_COND, n + 2, cargs, 0, NULL, 0);
  /* after: body, then i + step */
  wf_block *after = wf_b_newblock(F->fn, n + 1, ptypes);
  F->b.block = after;
  bind_params(F, after, 1, li);
  for_body(F, fa, after->params[0]);
  int extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  F->b.loc = (wf_loc){s->line, s->col};
  wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  ys[0] = wf_b_op2(&F->b, WF_OP_ADD, t, after->params[0], bv[2]);
  current_vals(F, li, ys + 1);
  wf_b_inst(&F->b, WF_OP_YIELD, n + 1, ys, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_WHILE, n + 1, inits, n + 1, ptypes, 2);
  in->blocks[0] = before;
  in->blocks[1] = after;
  before->parent = in;
  after->parent = in;
  bind_results(F, in, 1, li);
  return 0;
}

static void lower_for(wf_fstate *F, wf_stmt *s) {
  wf_rv lo = wf_lo_expr(F, s->exprs[0]);
  wf_rv hi = wf_lo_expr(F, s->exprs[1]);
  wf_rv st = s->nexprs > 2 ? wf_lo_expr(F, s->exprs[2]) : mklit(1, 1);
  F->b.loc = (wf_loc){s->line, s->col};
  /* the loop type: the typed bound, else int32 (float if a literal is;
  ** int64 when an integer literal does not fit int32, so the loop runs
  ** as Lua's would instead of from a wrapped bound) */
  const wf_type *t = lo.kind == RV_VAL   ? lo.t
                     : hi.kind == RV_VAL ? hi.t
                     : st.kind == RV_VAL ? st.t
                                         : NULL;
  if (!t) t = (lo.isint && hi.isint && st.isint) ? t_i32(F) : t_f32(F);
  if (t == t_i32(F) && lo.kind != RV_VAL && hi.kind != RV_VAL && st.kind != RV_VAL) {
    wf_rv *b3[3] = {&lo, &hi, &st};
    for (int k = 0; k < 3; k++)
      if (b3[k]->kind == RV_LIT && !(b3[k]->num >= -0x1p31 && b3[k]->num < 0x1p31))
        t = wf_t_int(F->C->T, 64, 1);
  }
  if (t->kind != WF_T_INT && t->kind != WF_T_FLOAT)
    wf_lo_err(F, s->line, s->col, "for loop bounds must be numbers, got %s", TN(t));
  wf_expr *es[3] = {s->exprs[0], s->exprs[1], s->nexprs > 2 ? s->exprs[2] : s->exprs[1]};
  wf_rv *rs[3] = {&lo, &hi, &st};
  wf_val bv[3];
  for (int k = 0; k < 3; k++) {
    if (rs[k]->kind == RV_VAL && rs[k]->t != t)
      wf_lo_err(F, es[k]->line, es[k]->col, "for loop bounds have different types: %s and %s",
                TN(t), TN(rs[k]->t));
    bv[k] = wf_lo_value(F, rs[k], t, es[k]);
  }
  int stepsign = 0; /* known sign of a literal step */
  if (st.kind == RV_LIT) {
    if (st.num == 0) wf_lo_err(F, s->line, s->col, "for loop step is zero");
    stepsign = st.num > 0 ? 1 : -1;
  }
  /* break flag for this loop */
  int saved_brk = F->brk;
  int scope = F->nvars;
  int saved_base = F->loopbase, saved_line = F->loopline;
  F->loopbase = scope;
  F->loopline = s->line;
  F->brk = addvar(F, "(break)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  forarg fa = {s};
  loopinfo li;
  loop_info(F, s, for_body, &fa, t, &li);
  int nb0 = F->nbreaks;
  if (F->probing) {
    loop_effect(F, &li);
  } else {
    snap entry = take_snap(F);
    int nr0 = F->nreturns;
    while (for_real(F, &fa, t, bv, stepsign, &li, entry)) {
      restore_snap(F, entry);
      F->nbreaks = nb0;
      F->nreturns = nr0;
    }
  }
  F->nbreaks = nb0;
  F->brk = saved_brk;
  F->loopbase = saved_base;
  F->loopline = saved_line;
  F->nvars = scope;
}

/* The real lowering of a while or repeat loop (the WHILE form; `before`
** holds the condition, and for repeat the body too). Returns as for_real. */
static int while_real(wf_fstate *F, wf_stmt *s, int is_repeat, loopinfo *li, snap entry) {
  int n = li->n;
  wf_val *inits = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  current_vals(F, li, inits);
  const wf_type *bt = t_bool(F);
  wf_block *before = wf_b_newblock(F->fn, n, li->types);
  wf_block *saved = F->b.block;
  F->b.block = before;
  bind_params(F, before, 0, li);
  wf_val cont;
  if (!is_repeat) {
    wf_val ex = exit_flag(F, li);
    if (ex == WF_NOVAL) {
      wf_rv c = wf_lo_expr(F, s->conds[0]);
      cont = as_bool(F, c, s->conds[0], "while condition");
    } else {
      wf_val notex = wf_b_op1(&F->b, WF_OP_NOT, bt, ex);
      wf_rv r = emit_if(F, notex, br_boolexpr_while, s->conds[0], br_false, NULL, 1, s->conds[0]);
      cont = r.v;
    }
  } else {
    int inner = F->nvars;
    wf_val until = repeat_until(F, s, 0);
    wf_val ex = exit_flag(F, li);
    cont = wf_b_op1(&F->b, WF_OP_NOT, bt, until);
    if (ex != WF_NOVAL) cont = wf_b_op2(&F->b, WF_OP_BAND, bt, cont, wf_b_op1(&F->b, WF_OP_NOT, bt, ex));
    F->nvars = inner;
  }
  int extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  F->b.loc = (wf_loc){s->line, s->col};
  wf_val *cargs = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  cargs[0] = cont;
  current_vals(F, li, cargs + 1);
  wf_b_inst(&F->b, WF_OP_COND, n + 1, cargs, 0, NULL, 0);
  wf_block *after = wf_b_newblock(F->fn, n, li->types);
  F->b.block = after;
  bind_params(F, after, 0, li);
  if (!is_repeat) lower_stmts(F, &s->body, 0);
  extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  current_vals(F, li, ys);
  F->b.loc = (wf_loc){s->line, s->col};
  wf_b_inst(&F->b, WF_OP_YIELD, n, ys, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_WHILE, n, inits, n, li->types, 2);
  in->blocks[0] = before;
  in->blocks[1] = after;
  before->parent = in;
  after->parent = in;
  bind_results(F, in, 0, li);
  return 0;
}

static void lower_while(wf_fstate *F, wf_stmt *s, int is_repeat) {
  int saved_brk = F->brk;
  int scope = F->nvars;
  int saved_base = F->loopbase, saved_line = F->loopline;
  F->loopbase = scope;
  F->loopline = s->line;
  F->b.loc = (wf_loc){s->line, s->col};
  F->brk = addvar(F, "(break)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  whilearg wa = {s};
  int nb0 = F->nbreaks;
  loopinfo li;
  loop_info(F, s, is_repeat ? repeat_body : while_probe_body, &wa, NULL, &li);
  if (F->probing) {
    loop_effect(F, &li);
  } else {
    snap entry = take_snap(F);
    int nr0 = F->nreturns;
    while (while_real(F, s, is_repeat, &li, entry)) {
      restore_snap(F, entry);
      F->nbreaks = nb0;
      F->nreturns = nr0;
    }
  }
  F->nbreaks = nb0;
  F->brk = saved_brk;
  F->loopbase = saved_base;
  F->loopline = saved_line;
  F->nvars = scope;
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
      for (int i = 0; i < n - 1; i++) vals[i] = wf_lo_expr(F, s->exprs[i]);
      wf_rv tmp[WF_MAXRET];
      int got = wf_lo_call(F, last, WF_MAXRET - (n - 1), tmp);
      for (int j = 0; j < got; j++) vals[n - 1 + j] = tmp[j];
      n = n - 1 + got;
    } else {
      for (int i = 0; i < n; i++) vals[i] = wf_lo_expr(F, s->exprs[i]);
    }
  }
  F->b.loc = (wf_loc){s->line, s->col};
  if (F->nret < 0) F->nret = n;
  else if (F->nret != n)
    wf_lo_err(F, s->line, s->col, "this return gives %d value%s, an earlier one %d", n,
              n == 1 ? "" : "s", F->nret);
  for (int i = 0; i < n; i++) {
    wf_var *x = &F->vars[F->retvars[i]];
    wf_expr *at = i < s->nexprs ? s->exprs[i] : s->exprs[s->nexprs - 1];
    if (vals[i].kind == RV_NONE) wf_lo_err(F, at->line, at->col, "the call gives no value to return");
    if (x->t && vals[i].kind == RV_VAL && vals[i].t != x->t)
      wf_lo_err(F, at->line, at->col, "return value %d is %s here but %s in an earlier return", i + 1,
                TN(vals[i].t), TN(x->t));
    wf_val v = wf_lo_value(F, &vals[i], x->t, at);
    x->t = wf_vtype(F->fn, v);
    x->v = v;
  }
  F->vars[F->retflag].v = wf_b_consti(&F->b, t_bool(F), 1);
  F->nreturns++;
}

static void lower_stmt(wf_fstate *F, wf_stmt *s) {
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
  case S_FORNUM: lower_for(F, s); return;
  case S_WHILE: lower_while(F, s, 0); return;
  case S_REPEAT: lower_while(F, s, 1); return;
  case S_DO: lower_stmts(F, &s->body, 0); return;
  case S_BREAK:
    if (F->brk < 0) wf_lo_err(F, s->line, s->col, "'break' outside a loop");
    F->vars[F->brk].v = wf_b_consti(&F->b, t_bool(F), 1);
    F->nbreaks++;
    return;
  case S_RETURN: lower_return(F, s); return;
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
    int vi = addvar(F, fa->params[i], F->fn->params[i], ptypes[i]);
    F->vars[vi].is_param = 1;
  }
  F->retflag = addvar(F, "(ret)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  for (int i = 0; i < WF_MAXRET; i++) F->retvars[i] = addvar(F, "(r)", WF_NOVAL, NULL);
  lower_stmts(F, &fa->body, 0);
  F->b.loc = (wf_loc){fa->lastline, 1};
  int nret = F->nret < 0 ? 0 : F->nret;
  wf_val rv[WF_MAXRET];
  const wf_type **rt = wf_ir_alloc(C->mod, sizeof(wf_type *) * (size_t)(nret ? nret : 1));
  for (int i = 0; i < nret; i++) {
    wf_var *x = &F->vars[F->retvars[i]];
    rt[i] = x->t;
    rv[i] = var_value(F, x, x->t);
  }
  wf_b_inst(&F->b, WF_OP_RET, nret, rv, 0, NULL, 0);
  F->fn->nret = nret;
  F->fn->rettypes = rt;
  C->cur = F->parent;
  return F->fn;
}
