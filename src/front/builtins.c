/*
** builtins.c -- lowering of weft's kernel builtins and type constructors
** into primitive IR ops. Vector, matrix, quaternion and transform builtins
** become scalar arithmetic on EXTRACTed components rebuilt with AGG, so the
** passes, autodiff and backends only see the primitive ops of ir.h.
**
** Names are those of lua/weft/builtins.lua's registry (weft.sqrt and
** math.sqrt both arrive here as "sqrt").
*/
#include <math.h>
#include <string.h>

#include "front/lower.h"
#include "geom/native.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)
#define TN(t) wf_lo_tname(F->C, (t))
#define B (&F->b)

static const wf_type *t_bool(wf_fstate *F) {
  return wf_t_bool(F->C->T);
}
static const wf_type *t_i32(wf_fstate *F) {
  return wf_t_int(F->C->T, 32, 1);
}
static const wf_type *t_f32(wf_fstate *F) {
  return wf_t_float(F->C->T, 32);
}
static const wf_type *comp(wf_fstate *F, const wf_type *t, int i) {
  return wf_t_component(F->C->T, t, i);
}

/* Lower the call's arguments, checking the count is in [lo, hi]. */
static int getargs(wf_fstate *F, const char *name, wf_expr *call, int lo, int hi, wf_rv *out) {
  int n = call->nargs;
  if (n < lo || n > hi) {
    if (lo == hi) ERR(call, "%s expects %d argument%s, got %d", name, lo, lo == 1 ? "" : "s", n);
    ERR(call, "%s expects %d to %d arguments, got %d", name, lo, hi, n);
  }
  for (int i = 0; i < n; i++)
    out[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  return n;
}

/* Typed value of an argument (a literal gets t, or its default type). */
static wf_val val(wf_fstate *F, wf_rv *r, const wf_type *t, wf_expr *at) {
  return wf_lo_value(F, r, t, at);
}

/* The common type of args (literals adapt); error names both types. */
static const wf_type *unify(wf_fstate *F, const char *name, int n, wf_rv *a, wf_expr **ae,
                            int want_float) {
  const wf_type *t = NULL;
  for (int i = 0; i < n; i++) {
    if (a[i].kind == RV_VAL) {
      if (t && a[i].t != t)
        ERR(ae[i], "%s: arguments have different types: %s and %s", name, TN(t), TN(a[i].t));
      t = a[i].t;
    } else if (!wf_lo_isnum(&a[i])) {
      wf_lo_value(F, &a[i], NULL, ae[i]);
    }
  }
  if (!t) {
    int allint = 1;
    for (int i = 0; i < n; i++)
      allint = allint && a[i].isint;
    t = (allint && !want_float) ? t_i32(F) : t_f32(F);
  }
  return t;
}

static const wf_type *scalar_of(const wf_type *t) {
  return wf_t_is_scalar(t) ? t : (t->kind != WF_T_ARRAY && t->kind != WF_T_STRUCT) ? t->elem : NULL;
}

/* ---- elementwise math ---- */
/* sign(x) componentwise: x < 0 ? -1 : 1. */
static wf_val sign_of(wf_fstate *F, const wf_type *t, wf_val v) {
  if (!wf_t_is_scalar(t)) {
    int n = wf_t_arity(t);
    wf_val c[WF_MAX_COMP];
    for (int i = 0; i < n; i++)
      c[i] = sign_of(F, comp(F, t, i), wf_b_extract(&F->b, v, i));
    return wf_b_agg(&F->b, t, n, c);
  }
  wf_val neg = wf_b_op2(&F->b, WF_OP_LT, t_bool(F), v, wf_lo_const(F, t, 0));
  return wf_b_op3(&F->b, WF_OP_SELECT, t, neg, wf_lo_const(F, t, -1), wf_lo_const(F, t, 1));
}

/* A unary builtin of the op table (ir.h): componentwise on vectors; an
** untyped literal argument is float (an integer one for WF_TY_NUM ops,
** abs(-3)); the WF_OPF_INTID ops pass integers through (floor(i) = i). */
static int unary_math(wf_fstate *F, const char *name, wf_op op, wf_expr *call, wf_rv *out) {
  const wf_opinfo *oi = &wf_opinfo_tab[op];
  wf_rv a[1];
  getargs(F, name, call, 1, 1, a);
  const wf_type *t = wf_lo_isnum(&a[0]) ? t_f32(F) : NULL;
  if (wf_lo_isnum(&a[0]) && oi->ty == WF_TY_NUM && a[0].isint) t = t_i32(F);
  wf_val v = val(F, &a[0], t, call->args[0]);
  t = wf_vtype(F->fn, v);
  const wf_type *st = scalar_of(t);
  if (!st || st->kind == WF_T_BOOL || (t->kind == WF_T_STRUCT))
    ERR(call->args[0], "%s expects a number or a vector, got %s", name, TN(t));
  if (st->kind == WF_T_INT) {
    if (oi->flags & WF_OPF_INTID) {
      out[0] = wf_lo_mkval(v, t);
      return 1;
    }
    if (oi->ty == WF_TY_FLOAT)
      ERR(call->args[0], "%s expects a float argument, got %s", name, TN(t));
  }
  out[0] = wf_lo_mkval(wf_lo_cw1(F, op, t, v), t);
  return 1;
}

/* Warp's sign: -1 if x < 0, else 1 (also at 0), spelled with a select so
** that folding and every backend agree; an untyped integer gives int32. */
static int sign_builtin(wf_fstate *F, wf_expr *call, wf_rv *out) {
  wf_rv a[1];
  getargs(F, "sign", call, 1, 1, a);
  const wf_type *t = wf_lo_isnum(&a[0]) ? (a[0].isint ? t_i32(F) : t_f32(F)) : NULL;
  wf_val v = val(F, &a[0], t, call->args[0]);
  t = wf_vtype(F->fn, v);
  const wf_type *st = scalar_of(t);
  if (!st || st->kind == WF_T_BOOL || (t->kind == WF_T_STRUCT))
    ERR(call->args[0], "sign expects a number or a vector, got %s", TN(t));
  out[0] = wf_lo_mkval(sign_of(F, t, v), t);
  return 1;
}

static int binary_math(wf_fstate *F, const char *name, wf_op op, int float_only, wf_expr *call,
                       wf_rv *out) {
  wf_rv a[8];
  int minmax = op == WF_OP_MIN || op == WF_OP_MAX;
  int n = getargs(F, name, call, minmax ? 1 : 2, minmax ? 8 : 2, a);
  if (n == 1) {
    /* Warp's min(v) and max(v): the smallest (largest) component */
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_VEC || a[0].t->elem->kind == WF_T_BOOL)
      ERR(call->args[0], "%s of one argument expects a vector, got %s", name,
          a[0].kind == RV_VAL ? TN(a[0].t) : "a number");
    const wf_type *st = a[0].t->elem;
    wf_val acc = wf_b_extract(B, a[0].v, 0);
    for (int i = 1; i < wf_t_arity(a[0].t); i++)
      acc = wf_b_op2(B, op, st, acc, wf_b_extract(B, a[0].v, i));
    out[0] = wf_lo_mkval(acc, st);
    return 1;
  }
  const wf_type *t = unify(F, name, n, a, call->args, float_only);
  const wf_type *st = scalar_of(t);
  if (!st || st->kind == WF_T_BOOL) ERR(call, "%s expects numbers, got %s", name, TN(t));
  if (float_only && st->kind != WF_T_FLOAT)
    ERR(call, "%s expects float arguments, got %s", name, TN(t));
  wf_val acc = val(F, &a[0], t, call->args[0]);
  for (int i = 1; i < n; i++)
    acc = wf_lo_cw2(F, op, t, acc, val(F, &a[i], t, call->args[i]), 0);
  out[0] = wf_lo_mkval(acc, t);
  return 1;
}

/* ---- vectors ---- */
static wf_val X(wf_fstate *F, wf_val a, int i) {
  return wf_b_extract(B, a, i);
}
static wf_val MUL(wf_fstate *F, const wf_type *t, wf_val a, wf_val b) {
  return wf_b_op2(B, WF_OP_MUL, t, a, b);
}
static wf_val ADD(wf_fstate *F, const wf_type *t, wf_val a, wf_val b) {
  return wf_b_op2(B, WF_OP_ADD, t, a, b);
}
static wf_val SUB(wf_fstate *F, const wf_type *t, wf_val a, wf_val b) {
  return wf_b_op2(B, WF_OP_SUB, t, a, b);
}

static wf_val dot(wf_fstate *F, const wf_type *vt, wf_val a, wf_val b) {
  const wf_type *st = vt->elem;
  int n = wf_t_arity(vt);
  wf_val acc = MUL(F, st, X(F, a, 0), X(F, b, 0));
  for (int i = 1; i < n; i++)
    acc = ADD(F, st, acc, MUL(F, st, X(F, a, i), X(F, b, i)));
  return acc;
}

static wf_val cross(wf_fstate *F, const wf_type *vt, wf_val a, wf_val b) {
  const wf_type *st = vt->elem;
  wf_val ax = X(F, a, 0), ay = X(F, a, 1), az = X(F, a, 2);
  wf_val bx = X(F, b, 0), by = X(F, b, 1), bz = X(F, b, 2);
  wf_val c[3] = {SUB(F, st, MUL(F, st, ay, bz), MUL(F, st, az, by)),
                 SUB(F, st, MUL(F, st, az, bx), MUL(F, st, ax, bz)),
                 SUB(F, st, MUL(F, st, ax, by), MUL(F, st, ay, bx))};
  return wf_b_agg(B, vt, 3, c);
}

static wf_val vscale(wf_fstate *F, const wf_type *vt, wf_val v, wf_val s) {
  return wf_lo_cw2(F, WF_OP_MUL, vt, v, s, 1);
}

static const wf_type *need_vec(wf_fstate *F, const char *name, wf_rv *r, wf_expr *at, int n) {
  if (r->kind != RV_VAL || (r->t->kind != WF_T_VEC && r->t->kind != WF_T_QUAT) ||
      (n && wf_t_arity(r->t) != n) || r->t->elem->kind != WF_T_FLOAT) {
    if (n)
      ERR(at, "%s expects a float vector of length %d, got %s", name, n,
          r->kind == RV_VAL ? TN(r->t) : "a number");
    ERR(at, "%s expects a float vector, got %s", name, r->kind == RV_VAL ? TN(r->t) : "a number");
  }
  return r->t;
}

static const wf_type *need_mat(wf_fstate *F, const char *name, wf_rv *r, wf_expr *at) {
  if (r->kind != RV_VAL || r->t->kind != WF_T_MAT)
    ERR(at, "%s expects a matrix, got %s", name, r->kind == RV_VAL ? TN(r->t) : "a number");
  return r->t;
}

/* Determinant of the n x n scalar matrix m (row-major wf_vals). */
static wf_val det_n(wf_fstate *F, const wf_type *st, int n, const wf_val *m) {
  if (n == 1) return m[0];
  if (n == 2) return SUB(F, st, MUL(F, st, m[0], m[3]), MUL(F, st, m[1], m[2]));
  wf_val acc = WF_NOVAL;
  wf_val minor[16];
  for (int c = 0; c < n; c++) {
    int k = 0;
    for (int i = 1; i < n; i++)
      for (int j = 0; j < n; j++)
        if (j != c) minor[k++] = m[i * n + j];
    wf_val term = MUL(F, st, m[c], det_n(F, st, n - 1, minor));
    if (acc == WF_NOVAL)
      acc = term;
    else
      acc = (c & 1) ? SUB(F, st, acc, term) : ADD(F, st, acc, term);
  }
  return acc;
}

/* Room for the rows * cols scalars of matrix type mt (up to 64 x 64). */
static wf_val *elems(wf_fstate *F, const wf_type *mt) {
  return wf_front_alloc(F->C, sizeof(wf_val) * (size_t)mt->rows * (size_t)mt->cols);
}

static void mat_elems(wf_fstate *F, const wf_type *mt, wf_val m, wf_val *out) {
  for (int i = 0; i < mt->rows; i++) {
    wf_val row = X(F, m, i);
    for (int j = 0; j < mt->cols; j++)
      out[i * mt->cols + j] = X(F, row, j);
  }
}

static wf_val mat_from(wf_fstate *F, const wf_type *mt, const wf_val *e) {
  const wf_type *rt = comp(F, mt, 0);
  wf_val rows[WF_MAX_COMP];
  _Static_assert(WF_MAX_COMP >= 64, "a matrix has up to 64 rows");
  for (int i = 0; i < mt->rows; i++)
    rows[i] = wf_b_agg(B, rt, mt->cols, e + i * mt->cols);
  return wf_b_agg(B, mt, mt->rows, rows);
}

static wf_val quat_rotate(wf_fstate *F, const wf_type *qt, wf_val q, const wf_type *vt, wf_val v) {
  /* v' = v (2w^2 - 1) + 2w (u x v) + 2 u (u . v), u = q.xyz */
  const wf_type *st = qt->elem;
  wf_val u[3] = {X(F, q, 0), X(F, q, 1), X(F, q, 2)};
  wf_val w = X(F, q, 3);
  wf_val uv = wf_b_agg(B, vt, 3, u);
  wf_val two = wf_lo_const(F, st, 2.0), one = wf_lo_const(F, st, 1.0);
  wf_val a = SUB(F, st, MUL(F, st, two, MUL(F, st, w, w)), one);
  wf_val b = MUL(F, st, two, w);
  wf_val c = MUL(F, st, two, dot(F, vt, uv, v));
  wf_val r = vscale(F, vt, v, a);
  r = wf_lo_cw2(F, WF_OP_ADD, vt, r, vscale(F, vt, cross(F, vt, uv, v), b), 0);
  return wf_lo_cw2(F, WF_OP_ADD, vt, r, vscale(F, vt, uv, c), 0);
}

wf_val wf_bi_quat_rotate(wf_fstate *F, const wf_type *qt, wf_val q, const wf_type *vt, wf_val v) {
  return quat_rotate(F, qt, q, vt, v);
}

/* A dtype argument (a type used as a value), default float32. */
static const wf_type *dtype_arg(wf_fstate *F, wf_rv *r, wf_expr *at) {
  if (r->kind == RV_LUA && r->lk == LV_TYPE && r->t->kind == WF_T_FLOAT) return r->t;
  ERR(at, "expected a float type such as weft.float32");
}

static int const_int(wf_fstate *F, wf_rv *r, wf_expr *at) {
  if (r->kind != RV_LIT || !r->isint) ERR(at, "expected a constant integer");
  return (int)r->num;
}

/* ---- print ---- */
static void fmt_append(wf_fstate *F, char **buf, size_t *len, size_t *cap, const char *s) {
  size_t n = strlen(s);
  if (*len + n + 1 > *cap) {
    size_t nc = (*cap + n + 1) * 2;
    char *nb = wf_front_alloc(F->C, nc);
    memcpy(nb, *buf, *len);
    *buf = nb;
    *cap = nc;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = 0;
}

/* Promote a scalar for printf varargs: floats to f64, small ints and bools to i32. */
static wf_val promote(wf_fstate *F, wf_val v, const wf_type **t) {
  const wf_type *vt = *t;
  if (vt->kind == WF_T_FLOAT && vt->bits < 64) {
    const wf_type *d = wf_t_float(F->C->T, 64);
    *t = d;
    return wf_b_op1(B, WF_OP_CAST, d, v);
  }
  if (vt->kind == WF_T_BOOL || (vt->kind == WF_T_INT && vt->bits < 32)) {
    const wf_type *i = vt->kind == WF_T_INT && !vt->is_signed ? wf_t_int(F->C->T, 32, 0) : t_i32(F);
    *t = i;
    if (vt->kind == WF_T_BOOL)
      return wf_b_op3(B, WF_OP_SELECT, i, v, wf_b_consti(B, i, 1), wf_b_consti(B, i, 0));
    return wf_b_op1(B, WF_OP_CAST, i, v);
  }
  return v;
}

/* One printf conversion: the user's flags/width/precision (spec, may be
** ""), and conversion character (0: the default for the type). */
typedef struct pconv {
  const char *spec;
  char conv;
} pconv;

/* Append the conversion for scalar v of type t and its (promoted or
** converted) vararg. A float printed with %d is converted to int64, an
** integer printed with %f to float64, as the format asks; a bool without
** a conversion of the user's prints as true or false, with %d as 1 or 0. */
static void print_scalar(wf_fstate *F, wf_val v, const wf_type *t, pconv pc, char **buf,
                         size_t *len, size_t *cap, wf_val *args, int *na) {
  if (t->kind == WF_T_BOOL && !pc.conv) {
    /* true / false as Lua's print shows them: both backends print a bool
    ** given to %s as its Lua text (rtlib.c, cuda/emit.c) */
    char f[48];
    snprintf(f, sizeof f, "%%%ss", pc.spec);
    args[(*na)++] = v;
    fmt_append(F, buf, len, cap, f);
    return;
  }
  const wf_type *pt = t;
  wf_val pv = promote(F, v, &pt);
  char c = pc.conv;
  char f[48];
  int isf = c && strchr("fFeEgGaA", c) != NULL;
  if (!c) {
    if (pt->kind == WF_T_FLOAT)
      snprintf(f, sizeof f, "%%%s%s", pc.spec, t->bits == 64 ? ".14g" : "g");
    else if (pt->bits == 64)
      snprintf(f, sizeof f, "%%%sll%c", pc.spec, pt->is_signed ? 'd' : 'u');
    else
      snprintf(f, sizeof f, "%%%s%c", pc.spec, pt->is_signed ? 'd' : 'u');
  } else if (isf) {
    if (pt->kind != WF_T_FLOAT) {
      pt = wf_t_float(F->C->T, 64);
      pv = wf_b_op1(B, WF_OP_CAST, pt, pv);
    }
    snprintf(f, sizeof f, "%%%s%c", pc.spec, c);
  } else {
    if (pt->kind == WF_T_FLOAT) {
      pt = wf_t_int(F->C->T, 64, 1);
      pv = wf_b_op1(B, WF_OP_CAST, pt, pv);
    }
    if ((c == 'd' || c == 'i') && !pt->is_signed) c = 'u';
    if (c == 'c')
      snprintf(f, sizeof f, "%%%sc", pc.spec);
    else
      snprintf(f, sizeof f, "%%%s%s%c", pc.spec, pt->bits == 64 ? "ll" : "", c);
  }
  args[(*na)++] = pv;
  fmt_append(F, buf, len, cap, f);
}

/* Append value v of type t (expanding aggregates) to the print. */
static void print_value(wf_fstate *F, wf_val v, const wf_type *t, pconv pc, char **buf, size_t *len,
                        size_t *cap, wf_val *args, int *na, wf_expr *at) {
  if (wf_t_is_scalar(t)) {
    if (*na >= 60) ERR(at, "print: too many values");
    print_scalar(F, v, t, pc, buf, len, cap, args, na);
    return;
  }
  if (t->kind == WF_T_ARRAY || t->kind == WF_T_RNG) ERR(at, "print: cannot print %s", TN(t));
  int n = wf_t_arity(t);
  fmt_append(F, buf, len, cap, "[");
  for (int i = 0; i < n; i++) {
    if (i) fmt_append(F, buf, len, cap, ", ");
    print_value(F, X(F, v, i), comp(F, t, i), pc, buf, len, cap, args, na, at);
  }
  fmt_append(F, buf, len, cap, "]");
}

static int do_print(wf_fstate *F, wf_expr *call) {
  int n = call->nargs;
  wf_rv a[64];
  if (n > 64) ERR(call, "print: too many arguments");
  for (int i = 0; i < n; i++)
    a[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  size_t cap = 64, len = 0;
  char *buf = wf_front_alloc(F->C, cap);
  wf_val args[64];
  int na = 0;
  if (n > 0 && a[0].kind == RV_STR && strchr(a[0].str, '%')) {
    /* printf-style: each conversion takes the next value */
    const char *f = a[0].str;
    int k = 1;
    while (*f) {
      if (*f != '%') {
        char c[2] = {*f++, 0};
        fmt_append(F, &buf, &len, &cap, c);
        continue;
      }
      if (f[1] == '%') {
        fmt_append(F, &buf, &len, &cap, "%%");
        f += 2;
        continue;
      }
      f++;
      /* flags, width and precision are kept; length modifiers are ours */
      char spec[32];
      size_t sl = 0;
      while (*f && strchr("-+ #0123456789.lhzjtL", *f)) {
        if (!strchr("lhzjtL", *f) && sl + 1 < sizeof spec) spec[sl++] = *f;
        f++;
      }
      spec[sl] = 0;
      char user = *f ? *f++ : 0;
      if (user == 's') { /* as print(v) shows v, like Lua's tostring */
        if (sl) ERR(call->args[0], "print: '%%s' takes no flags, width or precision here");
        if (k >= n) ERR(call, "print: the format needs more values than given");
        if (a[k].kind == RV_STR) {
          for (const char *t = a[k].str; *t; t++) {
            char c[3] = {*t, 0, 0};
            if (*t == '%') c[1] = '%';
            fmt_append(F, &buf, &len, &cap, c);
          }
        } else {
          wf_val v = wf_lo_value(F, &a[k], NULL, call->args[k]);
          pconv pc = {"", 0};
          print_value(F, v, wf_vtype(F->fn, v), pc, &buf, &len, &cap, args, &na, call->args[k]);
        }
        k++;
        continue;
      }
      if (!user || !strchr("dixXuofFeEgGaAc", user))
        ERR(call->args[0], "print: unsupported format conversion '%%%c'", user ? user : ' ');
      if (k >= n) ERR(call, "print: the format needs more values than given");
      wf_val v = wf_lo_value(F, &a[k], NULL, call->args[k]);
      pconv pc = {wf_front_strdup(F->C, spec, sl), user};
      print_value(F, v, wf_vtype(F->fn, v), pc, &buf, &len, &cap, args, &na, call->args[k]);
      k++;
    }
    if (k < n) ERR(call->args[k], "print: more values than the format uses");
  } else {
    for (int i = 0; i < n; i++) {
      if (i) fmt_append(F, &buf, &len, &cap, "\t");
      if (a[i].kind == RV_STR) {
        for (const char *s = a[i].str; *s; s++) {
          char c[3] = {*s, 0, 0};
          if (*s == '%') c[1] = '%';
          fmt_append(F, &buf, &len, &cap, c);
        }
        continue;
      }
      wf_val v = wf_lo_value(F, &a[i], NULL, call->args[i]);
      pconv pc = {"", 0};
      print_value(F, v, wf_vtype(F->fn, v), pc, &buf, &len, &cap, args, &na, call->args[i]);
    }
  }
  fmt_append(F, &buf, &len, &cap, "\n");
  wf_inst *in = wf_b_inst(B, WF_OP_PRINT, na, args, 0, NULL, 0);
  in->str = wf_ir_strdup(F->C->mod, buf);
  return 0;
}

/* printf(fmt, ...): Warp's wp.printf, C's format printed exactly (no
** newline added). The format is checked here against the values' types:
** integer conversions take integers or bools, float conversions floats,
** %s only literal strings, and %n never. */
static int do_printf(wf_fstate *F, wf_expr *call) {
  int n = call->nargs;
  wf_rv a[64];
  if (n < 1) ERR(call, "printf expects a format string");
  if (n > 61) ERR(call, "printf: too many arguments");
  for (int i = 0; i < n; i++)
    a[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  if (a[0].kind != RV_STR) ERR(call->args[0], "printf: the format must be a literal string");
  size_t cap = 64, len = 0;
  char *buf = wf_front_alloc(F->C, cap);
  wf_val args[64];
  int na = 0, k = 1;
  for (const char *f = a[0].str; *f;) {
    if (*f != '%') {
      char c[2] = {*f++, 0};
      fmt_append(F, &buf, &len, &cap, c);
      continue;
    }
    if (f[1] == '%') {
      fmt_append(F, &buf, &len, &cap, "%%");
      f += 2;
      continue;
    }
    const char *c0 = f++;
    char spec[32];
    size_t sl = 0;
    while (*f && strchr("-+ #0123456789.*hlLjzt", *f)) {
      if (*f == '*') ERR(call->args[0], "printf: '*' widths and precisions are not supported");
      if (!strchr("hlLjzt", *f) && sl + 1 < sizeof spec) spec[sl++] = *f;
      f++;
    }
    spec[sl] = 0;
    char conv = *f ? *f++ : 0;
    int whole = (int)(f - c0);
    if (conv == 'n') ERR(call->args[0], "printf: '%%n' is not allowed");
    if (!conv || !strchr("dixXuocfFeEgGaAs", conv))
      ERR(call->args[0], "printf: unknown conversion '%.*s'", whole, c0);
    if (k >= n) ERR(call, "printf: the format needs more values than the %d given", n - 1);
    if (conv == 's') {
      if (a[k].kind != RV_STR)
        ERR(call->args[k], "printf: '%.*s' takes a literal string, got a value (use print)", whole,
            c0);
      /* formatted now: the string is known */
      char sf[40];
      snprintf(sf, sizeof sf, "%%%ss", spec);
      int m = snprintf(NULL, 0, sf, a[k].str);
      char *t = wf_front_alloc(F->C, (size_t)(m < 0 ? 0 : m) + 1);
      snprintf(t, (size_t)(m < 0 ? 0 : m) + 1, sf, a[k].str);
      for (; *t; t++) {
        char c[3] = {*t, 0, 0};
        if (*t == '%') c[1] = '%';
        fmt_append(F, &buf, &len, &cap, c);
      }
      k++;
      continue;
    }
    if (a[k].kind == RV_STR)
      ERR(call->args[k], "printf: '%.*s' expects a number, got a string", whole, c0);
    wf_val v = wf_lo_value(F, &a[k], NULL, call->args[k]);
    const wf_type *t = wf_vtype(F->fn, v);
    int isf = strchr("fFeEgGaA", conv) != NULL;
    if (isf ? t->kind != WF_T_FLOAT : t->kind != WF_T_INT && t->kind != WF_T_BOOL)
      ERR(call->args[k], "printf: '%.*s' expects %s, got %s", whole, c0,
          isf ? "a float" : "an integer", TN(t));
    pconv pc = {wf_front_strdup(F->C, spec, sl), conv};
    print_scalar(F, v, t, pc, &buf, &len, &cap, args, &na);
    k++;
  }
  if (k < n) ERR(call->args[k], "printf: more values than the format uses");
  wf_inst *in = wf_b_inst(B, WF_OP_PRINT, na, args, 0, NULL, 0);
  in->str = wf_ir_strdup(F->C->mod, buf);
  return 0;
}

/* ---- random numbers ---- */
static int do_rand(wf_fstate *F, const char *name, wf_expr *call, wf_rv *out) {
  int isf = !strcmp(name, "randf");
  if (call->nargs != 1 && !(isf && call->nargs == 3))
    ERR(call,
        isf ? "randf expects 1 or 3 arguments (state [, lo, hi]), got %d"
            : "randi expects 1 argument (state), got %d",
        call->nargs);
  wf_expr *se = call->args[0];
  int vi = se->kind == E_NAME ? wf_lo_findvar(F, se->name) : -1;
  if (vi < 0) ERR(se, "%s: the state must be a local variable (it is updated in place)", name);
  wf_var *x = &F->vars[vi];
  if (x->v == WF_NOVAL || x->t->kind != WF_T_RNG)
    ERR(se, "%s: '%s' is not a random state (make one with weft.rand_init)", name, se->name);
  wf_rv lo, hi;
  if (call->nargs == 3) {
    lo = wf_lo_expr(F, call->args[1]);
    hi = wf_lo_expr(F, call->args[2]);
  }
  F->b.loc = (wf_loc){call->line, call->col};
  const wf_type *rt[2] = {isf ? t_f32(F) : t_i32(F), wf_t_rng(F->C->T)};
  wf_inst *in = wf_b_inst(B, isf ? WF_OP_RANDF : WF_OP_RANDI, 1, &x->v, 2, rt, 0);
  F->vars[vi].v = in->res[1];
  wf_val r = in->res[0];
  const wf_type *ft = rt[0];
  if (call->nargs == 3) {
    /* the bounds' float type (float32 for literals) is the result's */
    wf_expr *ae[2] = {call->args[1], call->args[2]};
    wf_rv b2[2] = {lo, hi};
    ft = unify(F, name, 2, b2, ae, 1);
    if (ft->kind != WF_T_FLOAT) ERR(call, "randf: the bounds must be floats, got %s", TN(ft));
    wf_val l = val(F, &lo, ft, call->args[1]), h = val(F, &hi, ft, call->args[2]);
    if (ft != rt[0]) r = wf_b_op1(B, WF_OP_CAST, ft, r);
    r = ADD(F, ft, l, MUL(F, ft, SUB(F, ft, h, l), r));
  }
  out[0] = wf_lo_mkval(r, ft);
  return 1;
}

/* The random state variable a call's first argument names (updated in place). */
static int rng_var(wf_fstate *F, const char *name, wf_expr *call) {
  if (call->nargs < 1) ERR(call, "%s expects a random state as its first argument", name);
  wf_expr *se = call->args[0];
  int vi = se->kind == E_NAME ? wf_lo_findvar(F, se->name) : -1;
  if (vi < 0) ERR(se, "%s: the state must be a local variable (it is updated in place)", name);
  wf_var *x = &F->vars[vi];
  if (x->v == WF_NOVAL || x->t->kind != WF_T_RNG)
    ERR(se, "%s: '%s' is not a random state (make one with weft.rand_init)", name, se->name);
  return vi;
}

/* The next draw of state variable vi: randf (float32 in [0, 1)) or the
** raw 32 bits (int32), as Warp's rand_pcg steps. */
static wf_val draw(wf_fstate *F, int vi, int isf) {
  const wf_type *rt[2] = {isf ? t_f32(F) : t_i32(F), wf_t_rng(F->C->T)};
  wf_inst *in = wf_b_inst(B, isf ? WF_OP_RANDF : WF_OP_RANDI, 1, &F->vars[vi].v, 2, rt, 0);
  F->vars[vi].v = in->res[1];
  return in->res[0];
}

/* Warp's randn, randu, randi(state, lo, hi) and sample_* (warp/native/
** rand.h), drawing in Warp's order, in float32 as Warp computes them. */
static int do_rand_more(wf_fstate *F, const char *name, wf_expr *call, wf_rv *out) {
  int vi = rng_var(F, name, call);
  const wf_type *f = t_f32(F), *u32 = wf_t_int(F->C->T, 32, 0);
  const float pi = 3.14159265358979323846f;
#define FC(x) wf_lo_const(F, f, (x))
#define F1(op, x) wf_b_op1(B, op, f, x)
  if (!strcmp(name, "randu") || !strcmp(name, "randi")) {
    int isu = name[4] == 'u';
    const wf_type *it = isu ? u32 : t_i32(F);
    if (call->nargs != 1 && call->nargs != 3)
      ERR(call, "%s expects 1 or 3 arguments (state [, lo, hi]), got %d", name, call->nargs);
    wf_val lo = WF_NOVAL, hi = WF_NOVAL;
    if (call->nargs == 3) {
      wf_rv a[2] = {wf_lo_expr(F, call->args[1]), wf_lo_expr(F, call->args[2])};
      lo = val(F, &a[0], it, call->args[1]);
      hi = val(F, &a[1], it, call->args[2]);
    }
    F->b.loc = (wf_loc){call->line, call->col};
    wf_val r = draw(F, vi, 0);
    if (isu || call->nargs == 3) r = wf_b_op1(B, WF_OP_CAST, u32, r);
    if (call->nargs == 3) {
      /* state % (max - min) + min, the remainder unsigned as in C */
      wf_val span = SUB(F, it, hi, lo);
      if (!isu) span = wf_b_op1(B, WF_OP_CAST, u32, span);
      r = wf_b_op2(B, WF_OP_MOD, u32, r, span);
      if (!isu) r = wf_b_op1(B, WF_OP_CAST, it, r);
      r = ADD(F, it, r, lo);
    }
    out[0] = wf_lo_mkval(r, it);
    return 1;
  }
  if (call->nargs != 1) ERR(call, "%s expects 1 argument (state), got %d", name, call->nargs);
  F->b.loc = (wf_loc){call->line, call->col};
  if (!strcmp(name, "randn")) {
    /* Box-Muller; 5.96e-8 keeps the log's argument above 0 */
    wf_val u1 = draw(F, vi, 1);
    wf_val u2 = draw(F, vi, 1);
    wf_val l = F1(WF_OP_LOG, ADD(F, f, u1, FC(5.96e-8f)));
    wf_val r = F1(WF_OP_SQRT, MUL(F, f, FC(-2.0f), l));
    out[0] = wf_lo_mkval(MUL(F, f, r, F1(WF_OP_COS, MUL(F, f, FC(2.0f * pi), u2))), f);
    return 1;
  }
  const wf_type *v2 = wf_t_vec(F->C->T, 2, f), *v3 = wf_t_vec(F->C->T, 3, f);
  wf_val c[3];
  if (!strcmp(name, "sample_unit_square") || !strcmp(name, "sample_unit_cube")) {
    int n = name[12] == 's' ? 2 : 3;
    for (int i = 0; i < n; i++)
      c[i] = SUB(F, f, draw(F, vi, 1), FC(0.5f));
    const wf_type *vt = n == 2 ? v2 : v3;
    out[0] = wf_lo_mkval(wf_b_agg(B, vt, n, c), vt);
    return 1;
  }
  if (!strcmp(name, "sample_triangle")) {
    wf_val r = F1(WF_OP_SQRT, draw(F, vi, 1));
    c[0] = SUB(F, f, FC(1.0f), r);
    c[1] = MUL(F, f, draw(F, vi, 1), r);
    out[0] = wf_lo_mkval(wf_b_agg(B, v2, 2, c), v2);
    return 1;
  }
  if (!strcmp(name, "sample_unit_ring") || !strcmp(name, "sample_unit_disk")) {
    wf_val r = name[12] == 'd' ? F1(WF_OP_SQRT, draw(F, vi, 1)) : WF_NOVAL;
    wf_val th = MUL(F, f, FC(2.0f * pi), draw(F, vi, 1));
    c[0] = F1(WF_OP_COS, th);
    c[1] = F1(WF_OP_SIN, th);
    if (r != WF_NOVAL) {
      c[0] = MUL(F, f, r, c[0]);
      c[1] = MUL(F, f, r, c[1]);
    }
    out[0] = wf_lo_mkval(wf_b_agg(B, v2, 2, c), v2);
    return 1;
  }
  if (!strncmp(name, "sample_unit_", 12) && strstr(name, "sphere")) {
    /* phi from acos(1 - 2u) (sphere) or acos(1 - u) (hemisphere) */
    int hemi = strstr(name, "hemi") != NULL, surf = strstr(name, "surface") != NULL;
    wf_val u = draw(F, vi, 1);
    wf_val phi = F1(WF_OP_ACOS, SUB(F, f, FC(1.0f), hemi ? u : MUL(F, f, FC(2.0f), u)));
    wf_val th = MUL(F, f, FC(2.0f * pi), draw(F, vi, 1));
    wf_val r = surf ? WF_NOVAL : wf_b_op2(B, WF_OP_POW, f, draw(F, vi, 1), FC(1.0f / 3.0f));
    wf_val sp = F1(WF_OP_SIN, phi);
    c[0] = MUL(F, f, F1(WF_OP_COS, th), sp);
    c[1] = MUL(F, f, F1(WF_OP_SIN, th), sp);
    c[2] = F1(WF_OP_COS, phi);
    if (!surf) {
      c[0] = MUL(F, f, r, c[0]);
      c[1] = MUL(F, f, r, c[1]);
      c[2] = MUL(F, f, r, c[2]);
    }
    out[0] = wf_lo_mkval(wf_b_agg(B, v3, 3, c), v3);
    return 1;
  }
#undef FC
#undef F1
  ERR(call, "the builtin '%s' is not supported in kernels", name);
}

/* An int32 value from an int argument (other int types are converted). */
static wf_val int32_arg(wf_fstate *F, wf_rv *r, wf_expr *at, const char *name) {
  if (wf_lo_isnum(r)) return val(F, r, t_i32(F), at);
  wf_val v = val(F, r, NULL, at);
  const wf_type *t = wf_vtype(F->fn, v);
  if (t->kind != WF_T_INT) ERR(at, "%s expects an integer, got %s", name, TN(t));
  if (t != t_i32(F)) v = wf_b_op1(B, WF_OP_CAST, t_i32(F), v);
  return v;
}

/* ---- atomics ---- */
static int do_atomic(wf_fstate *F, const char *name, wf_op op, wf_expr *call, wf_rv *out) {
  int n = call->nargs, cas = op == WF_OP_ATOMIC_CAS;
  int sub = !strcmp(name, "atomic_sub"); /* atomic_add of -v: the same bits, the same gradient */
  if (cas) {
    if (n < 4) ERR(call, "%s expects (array, index..., compare, value), got %d arguments", name, n);
    n--; /* compare and value count as one below */
  }
  if (n < 3) ERR(call, "%s expects (array, index..., value), got %d arguments", name, n);
  wf_rv a = wf_lo_expr(F, call->args[0]);
  if (a.kind != RV_VAL || a.t->kind != WF_T_ARRAY)
    ERR(call->args[0], "%s expects an array as its first argument", name);
  int nd = a.t->ndim;
  if (n != nd + 2)
    ERR(call, "%s on a %d-d array expects %d index%s and a value, got %d arguments", name, nd, nd,
        nd == 1 ? "" : "es", n);
  wf_val args[6];
  args[0] = a.v;
  for (int i = 0; i < nd; i++)
    args[1 + i] = wf_lo_index_key(F, wf_lo_expr(F, call->args[1 + i]), call->args[1 + i]);
  const wf_type *et = a.t->elem;
  /* numbers, or vectors/matrices/quaternions of numbers (componentwise, as in Warp) */
  const wf_type *est = wf_t_is_scalar(et)                                        ? et
                       : (et->kind != WF_T_STRUCT && et->kind != WF_T_TRANSFORM) ? et->elem
                                                                                 : NULL;
  if (!est || est->kind == WF_T_BOOL || (et->kind == WF_T_MAT && !wf_t_is_scalar(est)))
    ERR(call, "%s needs an array of numbers, vectors or matrices, got %s", name, TN(a.t));
  int bits_only = op == WF_OP_ATOMIC_AND || op == WF_OP_ATOMIC_OR || op == WF_OP_ATOMIC_XOR;
  _Static_assert(WF_OP_ATOMIC_XOR - WF_OP_ATOMIC_EXCH == 4, "exch, cas, and, or, xor in a row");
  if (op >= WF_OP_ATOMIC_EXCH && op <= WF_OP_ATOMIC_XOR) {
    /* Warp's types for these: 32- and 64-bit scalars (integers only for
    ** the bit operations), vectors of them except for atomic_cas */
    if (est->bits < 32 || (bits_only && est->kind != WF_T_INT) || (cas && est != et))
      ERR(call, "%s needs an array of 32- or 64-bit %s%s, got %s", name,
          bits_only ? "integers" : "numbers", cas ? "" : " (or vectors of them)", TN(a.t));
  }
  wf_rv v = wf_lo_expr(F, call->args[n - 1]);
  F->b.loc = (wf_loc){call->line, call->col};
  args[1 + nd] = val(F, &v, et, call->args[n - 1]);
  if (cas) {
    wf_rv nv = wf_lo_expr(F, call->args[n]);
    F->b.loc = (wf_loc){call->line, call->col};
    wf_val pair[2] = {args[1 + nd], val(F, &nv, et, call->args[n])};
    args[1 + nd] = wf_b_agg(B, wf_t_vec(F->C->T, 2, et), 2, pair);
  }
  if (sub) args[1 + nd] = wf_lo_cw1(F, WF_OP_NEG, et, args[1 + nd]);
  wf_inst *in = wf_b_inst(B, op, nd + 2, args, 1, &et, 0);
  out[0] = wf_lo_mkval(in->res[0], et);
  return 1;
}

/* ---- bit operations ---- */
/* LuaJIT's bit library and Warp's names. bit.rshift is LuaJIT's logical
** shift; Warp's rshift is C's >> (arithmetic on signed types). */
typedef struct bit_entry {
  const char *name;
  wf_op op;
  int nargs, logical;
} bit_entry;
static const bit_entry bit_tab[] = {
    {"bit.band", WF_OP_BAND, 2, 0},   {"bit.bor", WF_OP_BOR, 2, 0},
    {"bit.bxor", WF_OP_BXOR, 2, 0},   {"bit.bnot", WF_OP_BNOT, 1, 0},
    {"bit.lshift", WF_OP_SHL, 2, 0},  {"bit.rshift", WF_OP_SHR, 2, 1},
    {"bit.arshift", WF_OP_SHR, 2, 0}, {"bit_and", WF_OP_BAND, 2, 0},
    {"bit_or", WF_OP_BOR, 2, 0},      {"bit_xor", WF_OP_BXOR, 2, 0},
    {"invert", WF_OP_BNOT, 1, 0},     {"lshift", WF_OP_SHL, 2, 0},
    {"rshift", WF_OP_SHR, 2, 0},      {NULL, 0, 0, 0}};

static int do_bit(wf_fstate *F, const char *name, wf_op op, int nargs, int logical, wf_expr *call,
                  wf_rv *out) {
  wf_rv a[8];
  int n = getargs(F, name, call, nargs,
                  nargs == 2 && op != WF_OP_SHL && op != WF_OP_SHR ? 8 : nargs, a);
  const wf_type *t = unify(F, name, op == WF_OP_SHL || op == WF_OP_SHR ? 1 : n, a, call->args, 0);
  if (t->kind != WF_T_INT && !(t->kind == WF_T_BOOL && op != WF_OP_SHL && op != WF_OP_SHR))
    ERR(call, "%s expects integers, got %s", name, TN(t));
  wf_val acc = val(F, &a[0], t, call->args[0]);
  if (nargs == 1) {
    out[0] = wf_lo_mkval(wf_b_op1(B, op, t, acc), t);
    return 1;
  }
  for (int i = 1; i < n; i++) {
    wf_val b = val(F, &a[i], (op == WF_OP_SHL || op == WF_OP_SHR) && a[i].kind == RV_VAL ? NULL : t,
                   call->args[i]);
    if (wf_vtype(F->fn, b) != t) {
      if (wf_vtype(F->fn, b)->kind != WF_T_INT)
        ERR(call->args[i], "%s: shift count must be an integer", name);
      b = wf_b_op1(B, WF_OP_CAST, t, b);
    }
    if (logical && t->is_signed) {
      /* bit.rshift is logical (LuaJIT): shift the unsigned bits */
      const wf_type *ut = wf_t_int(F->C->T, t->bits, 0);
      wf_val ua = wf_b_op1(B, WF_OP_CAST, ut, acc), ub = wf_b_op1(B, WF_OP_CAST, ut, b);
      acc = wf_b_op1(B, WF_OP_CAST, t, wf_b_op2(B, op, ut, ua, ub));
    } else {
      acc = wf_b_op2(B, op, t, acc, b);
    }
  }
  out[0] = wf_lo_mkval(acc, t);
  return 1;
}

/* ---- dispatch ---- */
/* The op of a builtin that is an op of the table (WF_OPF_BUILTIN, named
** like the op), or -1. */
static int table_op(const char *name) {
  for (int op = 0; op < WF_OP__COUNT; op++)
    if ((wf_op_flags(op) & WF_OPF_BUILTIN) && !strcmp(name, wf_opinfo_tab[op].name)) return op;
  return -1;
}

/* core.builtin_ops(): the names of the table's builtins, so the Lua layer
** registers each one (lua/weft/builtins.lua). */
int wf_bi_names(lua_State *L) {
  lua_newtable(L);
  int n = 0;
  for (int op = 0; op < WF_OP__COUNT; op++)
    if (wf_op_flags(op) & WF_OPF_BUILTIN) {
      lua_pushstring(L, wf_opinfo_tab[op].name);
      lua_rawseti(L, -2, ++n);
    }
  for (int r = 0; r < WF_NAT__COUNT; r++) /* native builtins (src/geom/native.h) */
    if (!(wf_native_tab[r].flags & WF_NATF_INTERNAL)) {
      lua_pushstring(L, wf_native_tab[r].name);
      lua_rawseti(L, -2, ++n);
    }
  return 1;
}

int wf_bi_call(wf_fstate *F, const char *name, wf_expr *call, int want, wf_rv *out) {
  wf_types *T = F->C->T;
  int nat = wf_nat_find(name); /* native builtins (src/geom/native.h) */
  if (nat >= 0) return wf_nat_call(F, nat, name, call, out);
  int lm = wf_bi_luamath(F, name, &call, out); /* math.rad, weft.idiv, ... */
  if (lm >= 0) return lm;
  int op = table_op(name);
  if (op == WF_OP_BIT_COUNT) {
    /* Warp's bit_count: the set bits of an integer, as int32 */
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    wf_val v = val(F, &a[0], wf_lo_isnum(&a[0]) ? t_i32(F) : NULL, call->args[0]);
    const wf_type *at = wf_vtype(F->fn, v);
    if (!wf_t_is_int(at)) ERR(call->args[0], "bit_count expects an integer, got %s", TN(at));
    out[0] = wf_lo_mkval(wf_b_op1(B, WF_OP_BIT_COUNT, t_i32(F), v), t_i32(F));
    return 1;
  }
  if (op >= 0) {
    if (wf_opinfo_tab[op].nargs == 1) return unary_math(F, name, (wf_op)op, call, out);
    return binary_math(F, name, (wf_op)op, wf_opinfo_tab[op].ty == WF_TY_FLOAT, call, out);
  }
  if (!strcmp(name, "sign")) return sign_builtin(F, call, out);
  if (!strcmp(name, "print")) return do_print(F, call);
  if (!strcmp(name, "printf")) return do_printf(F, call);
  if (!strcmp(name, "tid")) {
    wf_rv a[1];
    getargs(F, name, call, 0, 0, a);
    int n = want < 1 ? 1 : want > 4 ? 4 : want;
    for (int i = 0; i < n; i++) {
      const wf_type *it = t_i32(F);
      wf_inst *in = wf_b_inst(B, WF_OP_TID, 0, NULL, 1, &it, 0);
      in->imm = i;
      out[i] = wf_lo_mkval(in->res[0], it);
    }
    return n;
  }
  if (!strcmp(name, "clamp")) {
    wf_rv a[3];
    getargs(F, name, call, 3, 3, a);
    const wf_type *t = unify(F, name, 3, a, call->args, 0);
    wf_val x = val(F, &a[0], t, call->args[0]), lo = val(F, &a[1], t, call->args[1]),
           hi = val(F, &a[2], t, call->args[2]);
    out[0] =
        wf_lo_mkval(wf_lo_cw2(F, WF_OP_MIN, t, wf_lo_cw2(F, WF_OP_MAX, t, x, lo, 0), hi, 0), t);
    return 1;
  }
  if (!strcmp(name, "select") || !strcmp(name, "where")) {
    /* Warp's select(cond, if_false, if_true); where(cond, if_true, if_false) */
    wf_rv a[3];
    getargs(F, name, call, 3, 3, a);
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_BOOL)
      ERR(call->args[0], "%s expects a bool condition, got %s", name,
          a[0].kind == RV_VAL ? TN(a[0].t) : "a number");
    int warp = !strcmp(name, "select");
    if (wf_lo_isnum(&a[1]) && wf_lo_isnum(&a[2])) {
      /* two untyped numbers: weak, like `c and x or y` */
      out[0] = wf_lo_weak_select(F, a[0].v, &a[warp ? 2 : 1], &a[warp ? 1 : 2]);
      return 1;
    }
    const wf_type *t = unify(F, name, 2, a + 1, call->args + 1, 0);
    wf_val x = val(F, &a[1], t, call->args[1]), y = val(F, &a[2], t, call->args[2]);
    out[0] = wf_lo_mkval(wf_b_op3(B, WF_OP_SELECT, t, a[0].v, warp ? y : x, warp ? x : y), t);
    return 1;
  }
  if (!strcmp(name, "dot") || !strcmp(name, "cross")) {
    wf_rv a[2];
    getargs(F, name, call, 2, 2, a);
    int isc = name[0] == 'c';
    const wf_type *t = need_vec(F, name, &a[0], call->args[0], isc ? 3 : 0);
    if (a[1].kind != RV_VAL || a[1].t != t)
      ERR(call->args[1], "%s: arguments have different types: %s and %s", name, TN(t),
          a[1].kind == RV_VAL ? TN(a[1].t) : "a number");
    if (isc)
      out[0] = wf_lo_mkval(cross(F, t, a[0].v, a[1].v), t);
    else
      out[0] = wf_lo_mkval(dot(F, t, a[0].v, a[1].v), t->elem);
    return 1;
  }
  if (!strcmp(name, "length") || !strcmp(name, "length_sq") || !strcmp(name, "normalize")) {
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    const wf_type *t = need_vec(F, name, &a[0], call->args[0], 0);
    const wf_type *st = t->elem;
    wf_val d = dot(F, t, a[0].v, a[0].v);
    if (!strcmp(name, "length_sq")) {
      out[0] = wf_lo_mkval(d, st);
      return 1;
    }
    /* imm 1: the derivative is 0 at the zero vector, as Warp's adj_length
    ** and adj_normalize (a self-pair's length must not make NaN) */
    wf_inst *sq = wf_b_inst(B, WF_OP_SQRT, 1, &d, 1, &st, 0);
    sq->imm = WF_SQRT_ZERO_AT_ZERO;
    wf_val l = sq->res[0];
    if (name[0] == 'l') {
      out[0] = wf_lo_mkval(l, st);
      return 1;
    }
    /* normalize: zero stays zero */
    wf_val zero = wf_lo_const(F, st, 0.0);
    wf_val pos = wf_b_op2(B, WF_OP_GT, t_bool(F), l, zero);
    wf_val inv = wf_b_op2(B, WF_OP_DIV, st, wf_lo_const(F, st, 1.0),
                          wf_b_op3(B, WF_OP_SELECT, st, pos, l, wf_lo_const(F, st, 1.0)));
    wf_val r = vscale(F, t, a[0].v, inv);
    /* a zero quaternion gives the identity, as in Warp */
    wf_val z = wf_lo_const(F, t, 0.0);
    if (t->kind == WF_T_QUAT) z = wf_b_insert(B, z, 3, wf_lo_const(F, st, 1.0));
    out[0] = wf_lo_mkval(wf_b_op3(B, WF_OP_SELECT, t, pos, r, z), t);
    return 1;
  }
  if (!strcmp(name, "outer")) {
    wf_rv a[2];
    getargs(F, name, call, 2, 2, a);
    const wf_type *ta = need_vec(F, name, &a[0], call->args[0], 0);
    const wf_type *tb = need_vec(F, name, &a[1], call->args[1], 0);
    if (ta->elem != tb->elem)
      ERR(call, "outer: arguments have different types: %s and %s", TN(ta), TN(tb));
    const wf_type *mt = wf_t_mat(T, wf_t_arity(ta), wf_t_arity(tb), ta->elem);
    wf_val *e = elems(F, mt);
    for (int i = 0; i < mt->rows; i++)
      for (int j = 0; j < mt->cols; j++)
        e[i * mt->cols + j] = MUL(F, ta->elem, X(F, a[0].v, i), X(F, a[1].v, j));
    out[0] = wf_lo_mkval(mat_from(F, mt, e), mt);
    return 1;
  }
  if (!strcmp(name, "transpose") || !strcmp(name, "determinant") || !strcmp(name, "inverse")) {
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    const wf_type *mt = need_mat(F, name, &a[0], call->args[0]);
    wf_val *e = elems(F, mt), *r = elems(F, mt);
    mat_elems(F, mt, a[0].v, e);
    int R = mt->rows, Cc = mt->cols;
    const wf_type *st = mt->elem;
    if (name[0] == 't') {
      const wf_type *tt = wf_t_mat(T, Cc, R, st);
      for (int i = 0; i < R; i++)
        for (int j = 0; j < Cc; j++)
          r[j * R + i] = e[i * Cc + j];
      out[0] = wf_lo_mkval(mat_from(F, tt, r), tt);
      return 1;
    }
    if (R != Cc || R > 4 || st->kind != WF_T_FLOAT)
      ERR(call->args[0], "%s expects a square float matrix of size 2 to 4, got %s", name, TN(mt));
    wf_val det = det_n(F, st, R, e);
    if (name[0] == 'd') {
      out[0] = wf_lo_mkval(det, st);
      return 1;
    }
    /* singular: the zero matrix, as in Warp; 1/0 stays out of the value
    ** and of its gradient */
    wf_val nz = wf_b_op2(B, WF_OP_NE, t_bool(F), det, wf_lo_const(F, st, 0.0));
    wf_val one = wf_lo_const(F, st, 1.0);
    wf_val invdet = wf_b_op2(B, WF_OP_DIV, st, one, wf_b_op3(B, WF_OP_SELECT, st, nz, det, one));
    for (int i = 0; i < R; i++)
      for (int j = 0; j < R; j++) {
        /* cofactor (i, j) goes to inverse[j][i] */
        wf_val minor[9]; /* R <= 4 */
        int k = 0;
        for (int a2 = 0; a2 < R; a2++)
          for (int b2 = 0; b2 < R; b2++)
            if (a2 != i && b2 != j) minor[k++] = e[a2 * R + b2];
        wf_val c = det_n(F, st, R - 1, minor);
        if ((i + j) & 1) c = wf_b_op1(B, WF_OP_NEG, st, c);
        r[j * R + i] = MUL(F, st, c, invdet);
      }
    wf_val inv = mat_from(F, mt, r);
    out[0] = wf_lo_mkval(wf_b_op3(B, WF_OP_SELECT, mt, nz, inv, wf_lo_const(F, mt, 0.0)), mt);
    return 1;
  }
  if (!strcmp(name, "identity")) {
    wf_rv a[2];
    int n = getargs(F, name, call, 1, 2, a);
    int k = const_int(F, &a[0], call->args[0]);
    if (k < 2 || k > 16) ERR(call->args[0], "identity: size must be 2 to 16");
    const wf_type *st = n > 1 ? dtype_arg(F, &a[1], call->args[1]) : t_f32(F);
    const wf_type *mt = wf_t_mat(T, k, k, st);
    wf_val *e = elems(F, mt);
    wf_val z = wf_lo_const(F, st, 0), o = wf_lo_const(F, st, 1);
    for (int i = 0; i < k * k; i++)
      e[i] = (i / k == i % k) ? o : z;
    out[0] = wf_lo_mkval(mat_from(F, mt, e), mt);
    return 1;
  }
  if (!strcmp(name, "matrix_from_rows") || !strcmp(name, "matrix_from_cols")) {
    /* Warp's matrix_from_rows(r0, r1, ...) and matrix_from_cols(c0, c1, ...) */
    wf_rv a[16];
    int n = getargs(F, name, call, 1, 16, a);
    const wf_type *vt = need_vec(F, name, &a[0], call->args[0], 0);
    if (vt->kind != WF_T_VEC) ERR(call->args[0], "%s expects vectors, got %s", name, TN(vt));
    for (int i = 1; i < n; i++)
      if (a[i].kind != RV_VAL || a[i].t != vt)
        ERR(call->args[i], "%s: the vectors must have one type: %s and %s", name, TN(vt),
            a[i].kind == RV_VAL ? TN(a[i].t) : "a number");
    int k = wf_t_arity(vt), rows = name[12] == 'r';
    const wf_type *mt = rows ? wf_t_mat(T, n, k, vt->elem) : wf_t_mat(T, k, n, vt->elem);
    wf_val *e = elems(F, mt);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < k; j++)
        e[rows ? i * k + j : j * n + i] = X(F, a[i].v, j);
    out[0] = wf_lo_mkval(mat_from(F, mt, e), mt);
    return 1;
  }
  if (!strcmp(name, "diag")) {
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    const wf_type *vt = need_vec(F, name, &a[0], call->args[0], 0);
    int k = wf_t_arity(vt);
    const wf_type *mt = wf_t_mat(T, k, k, vt->elem);
    wf_val *e = elems(F, mt);
    wf_val z = wf_lo_const(F, vt->elem, 0);
    for (int i = 0; i < k * k; i++)
      e[i] = (i / k == i % k) ? X(F, a[0].v, i / k) : z;
    out[0] = wf_lo_mkval(mat_from(F, mt, e), mt);
    return 1;
  }
  if (!strcmp(name, "quat_identity") || !strcmp(name, "transform_identity")) {
    wf_rv a[1];
    int n = getargs(F, name, call, 0, 1, a);
    const wf_type *st = n ? dtype_arg(F, &a[0], call->args[0]) : t_f32(F);
    const wf_type *qt = wf_t_quat(T, st);
    wf_val z = wf_lo_const(F, st, 0), o = wf_lo_const(F, st, 1);
    wf_val qc[4] = {z, z, z, o};
    wf_val q = wf_b_agg(B, qt, 4, qc);
    if (name[0] == 'q') {
      out[0] = wf_lo_mkval(q, qt);
      return 1;
    }
    const wf_type *tt = wf_t_transform(T, st);
    wf_val pc[3] = {z, z, z};
    wf_val tc[2] = {wf_b_agg(B, wf_t_vec(T, 3, st), 3, pc), q};
    out[0] = wf_lo_mkval(wf_b_agg(B, tt, 2, tc), tt);
    return 1;
  }
  if (!strcmp(name, "quat_from_axis_angle")) {
    wf_rv a[2];
    getargs(F, name, call, 2, 2, a);
    const wf_type *vt = need_vec(F, name, &a[0], call->args[0], 3);
    const wf_type *st = vt->elem;
    wf_val ang = val(F, &a[1], st, call->args[1]);
    wf_val half = MUL(F, st, ang, wf_lo_const(F, st, 0.5));
    wf_val s = wf_b_op1(B, WF_OP_SIN, st, half), c = wf_b_op1(B, WF_OP_COS, st, half);
    wf_val qc[4] = {MUL(F, st, X(F, a[0].v, 0), s), MUL(F, st, X(F, a[0].v, 1), s),
                    MUL(F, st, X(F, a[0].v, 2), s), c};
    const wf_type *qt = wf_t_quat(T, st);
    out[0] = wf_lo_mkval(wf_b_agg(B, qt, 4, qc), qt);
    return 1;
  }
  if (!strcmp(name, "quat_inverse")) {
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_QUAT)
      ERR(call->args[0], "quat_inverse expects a quaternion");
    const wf_type *qt = a[0].t, *st = qt->elem;
    wf_val qc[4] = {wf_b_op1(B, WF_OP_NEG, st, X(F, a[0].v, 0)),
                    wf_b_op1(B, WF_OP_NEG, st, X(F, a[0].v, 1)),
                    wf_b_op1(B, WF_OP_NEG, st, X(F, a[0].v, 2)), X(F, a[0].v, 3)};
    out[0] = wf_lo_mkval(wf_b_agg(B, qt, 4, qc), qt);
    return 1;
  }
  if (!strcmp(name, "quat_rotate") || !strcmp(name, "quat_rotate_inv")) {
    wf_rv a[2];
    getargs(F, name, call, 2, 2, a);
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_QUAT)
      ERR(call->args[0], "%s expects a quaternion", name);
    const wf_type *qt = a[0].t;
    const wf_type *vt = need_vec(F, name, &a[1], call->args[1], 3);
    if (vt->elem != qt->elem) ERR(call, "%s: %s and %s differ in precision", name, TN(qt), TN(vt));
    wf_val q = a[0].v;
    if (strlen(name) > 11) {
      const wf_type *st = qt->elem;
      wf_val qc[4] = {wf_b_op1(B, WF_OP_NEG, st, X(F, q, 0)),
                      wf_b_op1(B, WF_OP_NEG, st, X(F, q, 1)),
                      wf_b_op1(B, WF_OP_NEG, st, X(F, q, 2)), X(F, q, 3)};
      q = wf_b_agg(B, qt, 4, qc);
    }
    out[0] = wf_lo_mkval(quat_rotate(F, qt, q, vt, a[1].v), vt);
    return 1;
  }
  if (!strcmp(name, "transform_point") || !strcmp(name, "transform_vector")) {
    wf_rv a[2];
    getargs(F, name, call, 2, 2, a);
    if (a[0].kind == RV_VAL && a[0].t->kind == WF_T_MAT && a[0].t->rows == 4 && a[0].t->cols == 4) {
      /* a 4x4 matrix: (M (v, 1)).xyz for a point, (M (v, 0)).xyz for a vector */
      const wf_type *mt = a[0].t, *st = mt->elem;
      const wf_type *vt = need_vec(F, name, &a[1], call->args[1], 3);
      if (vt->elem != st) ERR(call, "%s: %s and %s differ in precision", name, TN(mt), TN(vt));
      int pt = !strcmp(name, "transform_point");
      wf_val r[3];
      for (int i = 0; i < 3; i++) {
        wf_val row = X(F, a[0].v, i);
        wf_val acc = MUL(F, st, X(F, row, 0), X(F, a[1].v, 0));
        for (int j = 1; j < 3; j++)
          acc = ADD(F, st, acc, MUL(F, st, X(F, row, j), X(F, a[1].v, j)));
        r[i] = pt ? ADD(F, st, acc, X(F, row, 3)) : acc;
      }
      out[0] = wf_lo_mkval(wf_b_agg(B, vt, 3, r), vt);
      return 1;
    }
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_TRANSFORM)
      ERR(call->args[0], "%s expects a transform or a mat44", name);
    const wf_type *tt = a[0].t;
    const wf_type *vt = need_vec(F, name, &a[1], call->args[1], 3);
    if (vt->elem != tt->elem) ERR(call, "%s: %s and %s differ in precision", name, TN(tt), TN(vt));
    wf_val q = X(F, a[0].v, 1);
    wf_val r = quat_rotate(F, comp(F, tt, 1), q, vt, a[1].v);
    if (!strcmp(name, "transform_point")) r = wf_lo_cw2(F, WF_OP_ADD, vt, r, X(F, a[0].v, 0), 0);
    out[0] = wf_lo_mkval(r, vt);
    return 1;
  }
  if (!strcmp(name, "transform_get_translation") || !strcmp(name, "transform_get_rotation")) {
    wf_rv a[1];
    getargs(F, name, call, 1, 1, a);
    if (a[0].kind != RV_VAL || a[0].t->kind != WF_T_TRANSFORM)
      ERR(call->args[0], "%s expects a transform", name);
    int i = strstr(name, "rotation") ? 1 : 0;
    out[0] = wf_lo_mkval(X(F, a[0].v, i), comp(F, a[0].t, i));
    return 1;
  }
  if (!strcmp(name, "atomic_add")) return do_atomic(F, name, WF_OP_ATOMIC_ADD, call, out);
  if (!strcmp(name, "atomic_min")) return do_atomic(F, name, WF_OP_ATOMIC_MIN, call, out);
  if (!strcmp(name, "atomic_max")) return do_atomic(F, name, WF_OP_ATOMIC_MAX, call, out);
  if (!strcmp(name, "atomic_sub")) return do_atomic(F, name, WF_OP_ATOMIC_ADD, call, out);
  if (!strcmp(name, "atomic_exch")) return do_atomic(F, name, WF_OP_ATOMIC_EXCH, call, out);
  if (!strcmp(name, "atomic_cas")) return do_atomic(F, name, WF_OP_ATOMIC_CAS, call, out);
  if (!strcmp(name, "atomic_and")) return do_atomic(F, name, WF_OP_ATOMIC_AND, call, out);
  if (!strcmp(name, "atomic_or")) return do_atomic(F, name, WF_OP_ATOMIC_OR, call, out);
  if (!strcmp(name, "atomic_xor")) return do_atomic(F, name, WF_OP_ATOMIC_XOR, call, out);
  if (!strcmp(name, "rand_init")) {
    wf_rv a[2];
    int n = getargs(F, name, call, 1, 2, a);
    wf_val args[2];
    args[0] = int32_arg(F, &a[0], call->args[0], name);
    args[1] = n > 1 ? int32_arg(F, &a[1], call->args[1], name) : wf_b_consti(B, t_i32(F), 0);
    if (n == 1) {
      /* Warp's rand_init(seed) is pcg(seed), not pcg(seed + pcg(0)) as
      ** the two-argument form with offset 0: RNG_INIT(seed - pcg(0), 0) */
      uint32_t b = 2891336453u, c = ((b >> ((b >> 28u) + 4u)) ^ b) * 277803737u;
      int64_t pcg0 = (int32_t)((c >> 22u) ^ c);
      args[0] = SUB(F, t_i32(F), args[0], wf_b_consti(B, t_i32(F), pcg0));
    }
    const wf_type *rt = wf_t_rng(T);
    wf_inst *in = wf_b_inst(B, WF_OP_RNG_INIT, 2, args, 1, &rt, 0);
    out[0] = wf_lo_mkval(in->res[0], rt);
    return 1;
  }
  if (!strcmp(name, "randi") && call->nargs == 3) return do_rand_more(F, name, call, out);
  if (!strcmp(name, "randf") || !strcmp(name, "randi")) return do_rand(F, name, call, out);
  if (!strcmp(name, "randn") || !strcmp(name, "randu") || !strncmp(name, "sample_", 7))
    return do_rand_more(F, name, call, out);
  for (const bit_entry *e = bit_tab; e->name; e++)
    if (!strcmp(name, e->name)) return do_bit(F, name, e->op, e->nargs, e->logical, call, out);
  ERR(call, "the builtin '%s' is not supported in kernels", name);
}

/* ---- constructors and casts ---- */
static wf_val cast_scalar(wf_fstate *F, const wf_type *to, wf_val v) {
  const wf_type *from = wf_vtype(F->fn, v);
  if (from == to) return v;
  if (to->kind == WF_T_BOOL) return wf_b_op2(B, WF_OP_NE, to, v, wf_lo_const(F, from, 0));
  if (from->kind == WF_T_BOOL)
    return wf_b_op3(B, WF_OP_SELECT, to, v, wf_lo_const(F, to, 1), wf_lo_const(F, to, 0));
  return wf_b_op1(B, WF_OP_CAST, to, v);
}

/* Convert an aggregate to the same shape with another scalar type. */
static wf_val cast_agg(wf_fstate *F, const wf_type *to, wf_val v) {
  if (wf_t_is_scalar(to)) return cast_scalar(F, to, v);
  int n = wf_t_arity(to);
  wf_val c[WF_MAX_COMP];
  for (int i = 0; i < n; i++)
    c[i] = cast_agg(F, comp(F, to, i), X(F, v, i));
  return wf_b_agg(B, to, n, c);
}

static int same_shape(const wf_type *a, const wf_type *b) {
  return a->kind == b->kind && a->rows == b->rows && a->cols == b->cols;
}

int wf_bi_construct(wf_fstate *F, const wf_type *t, wf_expr *call, wf_rv *out) {
  const char *tn = TN(t);
  if (t->kind == WF_T_ARRAY) ERR(call, "arrays cannot be created inside kernels");
  if (t->kind == WF_T_STRUCT) {
    /* a struct may have any number of fields */
    wf_val *c = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(t->nfields ? t->nfields : 1));
    for (int i = 0; i < t->nfields; i++)
      c[i] = WF_NOVAL;
    if (call->nargs > 1 || (call->nargs == 1 && call->args[0]->kind != E_TABLE))
      ERR(call, "%s is built from a table of fields: %s{ field = value, ... }", tn, tn);
    if (call->nargs == 1) {
      wf_expr *tb = call->args[0];
      for (int k = 0; k < tb->nfields; k++) {
        wf_tfield *f = &tb->fields[k];
        if (!f->name) ERR(f->value, "%s{...}: fields must be given by name", tn);
        int fi = -1;
        for (int i = 0; i < t->nfields; i++)
          if (!strcmp(t->fields[i].name, f->name)) fi = i;
        if (fi < 0) ERR(f->value, "%s has no field '%s'", tn, f->name);
        wf_rv r = wf_lo_expr(F, f->value);
        c[fi] = val(F, &r, t->fields[fi].type, f->value);
      }
    }
    F->b.loc = (wf_loc){call->line, call->col};
    for (int i = 0; i < t->nfields; i++)
      if (c[i] == WF_NOVAL) {
        const wf_type *ft = t->fields[i].type;
        c[i] = wf_b_inst(B, WF_OP_UNDEF, 0, NULL, 1, &ft, 0)->res[0];
      }
    out[0] = wf_lo_mkval(wf_b_agg(B, t, t->nfields, c), t);
    return 1;
  }
  int n = call->nargs;
  wf_rv a[64];
  if (n > 64) ERR(call, "%s: too many arguments (at most 64)", tn);
  for (int i = 0; i < n; i++)
    a[i] = wf_lo_expr(F, call->args[i]);
  F->b.loc = (wf_loc){call->line, call->col};
  if (wf_t_is_scalar(t)) {
    if (n == 0) {
      out[0] = wf_lo_mkval(wf_lo_const(F, t, 0), t);
      return 1;
    }
    if (n != 1) ERR(call, "%s expects 1 argument, got %d", tn, n);
    if (wf_lo_isnum(&a[0])) {
      /* a literal (or `c and 1 or 0`) converted directly to t */
      out[0] = wf_lo_mkval(wf_lo_num_cast(F, &a[0], t, call->args[0]), t);
      return 1;
    }
    wf_val v = val(F, &a[0], NULL, call->args[0]);
    const wf_type *vt = wf_vtype(F->fn, v);
    if (vt->kind == WF_T_RNG && wf_t_is_int(t) && t->bits == 32) {
      /* a random state's 32 bits (Warp's states are uint32 values) */
      out[0] = wf_lo_mkval(wf_b_op1(B, WF_OP_CAST, t, v), t);
      return 1;
    }
    if (!wf_t_is_scalar(vt)) ERR(call->args[0], "cannot convert %s to %s", TN(vt), tn);
    out[0] = wf_lo_mkval(cast_scalar(F, t, v), t);
    return 1;
  }
  const wf_type *st = scalar_of(t);
  int ncomp = t->ncomp;
  if (n == 0) {
    wf_val z;
    if (t->kind == WF_T_TRANSFORM) {
      /* identity rotation (weft.quat() is zero, as Warp's; the identity
      ** is weft.quat_identity()) */
      wf_val zs = wf_lo_const(F, st, 0), o = wf_lo_const(F, st, 1);
      wf_val qc[4] = {zs, zs, zs, o};
      const wf_type *qt = wf_t_quat(F->C->T, st);
      wf_val q = wf_b_agg(B, qt, 4, qc);
      if (t->kind == WF_T_QUAT)
        z = q;
      else {
        wf_val pc[3] = {zs, zs, zs};
        wf_val tc[2] = {wf_b_agg(B, comp(F, t, 0), 3, pc), q};
        z = wf_b_agg(B, t, 2, tc);
      }
    } else {
      z = wf_lo_const(F, t, 0);
    }
    out[0] = wf_lo_mkval(z, t);
    return 1;
  }
  if (n == 1 && a[0].kind == RV_VAL && !wf_t_is_scalar(a[0].t)) {
    if (a[0].t == t) {
      out[0] = a[0];
      return 1;
    }
    if (same_shape(a[0].t, t)) {
      out[0] = wf_lo_mkval(cast_agg(F, t, a[0].v), t);
      return 1;
    }
    ERR(call->args[0], "cannot convert %s to %s", TN(a[0].t), tn);
  }
  if (n == 1 && (t->kind == WF_T_VEC || t->kind == WF_T_MAT)) {
    /* broadcast a scalar */
    wf_val s = val(F, &a[0], st, call->args[0]);
    (void)s;
    int ar = wf_t_arity(t);
    wf_val c[WF_MAX_COMP];
    if (t->kind == WF_T_VEC) {
      for (int i = 0; i < ar; i++)
        c[i] = s;
    } else {
      const wf_type *rt = comp(F, t, 0);
      wf_val rc[WF_MAX_COMP];
      for (int j = 0; j < t->cols; j++)
        rc[j] = s;
      wf_val row = wf_b_agg(B, rt, t->cols, rc);
      for (int i = 0; i < ar; i++)
        c[i] = row;
    }
    out[0] = wf_lo_mkval(wf_b_agg(B, t, ar, c), t);
    return 1;
  }
  if (n == 2 && a[0].kind == RV_VAL && a[0].t->kind == WF_T_VEC && wf_t_arity(a[0].t) == 3 &&
      ((t->kind == WF_T_VEC && ncomp == 6) || t->kind == WF_T_QUAT)) {
    /* spatial_vector(w, v) from two vec3, quat(v, w) from a vec3 and a scalar */
    const wf_type *v3 = wf_t_vec(F->C->T, 3, st);
    wf_val u = val(F, &a[0], v3, call->args[0]);
    wf_val c[6] = {X(F, u, 0), X(F, u, 1), X(F, u, 2)};
    if (t->kind == WF_T_QUAT) {
      c[3] = val(F, &a[1], st, call->args[1]);
    } else {
      wf_val w = val(F, &a[1], v3, call->args[1]);
      for (int i = 0; i < 3; i++)
        c[3 + i] = X(F, w, i);
    }
    out[0] = wf_lo_mkval(wf_b_agg(B, t, ncomp, c), t);
    return 1;
  }
  if (t->kind == WF_T_TRANSFORM) {
    if (n != 2) ERR(call, "%s expects (p, q) or no arguments, got %d arguments", tn, n);
    wf_val p = val(F, &a[0], comp(F, t, 0), call->args[0]);
    wf_val q = val(F, &a[1], comp(F, t, 1), call->args[1]);
    wf_val tc[2] = {p, q};
    out[0] = wf_lo_mkval(wf_b_agg(B, t, 2, tc), t);
    return 1;
  }
  if (t->kind == WF_T_MAT && n == t->rows && a[0].kind == RV_VAL && a[0].t->kind == WF_T_VEC) {
    const wf_type *rt = comp(F, t, 0);
    wf_val rows[WF_MAX_COMP];
    for (int i = 0; i < n; i++)
      rows[i] = val(F, &a[i], rt, call->args[i]);
    out[0] = wf_lo_mkval(wf_b_agg(B, t, n, rows), t);
    return 1;
  }
  if (n != ncomp) ERR(call, "%s expects %d numbers (or none), got %d arguments", tn, ncomp, n);
  wf_val e[64]; /* n <= 64 arguments */
  for (int i = 0; i < n; i++) {
    if (a[i].kind == RV_VAL && a[i].t != st)
      ERR(call->args[i], "%s: argument %d is %s, expected %s", tn, i + 1, TN(a[i].t), TN(st));
    e[i] = val(F, &a[i], st, call->args[i]);
  }
  if (t->kind == WF_T_MAT)
    out[0] = wf_lo_mkval(mat_from(F, t, e), t);
  else
    out[0] = wf_lo_mkval(wf_b_agg(B, t, n, e), t);
  return 1;
}
