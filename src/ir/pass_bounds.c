/*
** pass_bounds.c -- bounds checks the compiler can do once instead of per
** access (see "bounds checks" in ir.h for the marks and the CHECK op).
**
** Kernels are bounds-checked by default: every array index is compared
** (unsigned) with the extent of its axis. Two patterns cover the common
** kernels, and for them the per-access check goes:
**
**   launch   x[tid() + c] at the top level of the kernel body (executed by
**            every thread, before any region that may return or trap): the
**            indices of all threads are c .. dim - 1 + c, so one check per
**            launch of that range against the axis covers them.
**            `check %x, %t, <axis, launch, c>` goes before the access.
**   range    x[j + c] at the top level of the body of `for j = lo, hi, s`
**            with a constant step s = 1 or -1 and x (or the array x is a
**            view of) defined outside the loop: the access runs on every
**            iteration, so checking
**            lo + c .. hi + c before the loop (when it runs) covers it.
**            `check %x, %lo, %hi, <axis, down if s = -1, c>` goes before
**            the loop. When every thread runs that check with the same
**            operands (a loop at the top level of the kernel over bounds
**            made of parameters), it is marked hoist: once per launch.
**
** The access keeps its index and gets bit k of its imm (index k covered).
** Views count: a[i][j] through `view` checks a's axes 0 and 1, and a row
** taken in the thread (local row = m[i]) is checked as m's axis 1, which
** every row shares, so the check stays once per launch. Anything
** else (indices under an if, computed indices, while loops) keeps its
** per-access check, which is cheap but stops LLVM from vectorizing.
**
** A hoisted check fails before the loop or launch runs, so its message
** names the first index out of bounds of that access; when several
** accesses fail, it names the first in program order (a per-access check
** names the first to fail in iteration order).
**
** The pass runs last in the pipeline and may run again on a module it has
** seen (the autodiff transforms copy instructions with their marks into
** new kernels): it first removes its CHECKs and clears every mark, then
** derives them afresh, so reruns give the same IR.
*/
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static int is_access(wf_op op) {
  return op == WF_OP_LOAD || op == WF_OP_VIEW || (wf_op_flags(op) & WF_OPF_WRITE);
}

/* Number of index operands of an access (args[1 .. n]). */
static int nindices(const wf_func *fn, const wf_inst *in) {
  if (in->nargs < 2) return 0;
  const wf_type *t = wf_vtype(fn, in->args[0]);
  if (!t || t->kind != WF_T_ARRAY) return 0;
  int n = in->op == WF_OP_VIEW ? 1 : t->ndim;
  int extra = in->op == WF_OP_LOAD || in->op == WF_OP_VIEW ? 0 : 1;
  return 1 + n + extra == in->nargs && n <= 8 ? n : 0;
}

/* Removes the CHECKs of an earlier run and clears the access marks. */
static void strip(wf_block *bl) {
  wf_inst *in = bl->first;
  while (in) {
    wf_inst *next = in->next;
    if (in->op == WF_OP_CHECK) {
      wf_inst_unlink(in);
    } else {
      if (is_access(in->op)) in->imm = 0;
      for (int b = 0; b < in->nblocks; b++)
        strip(in->blocks[b]);
    }
    in = next;
  }
}

/* Does the instruction end a thread or a launch early (ret, trap), at any
** depth? Accesses after it are not run by every thread / iteration. */
static int may_exit(const wf_inst *in) {
  if (in->op == WF_OP_RET || in->op == WF_OP_TRAP) return 1;
  for (int b = 0; b < in->nblocks; b++)
    for (const wf_inst *x = in->blocks[b]->first; x; x = x->next)
      if (may_exit(x)) return 1;
  return 0;
}

/* The integer constant defining v, if any. */
static int const_of(const wf_func *fn, wf_val v, int64_t *c) {
  const wf_inst *d = v >= 0 ? fn->vals[v].def : NULL;
  const wf_type *t = v >= 0 ? fn->vals[v].type : NULL;
  if (!d || d->op != WF_OP_CONST || !t || t->kind != WF_T_INT) return 0;
  *c = d->imm;
  return 1;
}

/* v as base + c through a chain of adds and subtractions of constants
** (tid + 1, j - 1 + 1, 2 + j). Offsets stay small, so that no range
** computation can overflow. */
static wf_val affine(const wf_func *fn, wf_val v, int64_t *c) {
  *c = 0;
  for (int depth = 0; depth < 8; depth++) {
    const wf_inst *d = fn->vals[v].def;
    int64_t k;
    if (!d || d->nargs != 2 || (d->op != WF_OP_ADD && d->op != WF_OP_SUB)) break;
    if (const_of(fn, d->args[1], &k)) {
      *c += d->op == WF_OP_ADD ? k : -k;
      v = d->args[0];
    } else if (d->op == WF_OP_ADD && const_of(fn, d->args[0], &k)) {
      *c += k;
      v = d->args[1];
    } else {
      break;
    }
    if (*c <= -(1 << 20) || *c >= (1 << 20)) return WF_NOVAL;
  }
  return v;
}

/* Is v = base + c? */
static int offset_of(const wf_func *fn, wf_val v, wf_val base, int64_t *c) {
  return affine(fn, v, c) == base;
}

/* Is v = tid d + c? Returns the tid value. */
static wf_val tid_base(const wf_func *fn, wf_val v, int64_t *c) {
  wf_val b = affine(fn, v, c);
  const wf_inst *d = b >= 0 ? fn->vals[b].def : NULL;
  return d && d->op == WF_OP_TID ? b : WF_NOVAL;
}

static int is_param(const wf_func *fn, wf_val v) {
  for (int i = 0; i < fn->nparams; i++)
    if (fn->params[i] == v) return 1;
  return 0;
}

/* Is value v defined inside region instruction r (or by one of its
** blocks' parameters)? */
static int defined_in(const wf_func *fn, wf_val v, const wf_inst *r) {
  const wf_valinfo *vi = &fn->vals[v];
  const wf_block *bl = vi->def ? vi->def->parent : vi->block;
  while (bl) {
    const wf_inst *owner = bl->parent;
    if (!owner) return 0;
    if (owner == r) return 1;
    bl = owner->parent;
  }
  return 0;
}

/* A CHECK already placed (so two accesses share one). */
typedef struct placed {
  wf_inst *at; /* the instruction it was placed for: the access or the loop */
  wf_val arr, idx;
  int64_t imm;
} placed;

typedef struct bstate {
  wf_func *fn;
  placed *p;
  int n, cap;
} bstate;

/* Places `check arr, a [, b]` before `before` unless an equal one is
** there. 0 when out of memory: the access then keeps its own check. */
static int place(bstate *S, wf_inst *before, const wf_inst *access, wf_val arr, wf_val a, wf_val b,
                 int64_t imm, wf_inst *key) {
  for (int i = 0; i < S->n; i++)
    if (S->p[i].at == key && S->p[i].arr == arr && S->p[i].idx == a && S->p[i].imm == imm) return 1;
  wf_val args[3] = {arr, a, b};
  wf_inst *c = wf_inst_new(S->fn, WF_OP_CHECK, b == WF_NOVAL ? 2 : 3, args, 0, NULL, 0);
  if (!c) return 0;
  c->imm = imm;
  c->loc = access->loc;
  wf_inst_insert_before(before, c);
  if (S->n == S->cap) {
    int nc = S->cap ? S->cap * 2 : 16;
    placed *np = realloc(S->p, sizeof *np * (size_t)nc);
    if (!np) return 1; /* not recorded: at worst a second equal check */
    S->p = np;
    S->cap = nc;
  }
  S->p[S->n++] = (placed){key, arr, a, imm};
  return 1;
}

/* Is v the same for every thread: computed by pure operations (no tid,
** no loads, no regions) from parameters and constants? */
static int invariant(const wf_func *fn, wf_val v, int depth) {
  if (v < 0 || depth > 32) return 0;
  if (is_param(fn, v)) return 1;
  const wf_inst *d = fn->vals[v].def;
  if (!d || d->op == WF_OP_TID || d->nblocks || !(wf_op_flags(d->op) & WF_OPF_PURE)) return 0;
  for (int a = 0; a < d->nargs; a++)
    if (!invariant(fn, d->args[a], depth + 1)) return 0;
  return 1;
}

/* launch: the accesses at the top level of the kernel body; the range
** checks there whose operands every thread shares become hoistable. */
static void launch_checks(bstate *S) {
  wf_func *fn = S->fn;
  for (wf_inst *in = fn->body->first; in; in = in->next) {
    if (may_exit(in)) return;
    if (in->op == WF_OP_CHECK && !(in->imm & WF_CHECK_LAUNCH)) {
      int inv = 1;
      for (int a = 0; a < in->nargs; a++)
        inv = inv && invariant(fn, in->args[a], 0);
      if (inv) in->imm |= WF_CHECK_HOIST;
      continue;
    }
    int n = is_access(in->op) ? nindices(fn, in) : 0;
    if (!n) continue;
    /* the root parameter and the axes peeled off it */
    wf_val root = in->args[0];
    int depth = 0;
    while (fn->vals[root].def && fn->vals[root].def->op == WF_OP_VIEW && depth < 8) {
      root = fn->vals[root].def->args[0];
      depth++;
    }
    if (!is_param(fn, root)) continue;
    const wf_type *rt = wf_vtype(fn, root);
    for (int k = 0; k < n; k++) {
      int64_t c;
      wf_val t = tid_base(fn, in->args[1 + k], &c);
      if (t == WF_NOVAL || depth + k >= rt->ndim) continue;
      if (place(S, in, in, root, t, WF_NOVAL, wf_check_imm(depth + k, WF_CHECK_LAUNCH, c), NULL))
        in->imm |= (int64_t)1 << k;
    }
  }
}

/* range: the accesses at the top level of loop `lp`'s body. */
static void range_checks(bstate *S, wf_inst *lp) {
  wf_func *fn = S->fn;
  if (lp->nargs < 3 || lp->nblocks < 1 || lp->blocks[0]->nparams < 1) return;
  int64_t step;
  const wf_type *it = wf_vtype(fn, lp->args[0]);
  if (!it || it->kind != WF_T_INT || !it->is_signed || it->bits < 32) return;
  if (!const_of(fn, lp->args[2], &step) || (step != 1 && step != -1)) return;
  wf_block *body = lp->blocks[0];
  wf_val iv = body->params[0];
  for (wf_inst *in = body->first; in; in = in->next) {
    if (may_exit(in)) return;
    int n = is_access(in->op) ? nindices(fn, in) : 0;
    if (!n) continue;
    /* the extents of a view are its root's (rows of a matrix all have the
    ** same length): check the root */
    wf_val arr = in->args[0];
    int depth = 0;
    while (fn->vals[arr].def && fn->vals[arr].def->op == WF_OP_VIEW && depth < 8) {
      arr = fn->vals[arr].def->args[0];
      depth++;
    }
    if (defined_in(fn, arr, lp)) continue;
    const wf_type *at = wf_vtype(fn, arr);
    for (int k = 0; k < n; k++) {
      int64_t c;
      if (!offset_of(fn, in->args[1 + k], iv, &c) || depth + k >= at->ndim) continue;
      if (place(S, lp, in, arr, lp->args[0], lp->args[1],
                wf_check_imm(depth + k, step < 0 ? WF_CHECK_DOWN : 0, c), lp))
        in->imm |= (int64_t)1 << k;
    }
  }
}

static void walk(bstate *S, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    for (int b = 0; b < in->nblocks; b++)
      walk(S, in->blocks[b]);
    if (in->op == WF_OP_FOR) range_checks(S, in);
  }
}

void wf_pass_bounds(wf_module *m) {
  for (int f = 0; f < m->nfuncs; f++) {
    wf_func *fn = m->funcs[f];
    if (!fn->body) continue;
    wf_func_fix_parents(fn);
    strip(fn->body);
    if (!fn->is_kernel) continue;
    bstate S = {fn, NULL, 0, 0};
    walk(&S, fn->body);
    launch_checks(&S);
    free(S.p);
  }
}
