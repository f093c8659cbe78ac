/*
** ad.c -- reverse mode on the IR: forward replay, then the reverse sweep.
**
** The adjoint kernel is a new function; the primal is only read. Layout of
** the adjoint kernel body:
**
**   given_k = shape(adj_k, 0) != 0         one flag per adjoint array
**   <replay>      the primal body, pruned to what the reverse reads, without
**                 stores, atomics, prints and traps
**   <sweep>       adjoint code, instructions in reverse order, rules from
**                 rules.c; regions reversed as below
**   ret
**
** Need analysis (need[]): a rule declares what it reads (rules.c); what the
** replay needs is the closure of that over operands, plus every branch
** condition, loop bound and while condition, plus loop-carried "slots"
** (init, block param, yield, result) as a unit. Replays clone only
** instructions with a needed result; unneeded yields become `undef`.
**
** Regions. The reverse of a block B (wf_ad_reverse_region) replays B at
** the current emission point (so B's values are visible), seeds the
** adjoints of B's terminator operands, and sweeps B backwards. Adjoints of values
** defined outside a region and used inside it ("captured") flow through
** the reverse region as its results / loop-carried values.
**
**   if:     %caps' = if %c { reverse(then) } else { reverse(else) }
**
** for and while loops are reversed in loop.c (the fused form of a summing
** for loop in fuse.c), with the helpers declared in ad_int.h.
**
** Errors (unsupported constructs) are positioned "chunk:line: autodiff:
** ..." and unwind with longjmp to wf_ad_kernel, which removes the
** half-built function; no FFI or Lua frames are crossed.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ad/ad_int.h"

/* ======================================================================
** errors and scratch memory
** ====================================================================== */
static const char *chunkname(const wf_func *fn) {
  const char *c = fn->chunk && *fn->chunk ? fn->chunk : "?";
  return (*c == '@' || *c == '=') ? c + 1 : c;
}

void wf_ad_fail(wf_adctx *A, const wf_inst *at, const char *fmt, ...) {
  int k;
  if (at && at->loc.line > 0)
    k = snprintf(A->msg, sizeof A->msg, "%s:%d: ", chunkname(A->pf), at->loc.line);
  else
    k = snprintf(A->msg, sizeof A->msg, "%s: ", chunkname(A->pf));
  if (k < 0 || (size_t)k >= sizeof A->msg) k = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(A->msg + k, sizeof A->msg - (size_t)k, fmt, ap);
  va_end(ap);
  longjmp(A->jb, 1);
}

static _Noreturn void oom(wf_adctx *A) {
  wf_ad_fail(A, NULL, "autodiff: out of memory");
}

void *wf_ad_scratch(wf_adctx *A, size_t n) {
  if (A->nallocs == A->capallocs) {
    int nc = A->capallocs ? A->capallocs * 2 : 16;
    void **na = realloc(A->allocs, (size_t)nc * sizeof(void *));
    if (!na) oom(A);
    A->allocs = na;
    A->capallocs = nc;
  }
  void *p = calloc(1, n ? n : 1);
  if (!p) oom(A);
  A->allocs[A->nallocs++] = p;
  return p;
}

/* ======================================================================
** emission helpers
** ====================================================================== */
wf_inst *wf_ad_emit(wf_adctx *A, wf_op op, int nargs, const wf_val *args, int nres,
                    const wf_type *const *rtypes, int nblocks) {
  wf_inst *in = wf_b_inst(&A->b, op, nargs, args, nres, rtypes, nblocks);
  if (!in) oom(A);
  return in;
}

static wf_val ok(wf_adctx *A, wf_val v) {
  if (v < 0) oom(A);
  return v;
}
wf_val wf_ad_op1(wf_adctx *A, wf_op op, const wf_type *t, wf_val a) {
  return ok(A, wf_b_op1(&A->b, op, t, a));
}
wf_val wf_ad_op2(wf_adctx *A, wf_op op, const wf_type *t, wf_val a, wf_val b) {
  return ok(A, wf_b_op2(&A->b, op, t, a, b));
}
wf_val wf_ad_op3(wf_adctx *A, wf_op op, const wf_type *t, wf_val a, wf_val b, wf_val c) {
  return ok(A, wf_b_op3(&A->b, op, t, a, b, c));
}
wf_val wf_ad_zero(wf_adctx *A, const wf_type *t) {
  return wf_ad_emit(A, WF_OP_UNDEF, 0, NULL, 1, &t, 0)->res[0];
}
wf_val wf_ad_constf(wf_adctx *A, const wf_type *t, double x) {
  return ok(A, wf_b_constf(&A->b, t, x));
}
wf_val wf_ad_consti(wf_adctx *A, const wf_type *t, int64_t x) {
  return ok(A, wf_b_consti(&A->b, t, x));
}
wf_val wf_ad_extract(wf_adctx *A, wf_val agg, int i) {
  return ok(A, wf_b_extract(&A->b, agg, i));
}
wf_val wf_ad_insert(wf_adctx *A, wf_val agg, int i, wf_val v) {
  return ok(A, wf_b_insert(&A->b, agg, i, v));
}
wf_val wf_ad_extractd(wf_adctx *A, wf_val agg, wf_val k) {
  return ok(A, wf_b_extractd(&A->b, agg, k));
}
wf_val wf_ad_insertd(wf_adctx *A, wf_val agg, wf_val k, wf_val v) {
  return ok(A, wf_b_insertd(&A->b, agg, k, v));
}

const wf_type *wf_ad_i32t(wf_adctx *A) {
  return wf_t_int(A->T, 32, 1);
}
const wf_type *wf_ad_boolt(wf_adctx *A) {
  return wf_t_bool(A->T);
}
const wf_type *wf_ad_ptype(wf_adctx *A, wf_val v) {
  return A->pf->vals[v].type;
}

#define newblock wf_ad_newblock

/* Switch emission into block bl; returns the block to come back to. */
wf_block *wf_ad_enter(wf_adctx *A, wf_block *bl) {
  wf_block *old = A->b.block;
  A->b.block = bl;
  return old;
}

wf_block *wf_ad_newblock(wf_adctx *A, wf_inst *owner, int k, int np, const wf_type *const *pt) {
  wf_block *bl = wf_b_newblock(A->af, np, pt);
  if (!bl) oom(A);
  for (int i = 0; i < np; i++)
    if (bl->params[i] < 0) oom(A);
  wf_inst_set_block(owner, k, bl);
  return bl;
}

void wf_ad_if_begin(wf_adctx *A, wf_ad_if *s, wf_val cond, int nres, const wf_type *const *rtypes) {
  s->in = wf_ad_emit(A, WF_OP_IF, 1, &cond, nres, rtypes, 2);
  newblock(A, s->in, 0, 0, NULL);
  newblock(A, s->in, 1, 0, NULL);
  s->saved_block = A->b.block;
  s->saved_before = A->b.before;
  A->b.block = s->in->blocks[0];
  A->b.before = NULL;
}

void wf_ad_if_else(wf_adctx *A, wf_ad_if *s, const wf_val *yt) {
  wf_ad_emit(A, WF_OP_YIELD, s->in->nres, yt, 0, NULL, 0);
  A->b.block = s->in->blocks[1];
}

void wf_ad_if_end(wf_adctx *A, wf_ad_if *s, const wf_val *ye) {
  wf_ad_emit(A, WF_OP_YIELD, s->in->nres, ye, 0, NULL, 0);
  A->b.block = s->saved_block;
  A->b.before = s->saved_before;
}

/* ======================================================================
** values: types, replay map, adjoint accumulation
** ====================================================================== */
int wf_ad_difft(const wf_type *t) {
  if (!t) return 0;
  switch (t->kind) {
  case WF_T_FLOAT: return 1;
  case WF_T_VEC:
  case WF_T_MAT:
  case WF_T_QUAT:
  case WF_T_TRANSFORM: return t->elem && t->elem->kind == WF_T_FLOAT;
  case WF_T_STRUCT:
    for (int i = 0; i < t->nfields; i++)
      if (wf_ad_difft(t->fields[i].type)) return 1;
    return 0;
  default: return 0;
  }
}

wf_val wf_ad_primal(wf_adctx *A, wf_val v) {
  if (v < 0 || v >= A->np || A->map[v] < 0)
    wf_ad_fail(A, v >= 0 && v < A->np ? A->pf->vals[v].def : NULL,
               "autodiff: internal error: value %%%d is not replayed", (int)v);
  return A->map[v];
}

/* The replayed v if the replay computes it, else a zero placeholder (for
** yields and loop inits of slots nobody reads). */
wf_val wf_ad_tmap(wf_adctx *A, wf_val v) {
  return A->need[v] ? wf_ad_primal(A, v) : wf_ad_zero(A, wf_ad_ptype(A, v));
}

/* Is adjoint-function value v a zero placeholder (wf_ad_zero)? Adding it
** is skipped: no `x + 0` is left for the backend, which may not fold it
** (x + 0.0 is not x for x = -0.0; an adjoint's sign of zero is moot). */
static int is_zero(wf_adctx *A, wf_val v) {
  const wf_inst *d = v >= 0 && v < A->af->nvals ? A->af->vals[v].def : NULL;
  return d && d->op == WF_OP_UNDEF;
}

/* Component i of aggregate adjoint x without new code when x is a zero,
** an agg or an insert (WF_NOVAL for a zero component); else an extract. */
static wf_val comp(wf_adctx *A, wf_val x, int i) {
  for (;;) {
    const wf_inst *d = x >= 0 && x < A->af->nvals ? A->af->vals[x].def : NULL;
    if (!d) break;
    if (d->op == WF_OP_UNDEF) return WF_NOVAL;
    if (d->op == WF_OP_AGG && i < d->nargs) return is_zero(A, d->args[i]) ? WF_NOVAL : d->args[i];
    if (d->op != WF_OP_INSERT) break;
    if (d->imm == i) return is_zero(A, d->args[1]) ? WF_NOVAL : d->args[1];
    x = d->args[0];
  }
  return wf_ad_extract(A, x, i);
}

/* x + y for adjoints of type t (WF_NOVAL and zero placeholders are zero);
** componentwise for aggregates; non-float components are left as they
** are in x (zero). */
static wf_val addv(wf_adctx *A, const wf_type *t, wf_val x, wf_val y) {
  if (x < 0 || is_zero(A, x)) return y < 0 ? x : y;
  if (y < 0 || is_zero(A, y)) return x;
  if (t->kind == WF_T_FLOAT) return wf_ad_op2(A, WF_OP_ADD, t, x, y);
  /* the adjoint of a local array's dynamic read: add into one component */
  const wf_inst *dy = A->af->vals[y].def;
  if (dy && dy->op == WF_OP_INSERTD && is_zero(A, dy->args[0])) {
    wf_val k = dy->args[1], v = dy->args[2];
    const wf_type *ct = wf_t_component(A->T, t, 0);
    wf_val s = addv(A, ct, ok(A, wf_b_extractd(&A->b, x, k)), v);
    return ok(A, wf_b_insertd(&A->b, x, k, s));
  }
  int n = wf_t_arity(t);
  if (n == 0 || !wf_ad_difft(t)) return x;
  wf_val *c = wf_ad_scratch(A, sizeof(wf_val) * (size_t)n);
  for (int i = 0; i < n; i++) {
    const wf_type *ct = wf_t_component(A->T, t, i);
    wf_val xi = comp(A, x, i);
    if (!wf_ad_difft(ct)) {
      c[i] = xi >= 0 ? xi : wf_ad_zero(A, ct);
      continue;
    }
    wf_val s = addv(A, ct, xi, comp(A, y, i));
    c[i] = s >= 0 ? s : wf_ad_zero(A, ct);
  }
  return ok(A, wf_b_agg(&A->b, t, n, c));
}

/* Kernel parameters: their adjoints are never returned (scalars) or go
** through the adjoint arrays (arrays), so nothing accumulates into them. */
static int is_fparam(wf_adctx *A, wf_val v) {
  return !A->acc_params && A->pf->vals[v].def == NULL && A->pf->vals[v].block == NULL;
}

void wf_ad_acc(wf_adctx *A, wf_val v, wf_val contrib) {
  if (v < 0 || contrib < 0 || is_fparam(A, v)) return;
  const wf_type *t = wf_ad_ptype(A, v);
  if (!wf_ad_difft(t)) return;
  A->adj[v] = addv(A, t, A->adj[v], contrib);
}

/* The adjoint of v as a concrete value (zero when nothing accumulated). */
wf_val wf_ad_adjz(wf_adctx *A, wf_val v) {
  return A->adj[v] >= 0 ? A->adj[v] : wf_ad_zero(A, wf_ad_ptype(A, v));
}

wf_val wf_ad_shadow(wf_adctx *A, const wf_inst *at, wf_val arr) {
  if (arr < 0 || A->shadow[arr] < 0)
    wf_ad_fail(A, at,
               "autodiff: cannot differentiate this array access: the array must be a kernel "
               "parameter or a view of one");
  return A->shadow[arr];
}

wf_val wf_ad_present(wf_adctx *A, const wf_inst *at, wf_val arr) {
  if (arr < 0 || A->present[arr] < 0) wf_ad_shadow(A, at, -1);
  return A->present[arr];
}

/* ======================================================================
** op classes
** ====================================================================== */
static int is_term(wf_op op) {
  return (wf_op_flags(op) & WF_OPF_TERM) != 0;
}

/* Stores and atomics: their adjoint comes from the written element. */
static int is_memwrite(wf_op op) {
  return (wf_op_flags(op) & WF_OPF_WRITE) != 0;
}

/* Does this instance of a differentiable op carry adjoints? (float-typed
** result, or for stores and atomic adds, a float-typed value). */
int wf_ad_inst_diff(wf_adctx *A, const wf_inst *in) {
  if (is_memwrite(in->op))
    return in->nargs > 0 && wf_ad_difft(wf_ad_ptype(A, in->args[in->nargs - 1]));
  return in->nres > 0 && wf_ad_difft(wf_ad_ptype(A, in->res[0]));
}

#define inst_diff wf_ad_inst_diff

/* Number of leading operands (array + indices) of a memory access. */
static int mem_nidx(const wf_inst *in) {
  return in->op == WF_OP_LOAD ? in->nargs : in->nargs - 1;
}

/* ======================================================================
** custom gradients of weft.func calls
** ====================================================================== */
/* Index of the module function named <callee name><suffix>, or -1. */
static int companion(const wf_module *m, int callee, const char *suffix) {
  if (callee < 0 || callee >= m->nfuncs) return -1;
  char name[256];
  snprintf(name, sizeof name, "%s%s", m->funcs[callee]->name, suffix);
  return wf_module_find((wf_module *)m, name);
}

/* Is a call of function `callee` kept for differentiation? When the callee
** has a custom gradient or a replay function (the replay must not redo
** its side effects, so its body cannot be inlined into the replay). */
static int kept_callee(const wf_module *m, int callee) {
  return companion(m, callee, WF_AD_GRAD_SUFFIX) >= 0 ||
         companion(m, callee, WF_AD_REPLAY_SUFFIX) >= 0;
}

static int custom_call(wf_adctx *A, const wf_inst *in) {
  return in->op == WF_OP_CALL && kept_callee(A->m, (int)in->imm);
}

/* Does a weft.func body read or write float array elements (whose
** gradients only its own adjoint could give)? */
static int func_memdiff(const wf_func *f, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_LOAD && wf_ad_difft(f->vals[in->res[0]].type)) return 1;
    if (is_memwrite(in->op) && wf_ad_difft(f->vals[in->args[in->nargs - 1]].type)) return 1;
    for (int k = 0; k < in->nblocks; k++)
      if (func_memdiff(f, in->blocks[k])) return 1;
  }
  return 0;
}

static int has_effects(const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (is_memwrite(in->op) || in->op == WF_OP_PRINT || in->op == WF_OP_CALL) return 1;
    for (int k = 0; k < in->nblocks; k++)
      if (has_effects(in->blocks[k])) return 1;
  }
  return 0;
}

/* The function the replay calls: <f>$replay if given; else f itself,
** which must then be free of side effects (the forward launch did them). */
static int replay_callee(wf_adctx *A, const wf_inst *in) {
  int r = companion(A->m, (int)in->imm, WF_AD_REPLAY_SUFFIX);
  if (r >= 0) return r;
  const wf_func *f = A->m->funcs[in->imm];
  if (has_effects(f->body))
    wf_ad_fail(A, in,
               "autodiff: weft.func '%s' has a custom gradient and side effects (stores, atomics, "
               "prints or calls): give it a replay function too",
               f->name);
  return (int)in->imm;
}

/* Checks the custom gradient's signature against the call: params = the
** callee's params then one adjoint per result; results = the adjoints of
** the callee's differentiable params, in order. */
static const wf_func *grad_of(wf_adctx *A, const wf_inst *in) {
  const wf_func *f = A->m->funcs[in->imm];
  const wf_func *g = A->m->funcs[companion(A->m, (int)in->imm, WF_AD_GRAD_SUFFIX)];
  int nd = 0, ok = g->nparams == f->nparams + f->nret;
  for (int i = 0; ok && i < f->nparams; i++) {
    const wf_type *t = f->vals[f->params[i]].type;
    ok = g->vals[g->params[i]].type == t;
    if (ok && wf_ad_difft(t)) ok = nd < g->nret && g->rettypes[nd++] == t;
  }
  for (int j = 0; ok && j < f->nret; j++)
    ok = g->vals[g->params[f->nparams + j]].type == f->rettypes[j];
  if (!ok || nd != g->nret)
    wf_ad_fail(A, in,
               "autodiff: the custom gradient of weft.func '%s' must take its arguments and the "
               "adjoint of each result, and return the adjoint of each float argument in order",
               f->name);
  return g;
}

/* Replay of a kept call: call the replay function on the replayed args. */
static void replay_call(wf_adctx *A, const wf_inst *in) {
  int callee = replay_callee(A, in);
  wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(in->nargs + 1));
  for (int k = 0; k < in->nargs; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  const wf_type **rt = wf_ad_scratch(A, sizeof(*rt) * (size_t)(in->nres + 1));
  for (int j = 0; j < in->nres; j++)
    rt[j] = wf_ad_ptype(A, in->res[j]);
  wf_inst *c = wf_ad_emit(A, WF_OP_CALL, in->nargs, a, in->nres, rt, 0);
  c->imm = callee;
  for (int j = 0; j < in->nres; j++)
    A->map[in->res[j]] = c->res[j];
}

static void reverse_body(wf_adctx *A, const wf_inst *in);

/* Reverse of a kept call: <f>$grad(args..., adj(results)...) gives the
** adjoints of the float args. */
static void reverse_call(wf_adctx *A, const wf_inst *in) {
  int any = 0;
  for (int j = 0; j < in->nres; j++)
    any |= A->adj[in->res[j]] >= 0;
  if (companion(A->m, (int)in->imm, WF_AD_GRAD_SUFFIX) < 0) {
    /* a replay function only: f's own body is differentiated (its replay
    ** recomputes what f's adjoint reads), when a gradient flows through f */
    const wf_func *f = A->m->funcs[in->imm];
    int flows = 0;
    for (int j = 0; j < in->nres; j++)
      flows |= A->adj[in->res[j]] >= 0 && !is_zero(A, A->adj[in->res[j]]);
    if (flows || func_memdiff(f, f->body)) reverse_body(A, in);
    return;
  }
  if (!any) return;
  const wf_func *g = grad_of(A, in);
  int na = in->nargs + in->nres;
  wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(na + 1));
  for (int k = 0; k < in->nargs; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  for (int j = 0; j < in->nres; j++)
    a[in->nargs + j] = wf_ad_adjz(A, in->res[j]);
  wf_inst *c = wf_ad_emit(A, WF_OP_CALL, na, a, g->nret, g->rettypes, 0);
  c->imm = companion(A->m, (int)in->imm, WF_AD_GRAD_SUFFIX);
  int r = 0;
  for (int k = 0; k < in->nargs; k++)
    if (wf_ad_difft(wf_ad_ptype(A, in->args[k]))) wf_ad_acc(A, in->args[k], c->res[r++]);
}

/* ======================================================================
** need analysis
** ====================================================================== */
static int mark(wf_adctx *A, wf_val v) {
  if (v < 0 || A->need[v]) return 0;
  A->need[v] = 1;
  return 1;
}

static int need_if(wf_adctx *A, wf_inst *in) {
  int ch = mark(A, in->args[0]);
  for (int j = 0; j < in->nres; j++)
    if (A->need[in->res[j]])
      for (int k = 0; k < 2; k++)
        ch |= mark(A, in->blocks[k]->last->args[j]);
  for (int k = 0; k < in->nblocks; k++)
    ch |= wf_ad_need_block(A, in->blocks[k]);
  return ch;
}

/* A carried slot is needed as a whole: init, block param, yield, result. */
static int need_for(wf_adctx *A, wf_inst *in) {
  wf_block *B = in->blocks[0];
  int ch = mark(A, in->args[0]) | mark(A, in->args[1]) | mark(A, in->args[2]);
  for (int j = 0; j < in->nres; j++)
    if (A->need[in->res[j]] || A->need[B->params[1 + j]]) {
      ch |= mark(A, in->res[j]) | mark(A, B->params[1 + j]);
      ch |= mark(A, in->args[3 + j]) | mark(A, B->last->args[j]);
    }
  return ch | wf_ad_need_block(A, B);
}

static int need_while(wf_adctx *A, wf_inst *in) {
  wf_block *B0 = in->blocks[0], *B1 = in->blocks[1];
  wf_inst *c = B0->last, *y = B1->last;
  int ch = mark(A, c->args[0]);
  for (int j = 0; j < B0->nparams; j++)
    if (A->need[B0->params[j]]) ch |= mark(A, in->args[j]) | mark(A, y->args[j]);
  for (int j = 0; j < in->nres; j++)
    if (A->need[in->res[j]] || A->need[B1->params[j]])
      ch |= mark(A, c->args[1 + j]) | mark(A, in->res[j]) | mark(A, B1->params[j]);
  return ch | wf_ad_need_block(A, B0) | wf_ad_need_block(A, B1);
}

static int need_inst(wf_adctx *A, wf_inst *in) {
  int ch = 0, any = 0;
  for (int j = 0; j < in->nres; j++)
    any |= A->need[in->res[j]];
  if (any || custom_call(A, in))
    for (int k = 0; k < in->nargs; k++)
      ch |= mark(A, in->args[k]);
  /* a forwarded load is replayed as the stored value */
  if (in->op == WF_OP_LOAD && any && A->fwd[in->res[0]] >= 0) ch |= mark(A, A->fwd[in->res[0]]);
  const wf_ad_rule *r = wf_ad_rule_of(in->op);
  if (!r || !inst_diff(A, in)) return ch;
  if (r->reads & WF_AD_RD_ARGS)
    for (int k = 0; k < in->nargs; k++)
      ch |= mark(A, in->args[k]);
  if (r->reads & WF_AD_RD_RES) ch |= mark(A, in->res[0]);
  if (r->reads & WF_AD_RD_ARG0) ch |= mark(A, in->args[0]);
  if (r->reads & WF_AD_RD_ARG1) ch |= mark(A, in->args[1]);
  if (r->reads & WF_AD_RD_IDX)
    for (int k = 0; k < mem_nidx(in); k++)
      ch |= mark(A, in->args[k]);
  return ch;
}

/* One backward pass over bl; returns whether anything changed. */
int wf_ad_need_block(wf_adctx *A, wf_block *bl) {
  int ch = 0;
  for (wf_inst *in = bl->last; in; in = in->prev) {
    switch (in->op) {
    case WF_OP_IF: ch |= need_if(A, in); break;
    case WF_OP_FOR: ch |= need_for(A, in); break;
    case WF_OP_WHILE: ch |= need_while(A, in); break;
    default:
      if (!is_term(in->op)) ch |= need_inst(A, in);
    }
  }
  return ch;
}

/* ======================================================================
** captured values of a region
** ====================================================================== */
static void stamp_inside(wf_adctx *A, wf_block *bl, int32_t s) {
  for (int p = 0; p < bl->nparams; p++)
    A->stamp_in[bl->params[p]] = s;
  for (wf_inst *in = bl->first; in; in = in->next) {
    for (int j = 0; j < in->nres; j++)
      A->stamp_in[in->res[j]] = s;
    for (int k = 0; k < in->nblocks; k++)
      stamp_inside(A, in->blocks[k], s);
  }
}

static void add_use(wf_adctx *A, wf_val v, int32_t s, wf_ad_capset *cs) {
  if (v < 0 || A->stamp_in[v] == s || A->stamp_seen[v] == s) return;
  A->stamp_seen[v] = s;
  if (!wf_ad_difft(wf_ad_ptype(A, v)) || is_fparam(A, v)) return;
  if (cs->n == cs->cap) {
    int nc = cs->cap ? cs->cap * 2 : 8;
    wf_val *nv = wf_ad_scratch(A, sizeof(wf_val) * (size_t)nc);
    if (cs->n) memcpy(nv, cs->v, sizeof(wf_val) * (size_t)cs->n);
    cs->v = nv;
    cs->cap = nc;
  }
  cs->v[cs->n++] = v;
}

static void collect_uses(wf_adctx *A, wf_block *bl, int32_t s, wf_ad_capset *cs) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    for (int k = 0; k < in->nargs; k++)
      add_use(A, in->args[k], s, cs);
    /* a forwarded load inside passes its adjoint to the stored value,
    ** which may be defined outside: a use as well */
    if (in->op == WF_OP_LOAD && A->fwd && in->nres > 0) add_use(A, A->fwd[in->res[0]], s, cs);
    for (int k = 0; k < in->nblocks; k++)
      collect_uses(A, in->blocks[k], s, cs);
  }
}

/* The differentiable values defined outside region `in` and used inside.
** Their adjoints become concrete (zero if none yet) at the current point,
** so the reverse region can carry and yield them. */
wf_ad_capset wf_ad_captured(wf_adctx *A, const wf_inst *in) {
  wf_ad_capset cs = {0, 0, NULL};
  int32_t s = ++A->stamp;
  for (int k = 0; k < in->nblocks; k++)
    stamp_inside(A, in->blocks[k], s);
  for (int k = 0; k < in->nblocks; k++)
    collect_uses(A, in->blocks[k], s, &cs);
  for (int i = 0; i < cs.n; i++)
    if (A->adj[cs.v[i]] < 0) A->adj[cs.v[i]] = wf_ad_zero(A, wf_ad_ptype(A, cs.v[i]));
  return cs;
}

static int has_memdiff(wf_adctx *A, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if ((in->op == WF_OP_LOAD || is_memwrite(in->op)) && inst_diff(A, in)) return 1;
    for (int k = 0; k < in->nblocks; k++)
      if (has_memdiff(A, in->blocks[k])) return 1;
  }
  return 0;
}

/* Can any adjoint flow through region `in`? Only from its results or from
** the arrays it reads and writes. */
int wf_ad_region_active(wf_adctx *A, const wf_inst *in) {
  for (int j = 0; j < in->nres; j++)
    if (A->adj[in->res[j]] >= 0) return 1;
  for (int k = 0; k < in->nblocks; k++)
    if (has_memdiff(A, in->blocks[k])) return 1;
  return 0;
}

/* ======================================================================
** forward replay
** ====================================================================== */
static int any_needed(wf_adctx *A, const wf_inst *in) {
  for (int j = 0; j < in->nres; j++)
    if (A->need[in->res[j]]) return 1;
  return 0;
}

static const wf_type **ptypes_of(wf_adctx *A, int n, const wf_val *vals) {
  const wf_type **t = wf_ad_scratch(A, sizeof(*t) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++)
    t[i] = wf_ad_ptype(A, vals[i]);
  return t;
}

/* Emit the terminator of a replayed block: needed operands mapped, the
** rest zero. A condition's flag is always needed. */
static void replay_term(wf_adctx *A, const wf_inst *t) {
  wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(t->nargs + 1));
  for (int k = 0; k < t->nargs; k++)
    a[k] =
        (t->op == WF_OP_COND && k == 0) ? wf_ad_primal(A, t->args[0]) : wf_ad_tmap(A, t->args[k]);
  wf_ad_emit(A, t->op, t->nargs, a, 0, NULL, 0);
}

/* Clone a region instruction whose results are needed; the blocks are
** replayed (pruned) too. */
static void replay_region(wf_adctx *A, const wf_inst *in) {
  wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(in->nargs + 1));
  for (int k = 0; k < in->nargs; k++) {
    int always = in->op == WF_OP_IF ? k == 0 : in->op == WF_OP_FOR ? k < 3 : 0;
    a[k] = always ? wf_ad_primal(A, in->args[k]) : wf_ad_tmap(A, in->args[k]);
  }
  wf_inst *c =
      wf_ad_emit(A, in->op, in->nargs, a, in->nres, ptypes_of(A, in->nres, in->res), in->nblocks);
  c->imm = in->imm;
  for (int k = 0; k < in->nblocks; k++) {
    wf_block *pb = in->blocks[k];
    wf_block *nb = newblock(A, c, k, pb->nparams, ptypes_of(A, pb->nparams, pb->params));
    for (int p = 0; p < pb->nparams; p++)
      A->map[pb->params[p]] = nb->params[p];
    wf_block *old = wf_ad_enter(A, nb);
    wf_ad_replay_block(A, pb);
    replay_term(A, pb->last);
    A->b.block = old;
  }
  for (int j = 0; j < in->nres; j++)
    A->map[in->res[j]] = c->res[j];
}

int wf_ad_has_shadow(const wf_type *t) {
  if (t->kind == WF_T_ARRAY) return 1;
  if (t->kind != WF_T_STRUCT) return 0;
  for (int i = 0; i < t->nfields; i++)
    if (wf_ad_has_shadow(t->fields[i].type)) return 1;
  return 0;
}

/* An absent adjoint or tangent array has shape 0 (null headers, as for
** parameters). */
void wf_ad_shadow_extract(wf_adctx *A, const wf_inst *in) {
  if (in->op != WF_OP_EXTRACT || A->shadow[in->args[0]] < 0) return;
  const wf_type *rt = wf_ad_ptype(A, in->res[0]);
  if (!wf_ad_has_shadow(rt)) return;
  wf_val sv = A->shadow[in->args[0]];
  wf_inst *x = wf_ad_emit(A, WF_OP_EXTRACT, 1, &sv, 1, &rt, 0);
  x->imm = in->imm;
  A->shadow[in->res[0]] = x->res[0];
  if (rt->kind == WF_T_ARRAY) {
    const wf_type *i32 = wf_ad_i32t(A);
    wf_inst *sh = wf_ad_emit(A, WF_OP_SHAPE, 1, &x->res[0], 1, &i32, 0);
    sh->imm = 0;
    A->present[in->res[0]] =
        wf_ad_op2(A, WF_OP_NE, wf_ad_boolt(A), sh->res[0], wf_ad_consti(A, i32, 0));
  }
}

/* Clone one pure instruction; views also get their adjoint view. */
static void replay_plain(wf_adctx *A, const wf_inst *in) {
  wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(in->nargs + 1));
  for (int k = 0; k < in->nargs; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  wf_inst *c = wf_ad_emit(A, in->op, in->nargs, a, in->nres, ptypes_of(A, in->nres, in->res), 0);
  c->imm = in->imm;
  c->fimm = in->fimm;
  c->str = in->str;
  for (int j = 0; j < in->nres; j++)
    A->map[in->res[j]] = c->res[j];
  if (in->op == WF_OP_VIEW && A->shadow[in->args[0]] >= 0) {
    wf_val sa[2] = {A->shadow[in->args[0]], a[1]};
    const wf_type *vt = wf_ad_ptype(A, in->res[0]);
    A->shadow[in->res[0]] = wf_ad_emit(A, WF_OP_VIEW, 2, sa, 1, &vt, 0)->res[0];
    A->present[in->res[0]] = A->present[in->args[0]];
  }
  wf_ad_shadow_extract(A, in); /* a struct's arrays: their adjoints */
}

static void replay_inst(wf_adctx *A, const wf_inst *in) {
  A->b.loc = in->loc;
  switch (in->op) {
  case WF_OP_STORE:
  case WF_OP_PRINT:
  case WF_OP_TRAP: return; /* done by the forward launch */
  case WF_OP_ATOMIC_ADD:
  case WF_OP_ATOMIC_MIN:
  case WF_OP_ATOMIC_MAX:
  case WF_OP_ATOMIC_EXCH:
  case WF_OP_ATOMIC_CAS:
  case WF_OP_ATOMIC_AND:
  case WF_OP_ATOMIC_OR:
  case WF_OP_ATOMIC_XOR:
    /* Not redone; a needed old value is re-read, which is wrong: the
    ** check after the build fails if the adjoint really uses it. */
    if (A->need[in->res[0]]) {
      wf_val *a = wf_ad_scratch(A, sizeof(wf_val) * (size_t)in->nargs);
      for (int k = 0; k < in->nargs - 1; k++)
        a[k] = wf_ad_primal(A, in->args[k]);
      const wf_type *t = wf_ad_ptype(A, in->res[0]);
      A->map[in->res[0]] = wf_ad_emit(A, WF_OP_LOAD, in->nargs - 1, a, 1, &t, 0)->res[0];
      wf_ad_note_stale(A, A->map[in->res[0]], in);
    }
    return;
  case WF_OP_LOAD:
    if (!any_needed(A, in)) return;
    if (A->fwd[in->res[0]] >= 0) { /* what an earlier store left there */
      A->map[in->res[0]] = wf_ad_primal(A, A->fwd[in->res[0]]);
      return;
    }
    replay_plain(A, in);
    if (A->stale[in->res[0]]) wf_ad_note_stale(A, A->map[in->res[0]], in);
    return;
  case WF_OP_CALL:
    if (!custom_call(A, in))
      wf_ad_fail(A, in, "autodiff: call of function %d was not inlined before differentiation",
                 (int)in->imm);
    if (any_needed(A, in)) replay_call(A, in);
    return;
  case WF_OP_IF:
  case WF_OP_FOR:
  case WF_OP_WHILE:
    if (any_needed(A, in)) replay_region(A, in);
    return;
  default:
    if (is_term(in->op) || !any_needed(A, in)) return;
    replay_plain(A, in);
  }
}

/* Replays bl's instructions (not its terminator) at the emission point.
** bl's params must be mapped; stale mappings of bl's values are cleared
** first so that a value the replay skipped can never be read by mistake. */
void wf_ad_replay_block(wf_adctx *A, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next)
    for (int j = 0; j < in->nres; j++)
      A->map[in->res[j]] = WF_NOVAL;
  for (wf_inst *in = bl->first; in; in = in->next)
    replay_inst(A, in);
}

/* ======================================================================
** reverse sweep
** ====================================================================== */
static void reverse_inst(wf_adctx *A, wf_inst *in);

/* Replay bl with its params bound to pvals, seed the adjoints of its
** terminator's operands (seeds[j] for operand j, a condition's flag not
** counted; WF_NOVAL = none), then sweep bl backwards. Afterwards adj[] of
** bl's params and of captured values hold their accumulated adjoints. */
void wf_ad_reverse_region(wf_adctx *A, wf_block *bl, const wf_val *pvals, const wf_val *seeds) {
  for (int p = 0; p < bl->nparams; p++) {
    A->map[bl->params[p]] = pvals ? pvals[p] : WF_NOVAL;
    A->adj[bl->params[p]] = WF_NOVAL;
  }
  for (wf_inst *in = bl->first; in; in = in->next)
    for (int j = 0; j < in->nres; j++)
      A->adj[in->res[j]] = WF_NOVAL;
  wf_ad_replay_block(A, bl);
  wf_inst *t = bl->last;
  int off = t->op == WF_OP_COND ? 1 : 0;
  if (seeds)
    for (int j = 0; j + off < t->nargs; j++)
      wf_ad_acc(A, t->args[off + j], seeds[j]);
  for (wf_inst *in = is_term(t->op) ? t->prev : t; in; in = in->prev)
    reverse_inst(A, in);
}

wf_val *wf_ad_vals(wf_adctx *A, int n) {
  wf_val *v = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++)
    v[i] = WF_NOVAL;
  return v;
}

static void rev_if(wf_adctx *A, wf_inst *in) {
  if (!wf_ad_region_active(A, in)) return;
  wf_ad_capset cs = wf_ad_captured(A, in);
  wf_val *seeds = wf_ad_vals(A, in->nres), *saved = wf_ad_vals(A, cs.n), *y = wf_ad_vals(A, cs.n);
  for (int j = 0; j < in->nres; j++)
    seeds[j] = A->adj[in->res[j]];
  for (int i = 0; i < cs.n; i++)
    saved[i] = A->adj[cs.v[i]];
  wf_ad_if s;
  wf_ad_if_begin(A, &s, wf_ad_primal(A, in->args[0]), cs.n, ptypes_of(A, cs.n, cs.v));
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < cs.n; i++)
      A->adj[cs.v[i]] = saved[i];
    wf_ad_reverse_region(A, in->blocks[k], NULL, seeds);
    for (int i = 0; i < cs.n; i++)
      y[i] = A->adj[cs.v[i]];
    if (k == 0)
      wf_ad_if_else(A, &s, y);
    else
      wf_ad_if_end(A, &s, y);
  }
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = s.in->res[i];
}

static void reverse_inst(wf_adctx *A, wf_inst *in) {
  A->b.loc = in->loc;
  switch (in->op) {
  case WF_OP_IF: rev_if(A, in); return;
  case WF_OP_FOR: wf_ad_rev_for(A, in); return;
  case WF_OP_WHILE: wf_ad_rev_while(A, in); return;
  case WF_OP_CALL: reverse_call(A, in); return;
  default: break;
  }
  if ((in->op == WF_OP_ATOMIC_EXCH || in->op == WF_OP_ATOMIC_CAS) &&
      wf_ad_difft(wf_ad_ptype(A, in->args[0])->elem))
    /* which thread's value stays is known only after the launch: neither
    ** the written value nor the overwritten element gets a gradient */
    wf_ad_fail(A, in, "autodiff: weft.%s on an array of floats has no gradient",
               wf_op_name(in->op));
  const wf_ad_rule *r = wf_ad_rule_of(in->op);
  if (!r || !inst_diff(A, in)) return;
  if (in->op == WF_OP_LOAD && A->fwd[in->res[0]] >= 0) {
    /* a forwarded load is a copy of the stored value: its adjoint goes
    ** there directly (also when the array has no adjoint array) */
    wf_ad_acc(A, A->fwd[in->res[0]], A->adj[in->res[0]]);
    return;
  }
  if (is_memwrite(in->op)) {
    r->fn(A, in, NULL);
    return;
  }
  wf_val g = A->adj[in->res[0]];
  if (g < 0) return;
  if (wf_op_is_arith(in->op) && !wf_t_is_float(wf_ad_ptype(A, in->res[0])))
    wf_ad_fail(A, in, "autodiff: '%s' on a non-scalar value is not supported", wf_op_name(in->op));
  r->fn(A, in, &g);
}

/* ======================================================================
** entry point
** ====================================================================== */
static void check_calls(wf_adctx *A, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_CALL && !custom_call(A, in))
      wf_ad_fail(A, in, "autodiff: call of function %d was not inlined before differentiation",
                 (int)in->imm);
    for (int k = 0; k < in->nblocks; k++)
      check_calls(A, in->blocks[k]);
  }
}

/* Builds the adjoint function; errors longjmp back to wf_ad_kernel. */
static void build(wf_adctx *A, const char *name) {
  wf_func *pf = A->pf;
  check_calls(A, pf->body);
  int na = 0;
  for (int i = 0; i < pf->nparams; i++)
    na += wf_ad_has_shadow(wf_ad_ptype(A, pf->params[i]));
  const wf_type **pt = wf_ad_scratch(A, sizeof(*pt) * (size_t)(pf->nparams + na + 1));
  int q = pf->nparams;
  for (int i = 0; i < pf->nparams; i++) {
    pt[i] = wf_ad_ptype(A, pf->params[i]);
    if (wf_ad_has_shadow(pt[i])) pt[q++] = pt[i];
  }
  wf_func *af = wf_func_new(A->m, name, 1, q, pt, 0, NULL);
  if (!af) oom(A);
  af->chunk = pf->chunk;
  A->af = af;
  wf_b_init(&A->b, af, af->body);
  /* the adjoint arrays and their "given" flags */
  q = pf->nparams;
  for (int i = 0; i < pf->nparams; i++) {
    wf_val p = pf->params[i];
    A->map[p] = af->params[i];
    if (pt[i]->kind == WF_T_STRUCT && wf_ad_has_shadow(pt[i])) {
      A->shadow[p] = af->params[q++]; /* its arrays' adjoints (replay_plain) */
      continue;
    }
    if (pt[i]->kind != WF_T_ARRAY) continue;
    wf_val sh = af->params[q++];
    const wf_type *i32 = wf_ad_i32t(A);
    wf_inst *s = wf_ad_emit(A, WF_OP_SHAPE, 1, &sh, 1, &i32, 0);
    s->imm = 0;
    A->shadow[p] = sh;
    A->present[p] = wf_ad_op2(A, WF_OP_NE, wf_ad_boolt(A), s->res[0], wf_ad_consti(A, i32, 0));
  }
  wf_ad_memfacts(A);
  while (wf_ad_need_block(A, pf->body)) {
  }
  wf_ad_reverse_region(A, pf->body, NULL, NULL);
  A->b.loc = pf->body->last ? pf->body->last->loc : (wf_loc){0, 0};
  wf_ad_emit(A, WF_OP_RET, 0, NULL, 0, NULL, 0);
  wf_ad_check_stale(A);
}

static void ctx_free(wf_adctx *A) {
  if (!A) return;
  for (int i = 0; i < A->nallocs; i++)
    free(A->allocs[i]);
  free(A->allocs);
  free(A->map);
  free(A);
}

/* A context for differentiating pf (maps sized and cleared), or NULL. */
static wf_adctx *ctx_new(wf_module *m, wf_func *pf) {
  wf_adctx *A = calloc(1, sizeof(*A));
  int32_t np = pf->nvals;
  wf_val *maps = malloc(sizeof(wf_val) * 6 * (size_t)(np > 0 ? np : 1) + (size_t)np + 1);
  if (!A || !maps) {
    free(A);
    free(maps);
    return NULL;
  }
  A->m = m;
  A->T = m->types;
  A->pf = pf;
  A->np = np;
  A->map = maps;
  A->adj = maps + np;
  A->shadow = maps + 2 * np;
  A->present = maps + 3 * np;
  A->stamp_in = maps + 4 * np;
  A->stamp_seen = maps + 5 * np;
  A->need = (uint8_t *)(maps + 6 * np);
  for (int32_t i = 0; i < 4 * np; i++)
    maps[i] = WF_NOVAL;
  for (int32_t i = 4 * np; i < 6 * np; i++)
    maps[i] = 0;
  memset(A->need, 0, (size_t)np);
  wf_func_fix_parents(pf);
  return A;
}

/* Reverse of a call of f that has a replay function but no custom
** gradient: f's body is reversed in place, in a context of its own
** (values of f), emitting into the kernel's adjoint at the current point:
** f's params are bound to the replayed arguments (arrays to their adjoint
** arrays), its results seeded with the adjoints of the call's results; the
** adjoints f's params collect go to the call's arguments. f's replay
** inside runs without side effects, as the kernel's does; values it would
** re-read wrongly are checked with the kernel's. The same serves a native
** query whose gradient is a "<row>$diff" function (rules.c): that one
** also takes the native's result as it was (with_res). */
static void reverse_body(wf_adctx *A, const wf_inst *in) {
  wf_ad_reverse_func(A, in, (int)in->imm, 0);
}

void wf_ad_nested(wf_adctx *A, int fi, const wf_inst *in, wf_ad_nested_fn fn, void *arg) {
  wf_adctx *B = ctx_new(A->m, A->m->funcs[fi]);
  if (!B) oom(A);
  B->af = A->af;
  B->b = A->b;
  B->root = A->root ? A->root : A;
  B->acc_params = 1;
  if (setjmp(B->jb)) { /* pass the error on to the kernel's context */
    snprintf(A->msg, sizeof A->msg, "%s", B->msg);
    ctx_free(B);
    longjmp(A->jb, 1);
  }
  fn(A, B, in, arg);
  A->b = B->b;
  A->b.loc = in->loc;
  ctx_free(B);
}

typedef struct reverse_arg {
  int with_res;
  wf_val *ga; /* the adjoints of in's arguments (A's scratch) */
} reverse_arg;

static void reverse_in(wf_adctx *A, wf_adctx *B, const wf_inst *in, void *arg) {
  reverse_arg *ra = arg;
  wf_func *f = B->pf;
  for (int k = 0; k < f->nparams && k < in->nargs; k++) {
    wf_val p = f->params[k], a = in->args[k];
    B->map[p] = wf_ad_primal(A, a);
    B->shadow[p] = A->shadow[a];
    B->present[p] = A->present[a];
  }
  for (int j = 0; ra->with_res && j < in->nres && in->nargs + j < f->nparams; j++)
    B->map[f->params[in->nargs + j]] = wf_ad_primal(A, in->res[j]);
  wf_ad_memfacts(B);
  while (wf_ad_need_block(B, f->body)) {
  }
  wf_val *seeds = wf_ad_scratch(B, sizeof(wf_val) * (size_t)(in->nres + 1));
  for (int j = 0; j < in->nres; j++)
    seeds[j] = A->adj[in->res[j]];
  wf_ad_reverse_region(B, f->body, NULL, seeds);
  for (int k = 0; k < in->nargs; k++)
    ra->ga[k] = k < f->nparams ? B->adj[f->params[k]] : WF_NOVAL;
}

void wf_ad_reverse_func(wf_adctx *A, const wf_inst *in, int fi, int with_res) {
  reverse_arg ra = {with_res, wf_ad_vals(A, in->nargs)};
  wf_ad_nested(A, fi, in, reverse_in, &ra);
  for (int k = 0; k < in->nargs; k++)
    wf_ad_acc(A, in->args[k], ra.ga[k]);
}

/* Runs build(A, "<prefix><kernel name>") in a fresh context; see
** ad_int.h. */
int wf_ad_transform(wf_module *m, int kernel_index, const char *prefix, wf_ad_build_fn build_fn,
                    const char *const *names, char *err, size_t n) {
  if (!m || kernel_index < 0 || kernel_index >= m->nfuncs) {
    snprintf(err, n, "autodiff: no function %d in the module", kernel_index);
    return -1;
  }
  wf_func *pf = m->funcs[kernel_index];
  if (!pf->is_kernel) {
    snprintf(err, n, "autodiff: '%s' is not a kernel", pf->name);
    return -1;
  }
  size_t nl = strlen(pf->name) + strlen(prefix) + 1;
  char *name = malloc(nl);
  if (!name) {
    snprintf(err, n, "autodiff: out of memory");
    return -1;
  }
  snprintf(name, nl, "%s%s", prefix, pf->name);
  if (wf_module_find(m, name) >= 0) {
    free(name);
    return 0;
  }
  wf_adctx *A = ctx_new(m, pf);
  if (!A) {
    free(name);
    snprintf(err, n, "autodiff: out of memory");
    return -1;
  }
  A->names = names;
  int nf0 = m->nfuncs;
  if (setjmp(A->jb)) {
    if (m->nfuncs > nf0) { /* drop the half-built function */
      free(m->funcs[nf0]->vals);
      m->nfuncs = nf0;
    }
    snprintf(err, n, "%s", A->msg);
    ctx_free(A);
    free(name);
    return -1;
  }
  build_fn(A, name);
  ctx_free(A);
  free(name);
  return 0;
}

/* ---- calls kept for custom gradients ----
** A module straight from the front end (not optimized) still holds its
** calls. Calls of functions with a custom gradient must reach the
** transform; every other call is inlined first. The inline pass inlines
** every CALL, so kept calls are hidden from it for its duration: their op
** is switched to PRINT (which the pass copies as it is) and tagged through
** `str` with a private marker, then switched back everywhere, including
** copies made by inlining a function that holds one. */
static const char kept_marker[] = "(weft autodiff: kept call)";

static void hide_kept(wf_module *m, wf_block *bl, int hide) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    if (hide && in->op == WF_OP_CALL && kept_callee(m, (int)in->imm)) {
      in->op = WF_OP_PRINT;
      in->str = kept_marker;
    } else if (!hide && in->op == WF_OP_PRINT && in->str == kept_marker) {
      in->op = WF_OP_CALL;
      in->str = NULL;
    }
    for (int k = 0; k < in->nblocks; k++)
      hide_kept(m, in->blocks[k], hide);
  }
}

static int has_calls(const wf_block *bl) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_CALL) return 1;
    for (int k = 0; k < in->nblocks; k++)
      if (has_calls(in->blocks[k])) return 1;
  }
  return 0;
}

int wf_ad_inline_plain(wf_module *m, char *err, size_t n) {
  for (int f = 0; f < m->nfuncs; f++)
    hide_kept(m, m->funcs[f]->body, 1);
  int rc = wf_pass_inline(m, err, n);
  for (int f = 0; f < m->nfuncs; f++)
    hide_kept(m, m->funcs[f]->body, 0);
  return rc;
}

int wf_ad_kernel_named(wf_module *m, int kernel_index, const char *const *names, char *err,
                       size_t n) {
  /* any function's calls: the kernel's, and those of the functions autodiff
  ** reverses in place of a native (rules.c: "<row>$diff") */
  int calls = 0;
  for (int f = 0; m && kernel_index >= 0 && kernel_index < m->nfuncs && f < m->nfuncs; f++)
    calls |= has_calls(m->funcs[f]->body);
  if (calls && wf_ad_inline_plain(m, err, n) != 0) return -1;
  return wf_ad_transform(m, kernel_index, "adj_", build, names, err, n);
}

int wf_ad_kernel(wf_module *m, int kernel_index, char *err, size_t n) {
  return wf_ad_kernel_named(m, kernel_index, NULL, err, n);
}
