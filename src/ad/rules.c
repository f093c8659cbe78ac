/*
** rules.c -- one derivative rule per differentiable op (WF_OPF_DIFF).
**
** A rule reads the adjoint g of the op's result and accumulates the
** adjoints of its operands (wf_ad_acc). Primal operands and results are
** the replayed copies (wf_ad_primal); the `reads` column tells the need
** analysis in ad.c which of them the replay must compute.
**
** Arithmetic rules apply to scalar floats only (the front end lowers
** vector and matrix math to scalar ops); integer instances of the same ops
** carry no adjoint and are skipped by the sweep. Subgradients follow Warp:
** min/max route the adjoint to the chosen operand (b on ties), abs uses
** sign(x) with +1 at 0, floor/ceil/round/trunc/rint have zero derivative;
** where Warp's adjoints guard a singular point, so do these: the sqrt of
** length and normalize at 0 (adj_length), atan2 at (0, 0), asin and acos
** at |x| >= 1 all have derivative 0 there.
**
** Forward mode (jvp.c) uses a second column: a tangent rule returns the
** tangent of the op's result from the tangents of its operands (t[k];
** WF_NOVAL stands for zero, and a rule returns WF_NOVAL when the result's
** tangent is zero). Memory tangent rules read and write the tangent arrays.
**
** The table is checked at compile time: the set of ops with a rule must be
** exactly the set of ops flagged WF_OPF_DIFF in WF_IRDEF (ir/ir.h).
*/
#include <stdio.h>

#include "ad/ad_int.h"
#include "geom/native.h"

#define RT(in) (A->pf->vals[(in)->res[0]].type)
#define X(k) wf_ad_primal(A, in->args[k])
#define R0 wf_ad_primal(A, in->res[0])
#define MUL(a, b) wf_ad_op2(A, WF_OP_MUL, t, a, b)
#define DIV(a, b) wf_ad_op2(A, WF_OP_DIV, t, a, b)
#define ADDV(a, b) wf_ad_op2(A, WF_OP_ADD, t, a, b)
#define SUBV(a, b) wf_ad_op2(A, WF_OP_SUB, t, a, b)
#define NEGV(a) wf_ad_op1(A, WF_OP_NEG, t, a)
#define ONE wf_ad_constf(A, t, 1.0)
#define ACC(k, v) wf_ad_acc(A, in->args[k], v)

/* ---- linear ---- */
static void r_add(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  ACC(0, g[0]);
  ACC(1, g[0]);
}
static void r_sub(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, g[0]);
  ACC(1, NEGV(g[0]));
}
static void r_neg(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(g[0]));
}

/* ---- products and quotients ---- */
static void r_mul(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], X(1)));
  ACC(1, MUL(g[0], X(0)));
}
/* 1 / x for a replayed x. Rules that divide by a value go through its
** reciprocal: the instructions they emit for the same x are equal, so CSE
** keeps one divide per divisor (in x / sqrt(y), the div and sqrt rules
** share 1 / sqrt(y)) and the rest are multiplies. g * (1 / x) differs from
** g / x by rounding only (it overflows to inf only for subnormal x). */
static wf_val recip(wf_adctx *A, const wf_type *t, wf_val x) {
  return DIV(ONE, x);
}
/* The replayed result of `in` if the replay computes it anyway (a rule
** that can do without it does not force the replay to keep it), else
** WF_NOVAL. Results are replayed in their own block, whose replay
** always runs before its sweep, so a mapping is in scope. */
static wf_val res_if_replayed(wf_adctx *A, const wf_inst *in) {
  return A->map[in->res[0]];
}
/* r = a / b, q = g / b computed as g * (1/b): da = q, db = -q r, with r
** the replayed quotient when there is one, else a * (1/b). One divide,
** shared with other rules dividing by b. */
static void r_div(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val inv = recip(A, t, X(1));
  wf_val q = MUL(g[0], inv);
  ACC(0, q);
  wf_val r = res_if_replayed(A, in);
  ACC(1, NEGV(MUL(q, r >= 0 ? r : MUL(X(0), inv))));
}
/* Lua %: r = a - floor(a / b) * b */
static void r_mod(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, g[0]);
  wf_val q = wf_ad_op1(A, WF_OP_FLOOR, t, DIV(X(0), X(1)));
  ACC(1, NEGV(MUL(g[0], q)));
}
/* C's fmod: r = a - trunc(a / b) * b */
static void r_fmod(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, g[0]);
  wf_val q = wf_ad_op1(A, WF_OP_TRUNC, t, DIV(X(0), X(1)));
  ACC(1, NEGV(MUL(g[0], q)));
}
/* copysign(x, y) = |x| with y's sign bit: dx = +-1 (+ when the sign
** bits agree), dy = 0 */
static wf_val copysign_slope(wf_adctx *A, const wf_type *t, wf_val x, wf_val y) {
  return MUL(wf_ad_op2(A, WF_OP_COPYSIGN, t, ONE, x), wf_ad_op2(A, WF_OP_COPYSIGN, t, ONE, y));
}
static void r_copysign(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], copysign_slope(A, t, X(0), X(1))));
}
/* r = a^b: da = g b a^(b-1); db = g r log(a) for a > 0, else 0 */
static void r_pow(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val bm1 = SUBV(X(1), ONE);
  ACC(0, MUL(g[0], MUL(X(1), wf_ad_op2(A, WF_OP_POW, t, X(0), bm1))));
  wf_val db = MUL(MUL(g[0], R0), wf_ad_op1(A, WF_OP_LOG, t, X(0)));
  wf_val pos = wf_ad_op2(A, WF_OP_GT, wf_t_bool(A->T), X(0), wf_ad_zero(A, t));
  ACC(1, wf_ad_op3(A, WF_OP_SELECT, t, pos, db, wf_ad_zero(A, t)));
}

/* ---- subgradients ---- */
static void route(wf_adctx *A, const wf_inst *in, const wf_val *g, wf_op cmp) {
  const wf_type *t = RT(in);
  wf_val c = wf_ad_op2(A, cmp, wf_t_bool(A->T), X(0), X(1));
  wf_val z = wf_ad_zero(A, t);
  ACC(0, wf_ad_op3(A, WF_OP_SELECT, t, c, g[0], z));
  ACC(1, wf_ad_op3(A, WF_OP_SELECT, t, c, z, g[0]));
}
static void r_min(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  route(A, in, g, WF_OP_LT);
}
static void r_max(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  route(A, in, g, WF_OP_GT);
}
static void r_abs(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val neg = wf_ad_op2(A, WF_OP_LT, wf_t_bool(A->T), X(0), wf_ad_zero(A, t));
  ACC(0, wf_ad_op3(A, WF_OP_SELECT, t, neg, NEGV(g[0]), g[0]));
}
/* floor, ceil, round, trunc, rint: piecewise constant */
static void r_zero(wf_adctx *A, const wf_inst *in, const wf_val *g) {}

/* ---- elementary functions ---- */
/* v where r > 0, else 0: the derivatives that are 0 at a singular point
** (Warp's adj_length), so an adjoint of 0 times inf is 0, not NaN. */
static wf_val pos_or_zero(wf_adctx *A, const wf_type *t, wf_val r, wf_val v) {
  wf_val z = wf_ad_zero(A, t);
  wf_val pos = wf_ad_op2(A, WF_OP_GT, wf_t_bool(A->T), r, z);
  return wf_ad_op3(A, WF_OP_SELECT, t, pos, v, z);
}
/* r = sqrt(x): dx = (g / 2) / r, through the shared reciprocal of r; 0 at
** r = 0 for the sqrt of length and normalize (WF_SQRT_ZERO_AT_ZERO). */
static wf_val dsqrt(wf_adctx *A, const wf_inst *in, const wf_type *t, wf_val g) {
  wf_val d = MUL(MUL(g, wf_ad_constf(A, t, 0.5)), recip(A, t, R0));
  return in->imm == WF_SQRT_ZERO_AT_ZERO ? pos_or_zero(A, t, R0, d) : d;
}
static void r_sqrt(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  ACC(0, dsqrt(A, in, RT(in), g[0]));
}
static void r_exp(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], R0));
}
static void r_log(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], X(0)));
}
static void r_sin(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], wf_ad_op1(A, WF_OP_COS, t, X(0))));
}
static void r_cos(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(MUL(g[0], wf_ad_op1(A, WF_OP_SIN, t, X(0)))));
}
static void r_tan(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], ADDV(ONE, MUL(R0, R0))));
}
/* g / sqrt(1 - x^2), shared by asin and acos; 0 where the root is not
** positive (|x| >= 1), as in Warp, so g = 0 at x = 1 gives 0, not NaN */
static wf_val dasin(wf_adctx *A, const wf_type *t, wf_val x, wf_val g) {
  wf_val d = wf_ad_op1(A, WF_OP_SQRT, t, SUBV(ONE, MUL(x, x)));
  return pos_or_zero(A, t, d, DIV(g, d));
}
static void r_asin(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, dasin(A, t, X(0), g[0]));
}
static void r_acos(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(dasin(A, t, X(0), g[0])));
}
static void r_atan(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], ADDV(ONE, MUL(X(0), X(0)))));
}
/* r = atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2); both 0
** at (0, 0), where 0 / 0 would be NaN, as in Warp (a self-pair's angle
** must not poison the gradient). */
static void r_atan2(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val y = X(0), x = X(1);
  wf_val d2 = ADDV(MUL(x, x), MUL(y, y));
  wf_val gd = pos_or_zero(A, t, d2, DIV(g[0], d2));
  ACC(0, MUL(gd, x));
  ACC(1, NEGV(MUL(gd, y)));
}
static void r_sinh(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], wf_ad_op1(A, WF_OP_COSH, t, X(0))));
}
static void r_cosh(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], wf_ad_op1(A, WF_OP_SINH, t, X(0))));
}
static void r_tanh(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], SUBV(ONE, MUL(R0, R0))));
}
#define C(v) wf_ad_constf(A, t, (v))
#define EXPV(v) wf_ad_op1(A, WF_OP_EXP, t, (v))
#define LN2 0.69314718055994530942
#define LN10 2.30258509299404568402
#define TWO_SQRTPI 1.12837916709551257390 /* d erf(x) = 2/sqrt(pi) exp(-x^2) */
#define SQRTPI_2 0.88622692545275801365   /* d erfinv(y) = sqrt(pi)/2 exp(r^2) */
/* r = cbrt(x): dx = g / (3 r^2) (inf at 0, as in Warp) */
static void r_cbrt(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], MUL(C(3.0), MUL(R0, R0))));
}
static void r_exp2(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], MUL(R0, C(LN2))));
}
static void r_expm1(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], ADDV(R0, ONE)));
}
static void r_log2(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], MUL(X(0), C(LN2))));
}
static void r_log10(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], MUL(X(0), C(LN10))));
}
static void r_log1p(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], ADDV(ONE, X(0))));
}
/* 2/sqrt(pi) exp(-x^2): erf' (erfc' is its negative) */
static wf_val derf(wf_adctx *A, const wf_type *t, wf_val x) {
  return MUL(C(TWO_SQRTPI), EXPV(NEGV(MUL(x, x))));
}
/* sqrt(pi)/2 exp(r^2) for r = erfinv(y): erfinv' (erfcinv' is its negative) */
static wf_val derfinv(wf_adctx *A, const wf_type *t, wf_val r) {
  return MUL(C(SQRTPI_2), EXPV(MUL(r, r)));
}
static void r_erf(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], derf(A, t, X(0))));
}
static void r_erfc(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(MUL(g[0], derf(A, t, X(0)))));
}
static void r_erfinv(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, MUL(g[0], derfinv(A, t, R0)));
}
static void r_erfcinv(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(MUL(g[0], derfinv(A, t, R0))));
}

/* ---- selection, conversion, aggregates (any type) ---- */
/* The adjoint goes to the operand that was taken. */
static void r_select(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val z = wf_ad_zero(A, t), c = X(0);
  ACC(1, wf_ad_op3(A, WF_OP_SELECT, t, c, g[0], z));
  ACC(2, wf_ad_op3(A, WF_OP_SELECT, t, c, z, g[0]));
}
/* float -> float: convert the adjoint back; int operands get nothing. */
static void r_cast(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *at = A->pf->vals[in->args[0]].type;
  if (!wf_t_is_float(at)) return;
  ACC(0, wf_ad_op1(A, WF_OP_CAST, at, g[0]));
}
static void r_agg(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  for (int k = 0; k < in->nargs; k++)
    if (wf_ad_difft(A->pf->vals[in->args[k]].type)) ACC(k, wf_ad_extract(A, g[0], k));
}
static void r_extract(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *at = A->pf->vals[in->args[0]].type;
  ACC(0, wf_ad_insert(A, wf_ad_zero(A, at), (int)in->imm, g[0]));
}
static void r_insert(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *vt = A->pf->vals[in->args[1]].type;
  ACC(0, wf_ad_insert(A, g[0], (int)in->imm, wf_ad_zero(A, vt)));
  if (wf_ad_difft(vt)) ACC(1, wf_ad_extract(A, g[0], (int)in->imm));
}
/* k is dynamic (local arrays); the adjoint is added into component k */
static void r_extractd(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *at = A->pf->vals[in->args[0]].type;
  ACC(0, wf_ad_insertd(A, wf_ad_zero(A, at), X(1), g[0]));
}
static void r_insertd(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *vt = A->pf->vals[in->args[2]].type;
  ACC(0, wf_ad_insertd(A, g[0], X(1), wf_ad_zero(A, vt)));
  if (wf_ad_difft(vt)) ACC(2, wf_ad_extractd(A, g[0], X(1)));
}

/* ---- memory ---- */
/* x = a[i...]: atomic_add(adj_a, i..., adj(x)) when adj_a is given. Threads
** may read the same element, so the accumulation is atomic. */
static void r_load(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 0, NULL);
  wf_val args[WF_AD_MAXIDX + 2];
  args[0] = sh;
  for (int k = 1; k < in->nargs; k++)
    args[k] = X(k);
  args[in->nargs] = g[0];
  const wf_type *et = RT(in);
  wf_ad_emit(A, WF_OP_ATOMIC_ADD, in->nargs + 1, args, 1, &et, 0);
  wf_ad_if_else(A, &s, NULL);
  wf_ad_if_end(A, &s, NULL);
}
/* adj(v) += adj_a[i...] for a store or atomic of value v; with `clear`,
** adj_a[i...] = 0 afterwards (the store overwrote the element, so the old
** value gets no gradient from later reads: Warp does the same). A store of
** part of an element (y[i].x = v) is lowered to load, insert, store; the
** insert's rule hands the untouched components back to adj_a[i...]. */
static void read_adj(wf_adctx *A, const wf_inst *in, int clear) {
  int nv = in->nargs - 1;
  const wf_type *vt = A->pf->vals[in->args[nv]].type;
  if (!wf_ad_difft(vt)) return;
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 1, &vt);
  wf_val args[WF_AD_MAXIDX + 2];
  args[0] = sh;
  for (int k = 1; k < nv; k++)
    args[k] = X(k);
  wf_val l = wf_ad_emit(A, WF_OP_LOAD, nv, args, 1, &vt, 0)->res[0];
  if (clear) {
    args[nv] = wf_ad_zero(A, vt);
    wf_ad_emit(A, WF_OP_STORE, nv + 1, args, 0, NULL, 0);
  }
  wf_ad_if_else(A, &s, &l);
  wf_val z = wf_ad_zero(A, vt);
  wf_ad_if_end(A, &s, &z);
  ACC(nv, s.in->res[0]);
}
/* a[i...] = v: adj(v) += adj_a[i...]; adj_a[i...] = 0. */
static void r_store(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  read_adj(A, in, 1);
}
/* atomic_add(a, i..., v): adj(v) += adj_a[i...] (the old value returned by
** the atomic carries no gradient; the element keeps its adjoint). */
static void r_atomic_add(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  read_adj(A, in, 0);
}

/* The adjoint of an atomic_min/max value (Warp's rule): each component of
** v equal to the element's final value (both NaN counts as equal) takes
** that component's adjoint g; the others get zero. v, cur, g of type t. */
static wf_val minmax_adj(wf_adctx *A, const wf_type *t, wf_val v, wf_val cur, wf_val g) {
  if (t->kind == WF_T_FLOAT) {
    const wf_type *bt = wf_t_bool(A->T);
    wf_val eq = wf_ad_op2(A, WF_OP_EQ, bt, v, cur);
    wf_val vn = wf_ad_op2(A, WF_OP_NE, bt, v, v), cn = wf_ad_op2(A, WF_OP_NE, bt, cur, cur);
    wf_val take = wf_ad_op2(A, WF_OP_BOR, bt, eq, wf_ad_op2(A, WF_OP_BAND, bt, vn, cn));
    return wf_ad_op3(A, WF_OP_SELECT, t, take, g, wf_ad_zero(A, t));
  }
  int n = wf_t_arity(t);
  wf_val *c = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++)
    c[i] = minmax_adj(A, wf_t_component(A->T, t, i), wf_ad_extract(A, v, i),
                      wf_ad_extract(A, cur, i), wf_ad_extract(A, g, i));
  return wf_ad_emit(A, WF_OP_AGG, n, c, 1, &t, 0)->res[0];
}
/* atomic_min/max(a, i..., v): adj(v) += adj_a[i...] where v is the winner
** (read back from a[i...] after the launch), componentwise. */
static void r_atomic_minmax(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  int nv = in->nargs - 1;
  const wf_type *vt = A->pf->vals[in->args[nv]].type;
  if (!wf_ad_difft(vt)) return;
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 1, &vt);
  wf_val args[WF_AD_MAXIDX + 1], pargs[WF_AD_MAXIDX + 1];
  args[0] = sh;
  pargs[0] = X(0);
  for (int k = 1; k < nv; k++)
    args[k] = pargs[k] = X(k);
  wf_val ga = wf_ad_emit(A, WF_OP_LOAD, nv, args, 1, &vt, 0)->res[0];
  wf_val cur = wf_ad_emit(A, WF_OP_LOAD, nv, pargs, 1, &vt, 0)->res[0];
  wf_val r = minmax_adj(A, vt, X(nv), cur, ga);
  wf_ad_if_else(A, &s, &r);
  wf_val z = wf_ad_zero(A, vt);
  wf_ad_if_end(A, &s, &z);
  ACC(nv, s.in->res[0]);
}

/* ======================================================================
** tangent rules (forward mode)
** ====================================================================== */
#define TN(k) t[k]
/* tangent arithmetic with WF_NOVAL as zero */
static wf_val tadd(wf_adctx *A, const wf_type *t, wf_val x, wf_val y) {
  if (x < 0) return y;
  if (y < 0) return x;
  return ADDV(x, y);
}
static wf_val tneg(wf_adctx *A, const wf_type *t, wf_val x) {
  return x < 0 ? x : NEGV(x);
}
static wf_val tmul(wf_adctx *A, const wf_type *t, wf_val x, wf_val f) {
  return x < 0 ? x : MUL(x, f);
}
static wf_val tdiv(wf_adctx *A, const wf_type *t, wf_val x, wf_val f) {
  return x < 0 ? x : DIV(x, f);
}
/* tangent or a concrete zero of type ty */
static wf_val tz(wf_adctx *A, const wf_type *ty, wf_val x) {
  return x >= 0 ? x : wf_ad_zero(A, ty);
}
#define TADD(a, b) tadd(A, t_, a, b)
#define TNEG(a) tneg(A, t_, a)
#define TMUL(a, f) tmul(A, t_, a, f)
#define TDIV(a, f) tdiv(A, t_, a, f)
/* the rules name the result type t_ (t holds the operand tangents) */
#define TRT const wf_type *t_ = RT(in)
#define MUL_(a, b) wf_ad_op2(A, WF_OP_MUL, t_, a, b)
#define ONE_ wf_ad_constf(A, t_, 1.0)

static wf_val f_add(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  return TADD(TN(0), TN(1));
}
static wf_val f_sub(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  return TADD(TN(0), TNEG(TN(1)));
}
static wf_val f_neg(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  return TNEG(TN(0));
}
static wf_val f_mul(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  wf_val a = TN(0) >= 0 ? TMUL(TN(0), X(1)) : WF_NOVAL;
  wf_val b = TN(1) >= 0 ? TMUL(TN(1), X(0)) : WF_NOVAL;
  return TADD(a, b);
}
/* d(a/b) = (da - r db) / b: one multiply by the shared 1/b */
static wf_val f_div(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0 && TN(1) < 0) return WF_NOVAL;
  wf_val num = TADD(TN(0), TN(1) >= 0 ? TNEG(TMUL(TN(1), R0)) : WF_NOVAL);
  return MUL_(num, recip(A, t_, X(1)));
}
static wf_val f_mod(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(1) < 0) return TN(0);
  wf_val q = wf_ad_op1(A, WF_OP_FLOOR, t_, wf_ad_op2(A, WF_OP_DIV, t_, X(0), X(1)));
  return TADD(TN(0), TNEG(TMUL(TN(1), q)));
}
/* C's fmod: r = a - trunc(a / b) * b */
static wf_val f_fmod(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(1) < 0) return TN(0);
  wf_val q = wf_ad_op1(A, WF_OP_TRUNC, t_, wf_ad_op2(A, WF_OP_DIV, t_, X(0), X(1)));
  return TADD(TN(0), TNEG(TMUL(TN(1), q)));
}
static wf_val f_copysign(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0) return WF_NOVAL;
  return TMUL(TN(0), copysign_slope(A, t_, X(0), X(1)));
}
static wf_val f_pow(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  wf_val a = WF_NOVAL, b = WF_NOVAL;
  if (TN(0) >= 0) {
    wf_val bm1 = wf_ad_op2(A, WF_OP_SUB, t_, X(1), ONE_);
    a = TMUL(TN(0), MUL_(X(1), wf_ad_op2(A, WF_OP_POW, t_, X(0), bm1)));
  }
  if (TN(1) >= 0) {
    wf_val db = MUL_(TMUL(TN(1), R0), wf_ad_op1(A, WF_OP_LOG, t_, X(0)));
    wf_val pos = wf_ad_op2(A, WF_OP_GT, wf_t_bool(A->T), X(0), wf_ad_zero(A, t_));
    b = wf_ad_op3(A, WF_OP_SELECT, t_, pos, db, wf_ad_zero(A, t_));
  }
  return TADD(a, b);
}
static wf_val froute(wf_adctx *A, const wf_inst *in, const wf_val *t, wf_op cmp) {
  TRT;
  if (TN(0) < 0 && TN(1) < 0) return WF_NOVAL;
  wf_val c = wf_ad_op2(A, cmp, wf_t_bool(A->T), X(0), X(1));
  return wf_ad_op3(A, WF_OP_SELECT, t_, c, tz(A, t_, TN(0)), tz(A, t_, TN(1)));
}
static wf_val f_min(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  return froute(A, in, t, WF_OP_LT);
}
static wf_val f_max(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  return froute(A, in, t, WF_OP_GT);
}
static wf_val f_abs(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0) return WF_NOVAL;
  wf_val neg = wf_ad_op2(A, WF_OP_LT, wf_t_bool(A->T), X(0), wf_ad_zero(A, t_));
  return wf_ad_op3(A, WF_OP_SELECT, t_, neg, TNEG(TN(0)), TN(0));
}
static wf_val f_zero(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  return WF_NOVAL;
}
/* unary f(x) with df = t0 * d(x): d computed only when t0 is nonzero */
#define FUNARY(name, expr)                                                                         \
  static wf_val name(wf_adctx *A, const wf_inst *in, const wf_val *t) {                            \
    TRT;                                                                                           \
    if (TN(0) < 0) return WF_NOVAL;                                                                \
    return expr;                                                                                   \
  }
FUNARY(f_sqrt, dsqrt(A, in, t_, TN(0)))
FUNARY(f_exp, TMUL(TN(0), R0))
FUNARY(f_log, TDIV(TN(0), X(0)))
FUNARY(f_sin, TMUL(TN(0), wf_ad_op1(A, WF_OP_COS, t_, X(0))))
FUNARY(f_cos, TNEG(TMUL(TN(0), wf_ad_op1(A, WF_OP_SIN, t_, X(0)))))
FUNARY(f_tan, TMUL(TN(0), wf_ad_op2(A, WF_OP_ADD, t_, ONE_, MUL_(R0, R0))))
FUNARY(f_asin, dasin(A, t_, X(0), TN(0)))
FUNARY(f_acos, TNEG(dasin(A, t_, X(0), TN(0))))
FUNARY(f_atan, TDIV(TN(0), wf_ad_op2(A, WF_OP_ADD, t_, ONE_, MUL_(X(0), X(0)))))
FUNARY(f_sinh, TMUL(TN(0), wf_ad_op1(A, WF_OP_COSH, t_, X(0))))
FUNARY(f_cosh, TMUL(TN(0), wf_ad_op1(A, WF_OP_SINH, t_, X(0))))
FUNARY(f_tanh, TMUL(TN(0), wf_ad_op2(A, WF_OP_SUB, t_, ONE_, MUL_(R0, R0))))
#define C_(v) wf_ad_constf(A, t_, (v))
FUNARY(f_cbrt, TDIV(TN(0), MUL_(C_(3.0), MUL_(R0, R0))))
FUNARY(f_exp2, TMUL(TN(0), MUL_(R0, C_(LN2))))
FUNARY(f_expm1, TMUL(TN(0), wf_ad_op2(A, WF_OP_ADD, t_, R0, ONE_)))
FUNARY(f_log2, TDIV(TN(0), MUL_(X(0), C_(LN2))))
FUNARY(f_log10, TDIV(TN(0), MUL_(X(0), C_(LN10))))
FUNARY(f_log1p, TDIV(TN(0), wf_ad_op2(A, WF_OP_ADD, t_, ONE_, X(0))))
FUNARY(f_erf, TMUL(TN(0), derf(A, t_, X(0))))
FUNARY(f_erfc, TNEG(TMUL(TN(0), derf(A, t_, X(0)))))
FUNARY(f_erfinv, TMUL(TN(0), derfinv(A, t_, R0)))
FUNARY(f_erfcinv, TNEG(TMUL(TN(0), derfinv(A, t_, R0))))
/* r = atan2(y, x): dr = (x dy - y dx) / (x^2 + y^2) */
static wf_val f_atan2(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0 && TN(1) < 0) return WF_NOVAL;
  wf_val y = X(0), x = X(1);
  wf_val num = TADD(TMUL(TN(0), x), TNEG(TMUL(TN(1), y)));
  wf_val d2 = wf_ad_op2(A, WF_OP_ADD, t_, MUL_(x, x), MUL_(y, y));
  return pos_or_zero(A, t_, d2, TDIV(num, d2));
}
static wf_val f_select(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(1) < 0 && TN(2) < 0) return WF_NOVAL;
  return wf_ad_op3(A, WF_OP_SELECT, t_, X(0), tz(A, t_, TN(1)), tz(A, t_, TN(2)));
}
static wf_val f_cast(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0 || !wf_t_is_float(A->pf->vals[in->args[0]].type)) return WF_NOVAL;
  return wf_ad_op1(A, WF_OP_CAST, t_, TN(0));
}
static wf_val f_agg(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  int any = 0;
  for (int k = 0; k < in->nargs; k++)
    any |= TN(k) >= 0;
  if (!any) return WF_NOVAL;
  wf_val *c = wf_ad_scratch(A, sizeof(wf_val) * (size_t)in->nargs);
  for (int k = 0; k < in->nargs; k++)
    c[k] = tz(A, A->pf->vals[in->args[k]].type, TN(k));
  return wf_ad_emit(A, WF_OP_AGG, in->nargs, c, 1, &t_, 0)->res[0];
}
static wf_val f_extract(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  return TN(0) < 0 ? WF_NOVAL : wf_ad_extract(A, TN(0), (int)in->imm);
}
static wf_val f_insert(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0 && TN(1) < 0) return WF_NOVAL;
  const wf_type *vt = A->pf->vals[in->args[1]].type;
  return wf_ad_insert(A, tz(A, t_, TN(0)), (int)in->imm, tz(A, vt, TN(1)));
}
static wf_val f_extractd(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  return TN(0) < 0 ? WF_NOVAL : wf_ad_extractd(A, TN(0), X(1));
}
static wf_val f_insertd(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  if (TN(0) < 0 && TN(2) < 0) return WF_NOVAL;
  const wf_type *vt = A->pf->vals[in->args[2]].type;
  return wf_ad_insertd(A, tz(A, t_, TN(0)), X(1), tz(A, vt, TN(2)));
}
/* x = a[i...]: the tangent is ta[i...] when the tangent array is given. */
static wf_val f_load(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  TRT;
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 1, &t_);
  wf_val args[WF_AD_MAXIDX + 1];
  args[0] = sh;
  for (int k = 1; k < in->nargs; k++)
    args[k] = X(k);
  wf_val l = wf_ad_emit(A, WF_OP_LOAD, in->nargs, args, 1, &t_, 0)->res[0];
  wf_ad_if_else(A, &s, &l);
  wf_val z = wf_ad_zero(A, t_);
  wf_ad_if_end(A, &s, &z);
  return s.in->res[0];
}
/* a[i...] = v: ta[i...] = tv; atomic_add(a, i..., v): atomic_add(ta, i..., tv)
** (the old value returned by the atomic gets no tangent). */
static wf_val f_store(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  int nv = in->nargs - 1;
  const wf_type *vt = A->pf->vals[in->args[nv]].type;
  if (!wf_ad_difft(vt) || (in->op == WF_OP_ATOMIC_ADD && TN(nv) < 0)) return WF_NOVAL;
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 0, NULL);
  wf_val args[WF_AD_MAXIDX + 2];
  args[0] = sh;
  for (int k = 1; k < nv; k++)
    args[k] = X(k);
  args[nv] = tz(A, vt, TN(nv));
  if (in->op == WF_OP_STORE)
    wf_ad_emit(A, WF_OP_STORE, nv + 1, args, 0, NULL, 0);
  else
    wf_ad_emit(A, WF_OP_ATOMIC_ADD, nv + 1, args, 1, &vt, 0);
  wf_ad_if_else(A, &s, NULL);
  wf_ad_if_end(A, &s, NULL);
  return WF_NOVAL;
}

/* atomic_min/max: which thread's value ends up in the element is only
** known once every thread has run, so one launch cannot write its tangent. */
static wf_val f_atomic_minmax(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  int nv = in->nargs - 1;
  if (!wf_ad_difft(A->pf->vals[in->args[nv]].type)) return WF_NOVAL;
  wf_ad_fail(A, in, "autodiff: forward mode (weft.jvp) does not support %s of float values",
             wf_op_name(in->op));
}

/* ---- the table: op, reverse rule, what it reads, tangent rule ---- */
/* clang-format off */
#define WF_AD_RULES(_) \
  _(ADD, r_add, 0, f_add) _(SUB, r_sub, 0, f_sub) _(MUL, r_mul, WF_AD_RD_ARGS, f_mul) \
  _(DIV, r_div, WF_AD_RD_ARGS, f_div) _(MOD, r_mod, WF_AD_RD_ARGS, f_mod) \
  _(FMOD, r_fmod, WF_AD_RD_ARGS, f_fmod) \
  _(NEG, r_neg, 0, f_neg) _(POW, r_pow, WF_AD_RD_ARGS | WF_AD_RD_RES, f_pow) \
  _(MIN, r_min, WF_AD_RD_ARGS, f_min) _(MAX, r_max, WF_AD_RD_ARGS, f_max) \
  _(ABS, r_abs, WF_AD_RD_ARGS, f_abs) \
  _(SQRT, r_sqrt, WF_AD_RD_RES, f_sqrt) _(CBRT, r_cbrt, WF_AD_RD_RES, f_cbrt) \
  _(EXP, r_exp, WF_AD_RD_RES, f_exp) _(EXP2, r_exp2, WF_AD_RD_RES, f_exp2) \
  _(EXPM1, r_expm1, WF_AD_RD_RES, f_expm1) _(LOG2, r_log2, WF_AD_RD_ARGS, f_log2) \
  _(LOG10, r_log10, WF_AD_RD_ARGS, f_log10) _(LOG1P, r_log1p, WF_AD_RD_ARGS, f_log1p) \
  _(ERF, r_erf, WF_AD_RD_ARGS, f_erf) _(ERFC, r_erfc, WF_AD_RD_ARGS, f_erfc) \
  _(ERFINV, r_erfinv, WF_AD_RD_RES, f_erfinv) _(ERFCINV, r_erfcinv, WF_AD_RD_RES, f_erfcinv) \
  _(LOG, r_log, WF_AD_RD_ARGS, f_log) _(SIN, r_sin, WF_AD_RD_ARGS, f_sin) \
  _(COS, r_cos, WF_AD_RD_ARGS, f_cos) \
  _(TAN, r_tan, WF_AD_RD_RES, f_tan) _(ASIN, r_asin, WF_AD_RD_ARGS, f_asin) \
  _(ACOS, r_acos, WF_AD_RD_ARGS, f_acos) \
  _(ATAN, r_atan, WF_AD_RD_ARGS, f_atan) _(ATAN2, r_atan2, WF_AD_RD_ARGS, f_atan2) \
  _(COPYSIGN, r_copysign, WF_AD_RD_ARGS, f_copysign) \
  _(SINH, r_sinh, WF_AD_RD_ARGS, f_sinh) _(COSH, r_cosh, WF_AD_RD_ARGS, f_cosh) \
  _(TANH, r_tanh, WF_AD_RD_RES, f_tanh) \
  _(FLOOR, r_zero, 0, f_zero) _(CEIL, r_zero, 0, f_zero) _(ROUND, r_zero, 0, f_zero) \
  _(TRUNC, r_zero, 0, f_zero) _(RINT, r_zero, 0, f_zero) \
  _(SELECT, r_select, WF_AD_RD_ARG0, f_select) _(CAST, r_cast, 0, f_cast) \
  _(AGG, r_agg, 0, f_agg) _(EXTRACT, r_extract, 0, f_extract) \
  _(INSERT, r_insert, 0, f_insert) _(EXTRACTD, r_extractd, WF_AD_RD_ARG1, f_extractd) \
  _(INSERTD, r_insertd, WF_AD_RD_ARG1, f_insertd) \
  _(LOAD, r_load, WF_AD_RD_IDX, f_load) _(STORE, r_store, WF_AD_RD_IDX, f_store) \
  _(ATOMIC_ADD, r_atomic_add, WF_AD_RD_IDX, f_store) \
  _(ATOMIC_MIN, r_atomic_minmax, WF_AD_RD_ARGS, f_atomic_minmax) \
  _(ATOMIC_MAX, r_atomic_minmax, WF_AD_RD_ARGS, f_atomic_minmax) \
  _(NATIVE, r_native, WF_AD_RD_ARGS | WF_AD_RD_RES, f_native)
/* clang-format on */

/* ---- native builtins (src/geom/native.h) ----
** A row with an adjoint row gets it called with the primal arguments and
** the result's adjoint; it accumulates into the object's own gradient
** buffers (mesh points), so no operand gets an adjoint here. A query with
** a "<row>$diff" function (the front end compiled it beside the kernel) is
** reversed through that function's body, which recomputes the float fields
** of the result from the arguments, the result and the mesh's points: the
** adjoints reach the arguments and, through mesh_get_point, the points.
** Step functions (WF_NATF_STEP) and rows that read neither a float
** argument nor a mesh have a zero gradient; any other float result is an
** error, never a silent zero. */
static int native_diff(wf_adctx *A, int row) {
  char name[96];
  snprintf(name, sizeof name, "%s" WF_NAT_DIFF_SUFFIX, wf_native_tab[row].name);
  return wf_module_find(A->m, name);
}
/* Could a gradient reach the row's float results: from a float argument
** or from a mesh's points? */
static int native_depends(wf_adctx *A, const wf_inst *in) {
  const wf_nativeinfo *ni = &wf_native_tab[in->imm];
  if (ni->flags & WF_NATF_STEP) return 0;
  if (ni->kind == WF_GEOM_MESH) return 1;
  for (int k = 0; k < in->nargs; k++)
    if (wf_ad_difft(wf_ad_ptype(A, in->args[k]))) return 1;
  return 0;
}
static void r_native(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  if (in->imm < 0 || in->imm >= WF_NAT__COUNT || in->nres != 1) return;
  int adj = wf_native_tab[in->imm].adj;
  if (adj >= 0 && in->nargs <= 15) {
    wf_val a[16];
    for (int k = 0; k < in->nargs; k++)
      a[k] = X(k);
    a[in->nargs] = g[0];
    wf_ad_emit(A, WF_OP_NATIVE, in->nargs + 1, a, 0, NULL, 0)->imm = adj;
    return;
  }
  int df = native_diff(A, (int)in->imm);
  if (df >= 0) {
    wf_ad_reverse_func(A, in, df, 1);
    return;
  }
  if (native_depends(A, in))
    wf_ad_fail(A, in, "autodiff: weft.%s has no gradient (reverse mode)",
               wf_native_tab[in->imm].name);
}
/* Forward mode. A row with a tangent row (mesh_get_point) reads the
** tangent the object holds for the element (weft.jvp points the mesh at
** the tangents given for its arrays, whatever way its id reached the
** kernel: a parameter, an array, a struct). A query with a "<row>$diff"
** function takes its tangent through that function's body, from the
** arguments' tangents and, through mesh_get_point, the points': on a mesh
** always, as whether the points carry tangents is only known at launch.
** Elsewhere the tangent is zero as above, and a tangent reaching a row
** that would need one it lacks is an error. */
static wf_val f_native(wf_adctx *A, const wf_inst *in, const wf_val *t) {
  if (in->imm < 0 || in->imm >= WF_NAT__COUNT || in->nres != 1) return WF_NOVAL;
  const wf_nativeinfo *ni = &wf_native_tab[in->imm];
  if (ni->tan >= 0 && in->nargs <= 16) {
    wf_val a[16];
    for (int k = 0; k < in->nargs; k++)
      a[k] = X(k);
    const wf_type *rt = wf_ad_ptype(A, in->res[0]);
    wf_inst *c = wf_ad_emit(A, WF_OP_NATIVE, in->nargs, a, 1, &rt, 0);
    c->imm = ni->tan;
    return c->res[0];
  }
  if (ni->adj >= 0 || !native_depends(A, in)) return WF_NOVAL;
  int any = ni->kind == WF_GEOM_MESH;
  for (int k = 0; k < in->nargs; k++)
    any |= t[k] >= 0;
  if (!any) return WF_NOVAL;
  int df = native_diff(A, (int)in->imm);
  if (df >= 0) return wf_ad_tangent_func(A, in, df);
  wf_ad_fail(A, in, "autodiff: weft.%s has no tangent (forward mode)", ni->name);
}

static const wf_ad_rule rules_tab[WF_OP__COUNT] = {
#define WF_AD_RULE_ENTRY(op, fn, rd, tfn) [WF_OP_##op] = {fn, rd, tfn},
    WF_AD_RULES(WF_AD_RULE_ENTRY)
#undef WF_AD_RULE_ENTRY
};

/* The build-time check: bit sets (two 64-bit halves) of the ops flagged
** differentiable and of the ops with a rule must be equal. A new DIFF op
** without a rule (or a rule for a non-DIFF op) stops the build here. */
_Static_assert(WF_OP__COUNT <= 128, "op bit sets hold 128 ops");
#define WF_AD_BIT(op, half) (((op) >> 6) == (half) ? 1ULL << ((op)&63) : 0ULL)
#define WF_AD_DIFF_LO(e, s, na, nr, fl, ty, libm, llvm, cuda, fold)                                \
  | (((fl)&WF_OPF_DIFF) ? WF_AD_BIT(WF_OP_##e, 0) : 0ULL)
#define WF_AD_DIFF_HI(e, s, na, nr, fl, ty, libm, llvm, cuda, fold)                                \
  | (((fl)&WF_OPF_DIFF) ? WF_AD_BIT(WF_OP_##e, 1) : 0ULL)
#define WF_AD_RULE_LO(op, fn, rd, tfn) | WF_AD_BIT(WF_OP_##op, 0)
#define WF_AD_RULE_HI(op, fn, rd, tfn) | WF_AD_BIT(WF_OP_##op, 1)
_Static_assert((0ULL WF_IRDEF(WF_AD_DIFF_LO)) == (0ULL WF_AD_RULES(WF_AD_RULE_LO)) &&
                   (0ULL WF_IRDEF(WF_AD_DIFF_HI)) == (0ULL WF_AD_RULES(WF_AD_RULE_HI)),
               "every WF_OPF_DIFF op needs a derivative rule in src/ad/rules.c (and only those)");

const wf_ad_rule *wf_ad_rule_of(wf_op op) {
  if ((unsigned)op >= WF_OP__COUNT || !rules_tab[op].fn || !rules_tab[op].tan) return NULL;
  return &rules_tab[op];
}
