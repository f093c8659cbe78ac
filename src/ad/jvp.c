/*
** jvp.c -- forward mode (Jacobian-vector products) on the IR.
**
** The tangent kernel "jvp_<name>" takes the primal parameters, then one
** tangent array per ARRAY parameter (same type; "no tangent" is a header
** with shape[0] == 0, as for adjoint arrays). It runs the primal kernel
** (every store, atomic and print is done, so outputs are written) and
** carries beside every differentiable value its tangent:
**
**   x = a[i]              ->  tx = given(ta) ? ta[i] : 0
**   a[i] = v              ->  if given(ta): ta[i] = tv
**   atomic_add(a, i, v)   ->  if given(ta): atomic_add(ta, i, tv)
**
** Scalar kernel parameters have zero tangent (as they get no adjoint in
** reverse mode). The tangent of every other op comes from the tangent
** column of the rule table (rules.c).
**
** Control flow is easy in forward mode: regions get extra results and
** loop-carried slots for the tangents of their differentiable values, so
** a loop costs the same number of iterations as the primal loop, and no
** memory beyond the extra registers.
**
**   %r, %tr = if %c { ... yield %a, %ta } else { ... yield %b, %tb }
**   %s, %ts = for lo, hi, st iter(%s0, %ts0) { ^(%i, %s, %ts): ... }
**   while: tangents carried by both regions and passed by `condition`.
**
** A tangent that is known to be zero is not materialized (WF_NOVAL in the
** tangent map) until a region yield or a store needs a concrete value.
*/
#include <stdio.h>
#include <string.h>

#include "ad/ad_int.h"

static const wf_type *ptype(wf_adctx *A, wf_val v) {
  return A->pf->vals[v].type;
}

static int is_term(wf_op op) {
  return (wf_op_flags(op) & WF_OPF_TERM) != 0;
}

/* The tangent of v as a concrete value (zero when none). */
static wf_val tanz(wf_adctx *A, wf_val v) {
  return A->adj[v] >= 0 ? A->adj[v] : wf_ad_zero(A, ptype(A, v));
}

/* Indices of the differentiable values of a list. */
static int dslots(wf_adctx *A, int n, const wf_val *v, int *idx) {
  int nd = 0;
  for (int j = 0; j < n; j++)
    if (wf_ad_difft(ptype(A, v[j]))) idx[nd++] = j;
  return nd;
}

static int *ints(wf_adctx *A, int n) {
  return wf_ad_scratch(A, sizeof(int) * (size_t)(n + 1));
}
static wf_val *vals(wf_adctx *A, int n) {
  return wf_ad_scratch(A, sizeof(wf_val) * (size_t)(n + 1));
}
static const wf_type **types(wf_adctx *A, int n) {
  return wf_ad_scratch(A, sizeof(const wf_type *) * (size_t)(n + 1));
}

static void jvp_block(wf_adctx *A, wf_block *bl);

/* A cloned block: params = primal params then the tangents of their
** differentiable entries from index `skip` on (a for loop's induction
** variable has none). */
static wf_block *clone_block(wf_adctx *A, wf_inst *owner, int k, const wf_block *pb, int skip) {
  int np = pb->nparams;
  int *d = ints(A, np);
  int nd = np > skip ? dslots(A, np - skip, pb->params + skip, d) : 0;
  for (int e = 0; e < nd; e++)
    d[e] += skip;
  const wf_type **pt = types(A, np + nd);
  for (int j = 0; j < np; j++)
    pt[j] = ptype(A, pb->params[j]);
  for (int e = 0; e < nd; e++)
    pt[np + e] = pt[d[e]];
  wf_block *nb = wf_ad_newblock(A, owner, k, np + nd, pt);
  for (int j = 0; j < np; j++) {
    A->map[pb->params[j]] = nb->params[j];
    A->adj[pb->params[j]] = WF_NOVAL;
  }
  for (int e = 0; e < nd; e++)
    A->adj[pb->params[d[e]]] = nb->params[np + e];
  return nb;
}

/* The terminator of a cloned block: its operands (a condition's flag
** first), then the concrete tangents of the differentiable operands. */
static void clone_term(wf_adctx *A, const wf_inst *t) {
  int off = t->op == WF_OP_COND ? 1 : 0, nv = t->nargs - off;
  int *d = ints(A, nv);
  int nd = dslots(A, nv, t->args + off, d);
  wf_val *a = vals(A, t->nargs + nd);
  for (int k = 0; k < t->nargs; k++)
    a[k] = wf_ad_primal(A, t->args[k]);
  for (int e = 0; e < nd; e++)
    a[t->nargs + e] = tanz(A, t->args[off + d[e]]);
  A->b.loc = t->loc;
  wf_ad_emit(A, t->op, t->nargs + nd, a, 0, NULL, 0);
}

/* if / for / while: the region with tangent slots added after the primal
** operands, results and block params. */
static void jvp_region(wf_adctx *A, wf_inst *in) {
  int nfix = in->op == WF_OP_IF ? 1 : in->op == WF_OP_FOR ? 3 : 0;
  int ncar = in->nargs - nfix; /* carried inits (none for if) */
  int *dc = ints(A, ncar), *dr = ints(A, in->nres);
  int ndc = dslots(A, ncar, in->args + nfix, dc), ndr = dslots(A, in->nres, in->res, dr);
  wf_val *a = vals(A, in->nargs + ndc);
  for (int k = 0; k < in->nargs; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  for (int e = 0; e < ndc; e++)
    a[in->nargs + e] = tanz(A, in->args[nfix + dc[e]]);
  const wf_type **rt = types(A, in->nres + ndr);
  for (int j = 0; j < in->nres; j++)
    rt[j] = ptype(A, in->res[j]);
  for (int e = 0; e < ndr; e++)
    rt[in->nres + e] = rt[dr[e]];
  wf_inst *c = wf_ad_emit(A, in->op, in->nargs + ndc, a, in->nres + ndr, rt, in->nblocks);
  c->imm = in->imm;
  wf_block *saved = A->b.block;
  wf_inst *saved_before = A->b.before;
  for (int k = 0; k < in->nblocks; k++) {
    A->b.block = clone_block(A, c, k, in->blocks[k], in->op == WF_OP_FOR ? 1 : 0);
    A->b.before = NULL;
    jvp_block(A, in->blocks[k]);
    clone_term(A, in->blocks[k]->last);
  }
  A->b.block = saved;
  A->b.before = saved_before;
  for (int j = 0; j < in->nres; j++) {
    A->map[in->res[j]] = c->res[j];
    A->adj[in->res[j]] = WF_NOVAL;
  }
  for (int e = 0; e < ndr; e++)
    A->adj[in->res[dr[e]]] = c->res[in->nres + e];
}

/* A plain instruction: cloned, then its tangent from the rule table. */
static void jvp_plain(wf_adctx *A, const wf_inst *in) {
  wf_val *a = vals(A, in->nargs);
  for (int k = 0; k < in->nargs; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  const wf_type **rt = types(A, in->nres);
  for (int j = 0; j < in->nres; j++)
    rt[j] = ptype(A, in->res[j]);
  wf_inst *c = wf_ad_emit(A, in->op, in->nargs, a, in->nres, rt, 0);
  c->imm = in->imm;
  c->fimm = in->fimm;
  c->str = in->str;
  for (int j = 0; j < in->nres; j++) {
    A->map[in->res[j]] = c->res[j];
    A->adj[in->res[j]] = WF_NOVAL;
  }
  if (in->op == WF_OP_VIEW && A->shadow[in->args[0]] >= 0) {
    wf_val sa[2] = {A->shadow[in->args[0]], a[1]};
    A->shadow[in->res[0]] = wf_ad_emit(A, WF_OP_VIEW, 2, sa, 1, rt, 0)->res[0];
    A->present[in->res[0]] = A->present[in->args[0]];
  }
  wf_ad_shadow_extract(A, in); /* a struct's arrays: their tangents */
  const wf_ad_rule *r = wf_ad_rule_of(in->op);
  if (!r || !wf_ad_inst_diff(A, in)) return;
  if (wf_op_is_arith(in->op) && !wf_t_is_float(rt[0]))
    wf_ad_fail(A, in, "autodiff: '%s' on a non-scalar value is not supported", wf_op_name(in->op));
  wf_val *t = vals(A, in->nargs);
  for (int k = 0; k < in->nargs; k++)
    t[k] = A->adj[in->args[k]];
  wf_val tr = r->tan(A, in, t);
  if (in->nres > 0 && in->op != WF_OP_ATOMIC_ADD) A->adj[in->res[0]] = tr;
}

static void jvp_block(wf_adctx *A, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    A->b.loc = in->loc;
    switch (in->op) {
    case WF_OP_IF:
    case WF_OP_FOR:
    case WF_OP_WHILE: jvp_region(A, in); break;
    case WF_OP_CALL:
      wf_ad_fail(A, in, "autodiff: call of function %d was not inlined before differentiation",
                 (int)in->imm);
    default:
      if (!is_term(in->op)) jvp_plain(A, in);
    }
  }
}

/* Tangent of in's result through function B->pf's body: its params bound
** to in's arguments (with their tangents), then in's result (tangent
** zero); the body's clone and tangents are emitted at A's point. */
static void tangent_in(wf_adctx *A, wf_adctx *B, const wf_inst *in, void *arg) {
  wf_func *f = B->pf;
  for (int k = 0; k < f->nparams && k < in->nargs; k++) {
    wf_val p = f->params[k], a = in->args[k];
    B->map[p] = wf_ad_primal(A, a);
    B->adj[p] = A->adj[a];
    B->shadow[p] = A->shadow[a];
    B->present[p] = A->present[a];
  }
  for (int j = 0; j < in->nres && in->nargs + j < f->nparams; j++)
    B->map[f->params[in->nargs + j]] = wf_ad_primal(A, in->res[j]);
  jvp_block(B, f->body);
  const wf_inst *r = f->body->last;
  *(wf_val *)arg = r && r->op == WF_OP_RET && r->nargs > 0 ? B->adj[r->args[0]] : WF_NOVAL;
}

wf_val wf_ad_tangent_func(wf_adctx *A, const wf_inst *in, int fi) {
  wf_val t = WF_NOVAL;
  wf_ad_nested(A, fi, in, tangent_in, &t);
  return t;
}

/* Builds jvp_<name>: params, tangent arrays and their flags, the body. */
static void build_jvp(wf_adctx *A, const char *name) {
  wf_func *pf = A->pf;
  int na = 0;
  for (int i = 0; i < pf->nparams; i++)
    na += wf_ad_has_shadow(ptype(A, pf->params[i]));
  const wf_type **pt = types(A, pf->nparams + na);
  int q = pf->nparams;
  for (int i = 0; i < pf->nparams; i++) {
    pt[i] = ptype(A, pf->params[i]);
    if (wf_ad_has_shadow(pt[i])) pt[q++] = pt[i];
  }
  wf_func *af = wf_func_new(A->m, name, 1, q, pt, 0, NULL);
  if (!af) wf_ad_fail(A, NULL, "autodiff: out of memory");
  af->chunk = pf->chunk;
  A->af = af;
  wf_b_init(&A->b, af, af->body);
  const wf_type *i32 = wf_t_int(A->T, 32, 1);
  q = pf->nparams;
  for (int i = 0; i < pf->nparams; i++) {
    wf_val p = pf->params[i];
    A->map[p] = af->params[i];
    if (pt[i]->kind == WF_T_STRUCT && wf_ad_has_shadow(pt[i])) {
      A->shadow[p] = af->params[q++]; /* its arrays' tangents (wf_ad_shadow_extract) */
      continue;
    }
    if (pt[i]->kind != WF_T_ARRAY) continue;
    wf_val sh = af->params[q++];
    wf_inst *s = wf_ad_emit(A, WF_OP_SHAPE, 1, &sh, 1, &i32, 0);
    s->imm = 0;
    wf_val zero = wf_b_consti(&A->b, i32, 0);
    if (zero < 0) wf_ad_fail(A, NULL, "autodiff: out of memory");
    A->shadow[p] = sh;
    A->present[p] = wf_ad_op2(A, WF_OP_NE, wf_t_bool(A->T), s->res[0], zero);
  }
  jvp_block(A, pf->body);
  A->b.loc = pf->body->last ? pf->body->last->loc : (wf_loc){0, 0};
  wf_ad_emit(A, WF_OP_RET, 0, NULL, 0, NULL, 0);
}

/* Calls left by the front end are inlined first (custom gradients do not
** apply to forward mode: the tangent goes through the function's body). */
int wf_ad_jvp(wf_module *m, int kernel_index, char *err, size_t n) {
  if (m && kernel_index >= 0 && kernel_index < m->nfuncs && wf_pass_inline(m, err, n) != 0)
    return -1;
  return wf_ad_transform(m, kernel_index, "jvp_", build_jvp, NULL, err, n);
}
