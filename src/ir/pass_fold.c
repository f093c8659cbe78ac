/*
** pass_fold.c -- constant folding and exact algebraic identities.
**
** Folded:
**  - scalar ops whose operands are all constants: integer arithmetic with
**    wrap-around at the type's width (division by zero, INT_MIN / -1 and
**    out-of-range shifts are left to run time), float + - * / neg abs min
**    max, the functions with a fold column in ir.h (sqrt floor ceil round
**    trunc rint) and comparisons (computed in double and rounded once to
**    f32, which is exact for these ops), bool logic, casts
**    between ints and floats (not to bool; float -> int truncates and
**    saturates, NaN -> 0, as both backends convert at run time);
**    transcendental functions are left alone (libm results differ by target).
**    f16 results are never folded.
**  - identities that hold for every input, NaN and -0 included:
**    ints: x+0, x-0, x*1, x/1, x|0, x^0, x<<0, x>>0 -> x; x-x, x*0, x^x -> 0;
**    floats: x*1, x/1, x-0.0, x+(-0.0) -> x (x+0.0 and x*0 are NOT folded);
**    both: neg(neg x) -> x, not(not x) -> x, select(c,x,x) -> x,
**    select(true/false, a, b), x&x, x|x -> x, band(x,true), bor(x,false).
**  - extract(agg(...), i) -> component i; extract(insert(a, v, i), i) -> v,
**    and with another index -> extract(a, j).
**  - if with a constant condition -> the taken block, spliced in place.
** Folding turns the instruction itself into a CONST (its value keeps its
** number), so uses need no rewriting. An instruction replaced by another
** value is recorded in a forwarding map, applied to each instruction's
** operands as the walk reaches it (definitions come before uses) and to
** the whole function after each round: rewriting every use at once made
** the pass quadratic (a 32x32 constant matrix product took 9 s).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "ir/ir.h"

typedef struct fstate {
  wf_func *fn;
  int changed;
  wf_val *fwd; /* fwd[v]: the value that replaces v (v itself if none); NULL: no map */
  int nfwd;
} fstate;

/* The value v stands for now (following the forwarding map). */
static wf_val resolve(fstate *F, wf_val v) {
  if (!F->fwd || v < 0 || v >= F->nfwd) return v;
  wf_val r = v;
  while (F->fwd[r] != r)
    r = F->fwd[r];
  while (F->fwd[v] != r) { /* shorten the chain for the next lookup */
    wf_val n = F->fwd[v];
    F->fwd[v] = r;
    v = n;
  }
  return r;
}

static void resolve_args(fstate *F, wf_inst *in) {
  for (int k = 0; k < in->nargs; k++)
    in->args[k] = resolve(F, in->args[k]);
}

/* Uses of `from` become uses of `to` (through the map when there is one). */
static void replace(fstate *F, wf_val from, wf_val to) {
  if (F->fwd && from >= 0 && from < F->nfwd)
    F->fwd[from] = resolve(F, to);
  else
    wf_replace_uses(F->fn, from, to);
}

/* Applies the forwarding map to every operand in bl. */
static void resolve_block(fstate *F, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    resolve_args(F, in);
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) resolve_block(F, in->blocks[k]);
  }
}

static wf_inst *def(fstate *F, wf_val v) {
  return F->fn->vals[v].def;
}
static const wf_type *ty(fstate *F, wf_val v) {
  return F->fn->vals[v].type;
}

/* The CONST defining v, or NULL. */
static wf_inst *cst(fstate *F, wf_val v) {
  wf_inst *d = def(F, v);
  return d && d->op == WF_OP_CONST ? d : NULL;
}

/* Wraps an integer to the type's width: sign- or zero-extends. */
static int64_t wrap(const wf_type *t, uint64_t v) {
  if (t->kind == WF_T_BOOL) return v != 0;
  int b = t->bits;
  if (b >= 64) return (int64_t)v;
  uint64_t mask = (UINT64_C(1) << b) - 1;
  v &= mask;
  if (t->is_signed && (v >> (b - 1)) & 1) v |= ~mask;
  return (int64_t)v;
}

/* Rounds a double to the precision of float type t. */
static double fround(const wf_type *t, double d) {
  return t->bits == 32 ? (double)(float)d : d;
}

static int is_const_int(fstate *F, wf_val v, int64_t k) {
  wf_inst *c = cst(F, v);
  return c && !wf_t_is_float(ty(F, v)) && c->imm == k;
}

/* Constant float equal to d, with the same sign for zeros. */
static int is_const_float(fstate *F, wf_val v, double d) {
  wf_inst *c = cst(F, v);
  return c && wf_t_is_float(ty(F, v)) && c->fimm == d && signbit(c->fimm) == signbit(d);
}

/* Turns `in` into CONST (same result value). */
static void make_const(fstate *F, wf_inst *in, int64_t imm, double fimm) {
  in->op = WF_OP_CONST;
  in->nargs = 0;
  in->imm = imm;
  in->fimm = fimm;
  F->changed = 1;
}

/* Replaces the single result of `in` by v and removes `in`. */
static void forward(fstate *F, wf_inst *in, wf_val v) {
  replace(F, in->res[0], v);
  wf_inst_unlink(in);
  F->changed = 1;
}

static int cmp_result(wf_op op, int lt, int eq, int gt) {
  switch (op) {
  case WF_OP_EQ: return eq;
  case WF_OP_NE: return !eq;
  case WF_OP_LT: return lt;
  case WF_OP_LE: return lt || eq;
  case WF_OP_GT: return gt;
  default: return gt || eq;
  }
}

/* Folds an int/bool op over constants a (and b); 0 when not foldable. */
static int eval_int(wf_op op, const wf_type *t, int64_t a, int64_t b, int64_t *out) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int sg = t->kind == WF_T_INT && t->is_signed;
  int64_t minv = sg ? wrap(t, UINT64_C(1) << (t->bits - 1)) : 0;
  switch (op) {
  case WF_OP_ADD: *out = wrap(t, ua + ub); return 1;
  case WF_OP_SUB: *out = wrap(t, ua - ub); return 1;
  case WF_OP_MUL: *out = wrap(t, ua * ub); return 1;
  case WF_OP_NEG: *out = wrap(t, 0 - ua); return 1;
  case WF_OP_DIV:
  case WF_OP_MOD:
  case WF_OP_FLOORDIV: {
    if (b == 0 || (sg && a == minv && b == -1)) return 0;
    if (!sg) {
      *out = wrap(t, op == WF_OP_DIV || op == WF_OP_FLOORDIV ? ua / ub : ua % ub);
      return 1;
    }
    int64_t q = a / b, r = a % b;
    if (op == WF_OP_DIV)
      *out = q;
    else if (op == WF_OP_FLOORDIV)
      *out = (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
    else
      *out = (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    return 1;
  }
  case WF_OP_MIN: *out = (sg ? a < b : ua < ub) ? a : b; return 1;
  case WF_OP_MAX: *out = (sg ? a > b : ua > ub) ? a : b; return 1;
  case WF_OP_ABS:
    if (sg && a == minv) return 0;
    *out = sg && a < 0 ? -a : a;
    return 1;
  case WF_OP_NOT: *out = !a; return 1;
  case WF_OP_BAND: *out = a & b; return 1;
  case WF_OP_BOR: *out = a | b; return 1;
  case WF_OP_BXOR: *out = a ^ b; return 1;
  case WF_OP_BNOT: *out = t->kind == WF_T_BOOL ? !a : wrap(t, ~ua); return 1;
  case WF_OP_SHL:
  case WF_OP_SHR:
    if (b < 0 || b >= t->bits) return 0;
    if (op == WF_OP_SHL)
      *out = wrap(t, ua << b);
    else if (sg)
      *out = a < 0 ? ~(~a >> b) : a >> b;
    else
      *out = wrap(t, ua >> b);
    return 1;
  default: return 0;
  }
}

/* Folds a float op (result type t) over constants; 0 when not foldable. */
static int eval_float(wf_op op, const wf_type *t, double a, double b, double *out) {
  double r;
  switch (op) {
  case WF_OP_ADD: r = a + b; break;
  case WF_OP_SUB: r = a - b; break;
  case WF_OP_MUL: r = a * b; break;
  case WF_OP_DIV: r = a / b; break;
  case WF_OP_NEG: r = -a; break;
  case WF_OP_ABS: r = fabs(a); break;
  case WF_OP_MIN:
  case WF_OP_MAX:
    if (isnan(a) || isnan(b) || (a == 0 && b == 0)) return 0; /* target-defined */
    r = op == WF_OP_MIN ? (a < b ? a : b) : (a > b ? a : b);
    break;
  default:
    /* a scalar float function computed exactly (its fold column) */
    if (!wf_opinfo_tab[op].fold || wf_opinfo_tab[op].nargs != 1) return 0;
    r = wf_opinfo_tab[op].fold(a);
    break;
  }
  *out = fround(t, r);
  return 1;
}

/* CAST of a constant: int <-> float, int -> int; 0 when not foldable. */
static int fold_cast(fstate *F, wf_inst *in, wf_inst *c) {
  const wf_type *to = ty(F, in->res[0]), *from = ty(F, in->args[0]);
  if (to->kind == WF_T_BOOL || (to->kind == WF_T_FLOAT && to->bits == 16)) return 0;
  if (from->kind == WF_T_FLOAT && from->bits == 16) return 0;
  if (to->kind == WF_T_FLOAT) {
    double d;
    if (from->kind == WF_T_FLOAT)
      d = fround(from, c->fimm);
    else if (from->kind == WF_T_INT && !from->is_signed && from->bits == 64)
      d = (double)(uint64_t)c->imm;
    else
      d = (double)c->imm;
    make_const(F, in, 0, fround(to, d));
    return 1;
  }
  if (from->kind == WF_T_FLOAT) {
    /* truncation, saturated at the type's limits and NaN -> 0, as both
    ** backends convert at run time (llvm.fptosi.sat / fptoui.sat and the
    ** CUDA prelude), so folding never changes a result */
    double d = trunc(fround(from, c->fimm));
    double lo = to->is_signed ? -ldexp(1, to->bits - 1) : 0;
    double hi = to->is_signed ? ldexp(1, to->bits - 1) : ldexp(1, to->bits);
    uint64_t max = to->is_signed    ? (UINT64_C(1) << (to->bits - 1)) - 1
                   : to->bits == 64 ? UINT64_MAX
                                    : (UINT64_C(1) << to->bits) - 1;
    int64_t k;
    if (d != d)
      k = 0;
    else if (d <= lo)
      k = (int64_t)lo;
    else if (d >= hi)
      k = (int64_t)max;
    else
      k = to->is_signed || to->bits < 64 ? (int64_t)d : (int64_t)(uint64_t)d;
    make_const(F, in, k, 0);
    return 1;
  }
  make_const(F, in, wrap(to, (uint64_t)c->imm), 0);
  return 1;
}

/* Ops over constants. */
static int fold_consts(fstate *F, wf_inst *in) {
  if (!(wf_op_flags(in->op) & WF_OPF_PURE) || in->nres != 1 || in->nargs < 1 || in->nargs > 2)
    return 0;
  wf_inst *a = cst(F, in->args[0]), *b = in->nargs == 2 ? cst(F, in->args[1]) : NULL;
  if (!a || (in->nargs == 2 && !b)) return 0;
  const wf_type *at = ty(F, in->args[0]), *rt = ty(F, in->res[0]);
  if (in->op == WF_OP_CAST) return fold_cast(F, in, a);
  if (in->op == WF_OP_BIT_COUNT && wf_t_is_int(at)) {
    uint64_t bits = (uint64_t)a->imm;
    if (at->bits < 64) bits &= (UINT64_C(1) << at->bits) - 1;
    make_const(F, in, __builtin_popcountll(bits), 0);
    return 1;
  }
  if (!wf_t_is_scalar(at) || !wf_t_is_scalar(rt)) return 0;
  /* f32 constants may hold more precision than the backends keep */
  double fa = at->kind == WF_T_FLOAT ? fround(at, a->fimm) : 0;
  double fb = b && at->kind == WF_T_FLOAT ? fround(at, b->fimm) : 0;
  if (wf_op_flags(in->op) & WF_OPF_CMP) {
    int lt, eq, gt;
    if (at->kind == WF_T_FLOAT) {
      if (at->bits == 16) return 0;
      lt = fa<fb, eq = fa == fb, gt = fa> fb;
    } else if (at->kind == WF_T_INT && !at->is_signed) {
      uint64_t x = (uint64_t)a->imm, y = (uint64_t)b->imm;
      lt = x<y, eq = x == y, gt = x> y;
    } else {
      lt = a->imm<b->imm, eq = a->imm == b->imm, gt = a->imm> b->imm;
    }
    make_const(F, in, cmp_result(in->op, lt, eq, gt), 0);
    return 1;
  }
  if (rt != at) return 0;
  if (rt->kind == WF_T_FLOAT) {
    double r;
    if (rt->bits == 16 || !eval_float(in->op, rt, fa, fb, &r)) return 0;
    make_const(F, in, 0, r);
    return 1;
  }
  int64_t r;
  if (!eval_int(in->op, rt, a->imm, b ? b->imm : 0, &r)) return 0;
  make_const(F, in, r, 0);
  return 1;
}

/* Identities exact for every input (see the header comment). */
static int fold_identity(fstate *F, wf_inst *in) {
  if (in->nres != 1 || in->nargs < 1) return 0;
  const wf_type *rt = ty(F, in->res[0]);
  wf_val x = in->args[0], y = in->nargs > 1 ? in->args[1] : WF_NOVAL;
  int isf = wf_t_is_float(rt), isi = wf_t_is_int(rt), isb = rt->kind == WF_T_BOOL;
  wf_inst *dx = def(F, x);
  switch (in->op) {
  case WF_OP_ADD:
    if (isi && is_const_int(F, y, 0)) return forward(F, in, x), 1;
    if (isi && is_const_int(F, x, 0)) return forward(F, in, y), 1;
    if (isf && is_const_float(F, y, -0.0)) return forward(F, in, x), 1;
    if (isf && is_const_float(F, x, -0.0)) return forward(F, in, y), 1;
    return 0;
  case WF_OP_SUB:
    if (isi && is_const_int(F, y, 0)) return forward(F, in, x), 1;
    if (isf && is_const_float(F, y, 0.0)) return forward(F, in, x), 1;
    if (isi && x == y) return make_const(F, in, 0, 0), 1;
    return 0;
  case WF_OP_MUL:
    if (isi && (is_const_int(F, x, 0) || is_const_int(F, y, 0))) return make_const(F, in, 0, 0), 1;
    /* fallthrough */
  case WF_OP_DIV:
    if ((isi && is_const_int(F, y, 1)) || (isf && is_const_float(F, y, 1.0)))
      return forward(F, in, x), 1;
    if (in->op == WF_OP_MUL &&
        ((isi && is_const_int(F, x, 1)) || (isf && is_const_float(F, x, 1.0))))
      return forward(F, in, y), 1;
    return 0;
  case WF_OP_NEG:
  case WF_OP_NOT:
    if (dx && dx->op == in->op) return forward(F, in, dx->args[0]), 1;
    return 0;
  case WF_OP_BNOT:
    if (isi && dx && dx->op == WF_OP_BNOT) return forward(F, in, dx->args[0]), 1;
    return 0;
  case WF_OP_BAND:
  case WF_OP_BOR:
    if (x == y) return forward(F, in, x), 1;
    if (isb) {
      int64_t unit = in->op == WF_OP_BAND;
      if (is_const_int(F, y, unit)) return forward(F, in, x), 1;
      if (is_const_int(F, x, unit)) return forward(F, in, y), 1;
    }
    if (isi && in->op == WF_OP_BOR) {
      if (is_const_int(F, y, 0)) return forward(F, in, x), 1;
      if (is_const_int(F, x, 0)) return forward(F, in, y), 1;
    }
    return 0;
  case WF_OP_BXOR:
    if (isi && x == y) return make_const(F, in, 0, 0), 1;
    if ((isi || isb) && is_const_int(F, y, 0)) return forward(F, in, x), 1;
    if ((isi || isb) && is_const_int(F, x, 0)) return forward(F, in, y), 1;
    return 0;
  case WF_OP_SHL:
  case WF_OP_SHR:
    if (is_const_int(F, y, 0)) return forward(F, in, x), 1;
    return 0;
  case WF_OP_SELECT: {
    wf_inst *c = cst(F, x);
    if (c) return forward(F, in, c->imm ? in->args[1] : in->args[2]), 1;
    if (in->args[1] == in->args[2]) return forward(F, in, in->args[1]), 1;
    return 0;
  }
  case WF_OP_EXTRACT:
    if (dx && dx->op == WF_OP_AGG && in->imm >= 0 && in->imm < dx->nargs)
      return forward(F, in, dx->args[in->imm]), 1;
    if (dx && dx->op == WF_OP_INSERT) {
      if (dx->imm == in->imm) return forward(F, in, dx->args[1]), 1;
      in->args[0] = dx->args[0]; /* look through the unrelated insert */
      F->changed = 1;
      return 1;
    }
    return 0;
  case WF_OP_EXTRACTD:
  case WF_OP_INSERTD: {
    /* a constant index (in range: checked before) is a static component */
    wf_inst *k = cst(F, y);
    int n = wf_t_arity(ty(F, x));
    if (!k || k->imm < 0 || k->imm >= n) return 0;
    in->imm = k->imm;
    if (in->op == WF_OP_INSERTD) in->args[1] = in->args[2];
    in->op = in->op == WF_OP_EXTRACTD ? WF_OP_EXTRACT : WF_OP_INSERT;
    in->nargs--;
    F->changed = 1;
    return 1;
  }
  default: return 0;
  }
}

static void fold_block(fstate *F, wf_block *bl);

/* if with a constant condition: splice the taken block before the if. */
static int fold_if(fstate *F, wf_inst *in) {
  wf_inst *c = cst(F, in->args[0]);
  if (!c || in->nblocks != 2 || !in->blocks[0] || !in->blocks[1]) return 0;
  wf_block *bl = in->blocks[c->imm ? 0 : 1];
  wf_inst *y = bl->last;
  if (!y || y->op != WF_OP_YIELD || y->nargs != in->nres) return 0;
  for (wf_inst *i = bl->first, *nx; i != y; i = nx) {
    nx = i->next;
    wf_inst_unlink(i);
    wf_inst_insert_before(in, i);
  }
  for (int k = 0; k < in->nres; k++)
    replace(F, in->res[k], y->args[k]);
  wf_inst_unlink(in);
  F->changed = 1;
  return 1;
}

static void fold_block(fstate *F, wf_block *bl) {
  for (wf_inst *in = bl->first, *nx; in; in = nx) {
    nx = in->next;
    resolve_args(F, in);
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) fold_block(F, in->blocks[k]);
    resolve_args(F, in);
    if (in->op == WF_OP_IF) {
      fold_if(F, in);
      continue;
    }
    while (in->parent && in->op != WF_OP_CONST && (fold_consts(F, in) || fold_identity(F, in)))
      ;
  }
}

void wf_pass_fold(wf_module *m) {
  for (int f = 0; f < m->nfuncs; f++) {
    fstate F = {m->funcs[f], 0, NULL, 0};
    wf_func_fix_parents(F.fn);
    F.nfwd = F.fn->nvals;
    F.fwd = malloc(sizeof(wf_val) * (size_t)(F.nfwd > 0 ? F.nfwd : 1));
    for (int v = 0; F.fwd && v < F.nfwd; v++)
      F.fwd[v] = v;
    for (int round = 0; round < 8; round++) {
      F.changed = 0;
      fold_block(&F, F.fn->body);
      if (F.fwd) resolve_block(&F, F.fn->body);
      if (!F.changed) break;
    }
    free(F.fwd);
  }
}
