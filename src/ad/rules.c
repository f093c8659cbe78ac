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
** sign(x) with +1 at 0, sign/floor/ceil/round have zero derivative.
**
** The table is checked at compile time: the set of ops with a rule must be
** exactly the set of ops flagged WF_OPF_DIFF in WF_IRDEF (ir/ir.h).
*/
#include "ad/ad_int.h"

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
/* r = a / b: da = g / b, db = -g r / b */
static void r_div(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], X(1)));
  ACC(1, NEGV(DIV(MUL(g[0], R0), X(1))));
}
/* Lua %: r = a - floor(a / b) * b */
static void r_mod(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, g[0]);
  wf_val q = wf_ad_op1(A, WF_OP_FLOOR, t, DIV(X(0), X(1)));
  ACC(1, NEGV(MUL(g[0], q)));
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
/* sign, floor, ceil, round: piecewise constant */
static void r_zero(wf_adctx *A, const wf_inst *in, const wf_val *g) {}

/* ---- elementary functions ---- */
static void r_sqrt(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(MUL(g[0], wf_ad_constf(A, t, 0.5)), R0));
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
/* 1 / sqrt(1 - x^2), shared by asin and acos */
static wf_val rsqrt1m(wf_adctx *A, const wf_type *t, wf_val x) {
  return wf_ad_op1(A, WF_OP_SQRT, t, SUBV(ONE, MUL(x, x)));
}
static void r_asin(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], rsqrt1m(A, t, X(0))));
}
static void r_acos(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, NEGV(DIV(g[0], rsqrt1m(A, t, X(0)))));
}
static void r_atan(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  ACC(0, DIV(g[0], ADDV(ONE, MUL(X(0), X(0)))));
}
/* r = atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2) */
static void r_atan2(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  const wf_type *t = RT(in);
  wf_val y = X(0), x = X(1);
  wf_val gd = DIV(g[0], ADDV(MUL(x, x), MUL(y, y)));
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
/* a[i...] = v and atomic_add(a, i..., v): adj(v) += adj_a[i...]. */
static void r_store(wf_adctx *A, const wf_inst *in, const wf_val *g) {
  int nv = in->nargs - 1;
  const wf_type *vt = A->pf->vals[in->args[nv]].type;
  if (!wf_ad_difft(vt)) return;
  wf_val sh = wf_ad_shadow(A, in, in->args[0]);
  wf_val pr = wf_ad_present(A, in, in->args[0]);
  wf_ad_if s;
  wf_ad_if_begin(A, &s, pr, 1, &vt);
  wf_val args[WF_AD_MAXIDX + 1];
  args[0] = sh;
  for (int k = 1; k < nv; k++)
    args[k] = X(k);
  wf_val l = wf_ad_emit(A, WF_OP_LOAD, nv, args, 1, &vt, 0)->res[0];
  wf_ad_if_else(A, &s, &l);
  wf_val z = wf_ad_zero(A, vt);
  wf_ad_if_end(A, &s, &z);
  ACC(nv, s.in->res[0]);
}

/* ---- the table ---- */
/* clang-format off */
#define WF_AD_RULES(_) \
  _(ADD, r_add, 0) _(SUB, r_sub, 0) _(MUL, r_mul, WF_AD_RD_ARGS) \
  _(DIV, r_div, WF_AD_RD_ARGS | WF_AD_RD_RES) _(MOD, r_mod, WF_AD_RD_ARGS) \
  _(NEG, r_neg, 0) _(POW, r_pow, WF_AD_RD_ARGS | WF_AD_RD_RES) \
  _(MIN, r_min, WF_AD_RD_ARGS) _(MAX, r_max, WF_AD_RD_ARGS) _(ABS, r_abs, WF_AD_RD_ARGS) \
  _(SIGN, r_zero, 0) _(SQRT, r_sqrt, WF_AD_RD_RES) _(EXP, r_exp, WF_AD_RD_RES) \
  _(LOG, r_log, WF_AD_RD_ARGS) _(SIN, r_sin, WF_AD_RD_ARGS) _(COS, r_cos, WF_AD_RD_ARGS) \
  _(TAN, r_tan, WF_AD_RD_RES) _(ASIN, r_asin, WF_AD_RD_ARGS) _(ACOS, r_acos, WF_AD_RD_ARGS) \
  _(ATAN, r_atan, WF_AD_RD_ARGS) _(ATAN2, r_atan2, WF_AD_RD_ARGS) \
  _(SINH, r_sinh, WF_AD_RD_ARGS) _(COSH, r_cosh, WF_AD_RD_ARGS) _(TANH, r_tanh, WF_AD_RD_RES) \
  _(FLOOR, r_zero, 0) _(CEIL, r_zero, 0) _(ROUND, r_zero, 0) \
  _(SELECT, r_select, WF_AD_RD_ARG0) _(CAST, r_cast, 0) \
  _(AGG, r_agg, 0) _(EXTRACT, r_extract, 0) _(INSERT, r_insert, 0) \
  _(LOAD, r_load, WF_AD_RD_IDX) _(STORE, r_store, WF_AD_RD_IDX) \
  _(ATOMIC_ADD, r_store, WF_AD_RD_IDX)
/* clang-format on */

static const wf_ad_rule rules_tab[WF_OP__COUNT] = {
#define WF_AD_RULE_ENTRY(op, fn, rd) [WF_OP_##op] = {fn, rd},
    WF_AD_RULES(WF_AD_RULE_ENTRY)
#undef WF_AD_RULE_ENTRY
};

/* The build-time check: bit sets (two 64-bit halves) of the ops flagged
** differentiable and of the ops with a rule must be equal. A new DIFF op
** without a rule (or a rule for a non-DIFF op) stops the build here. */
_Static_assert(WF_OP__COUNT <= 128, "op bit sets hold 128 ops");
#define WF_AD_BIT(op, half) (((op) >> 6) == (half) ? 1ULL << ((op)&63) : 0ULL)
#define WF_AD_DIFF_LO(e, s, na, nr, fl) | (((fl)&WF_OPF_DIFF) ? WF_AD_BIT(WF_OP_##e, 0) : 0ULL)
#define WF_AD_DIFF_HI(e, s, na, nr, fl) | (((fl)&WF_OPF_DIFF) ? WF_AD_BIT(WF_OP_##e, 1) : 0ULL)
#define WF_AD_RULE_LO(op, fn, rd) | WF_AD_BIT(WF_OP_##op, 0)
#define WF_AD_RULE_HI(op, fn, rd) | WF_AD_BIT(WF_OP_##op, 1)
_Static_assert((0ULL WF_IRDEF(WF_AD_DIFF_LO)) == (0ULL WF_AD_RULES(WF_AD_RULE_LO)) &&
                   (0ULL WF_IRDEF(WF_AD_DIFF_HI)) == (0ULL WF_AD_RULES(WF_AD_RULE_HI)),
               "every WF_OPF_DIFF op needs a derivative rule in src/ad/rules.c (and only those)");

const wf_ad_rule *wf_ad_rule_of(wf_op op) {
  if ((unsigned)op >= WF_OP__COUNT || !rules_tab[op].fn) return NULL;
  return &rules_tab[op];
}
