/*
** check.c -- the debug-mode check for kernels whose reverse mode would be
** wrong: an array element written after the kernel read it.
**
** The adjoint kernel replays the forward pass AFTER the forward launch, so
** a replayed load x[i] sees the value the forward pass stored there last,
** not the value it read; and the adjoint of the store (adj_x[i]) is mixed
** with the adjoint of the read. Either way the gradients are wrong (Warp
** has the same limitation and checks it only on request).
**
** The check is static and deterministic: for every store or atomic_add of
** a differentiable value to an array, it looks for an earlier load (in
** program order: a pre-order walk of the structured IR) of the same kernel
** array parameter at structurally equal indices. Views are followed to
** their root parameter and their indices prepended. Indices are equal when
** they are the same SSA value or pure instructions with the same op,
** immediates, types and (recursively) equal operands. Different threads
** touching each other's elements (x[i+1] read, x[i] written) are not seen.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ad/ad.h"

#define MAXPATH 8 /* views of views plus the access indices */

/* A memory access reduced to its root kernel parameter and index path. */
typedef struct access {
  const wf_inst *in;
  int root; /* parameter index, or -1 when the array is not a parameter view */
  int n;
  wf_val idx[MAXPATH];
} access;

typedef struct cstate {
  const wf_func *fn;
  access *loads;
  int nloads, cap;
  const access *bad_load, *bad_store;
  access store; /* the store being reported */
  int oom;
} cstate;

static int param_index(const wf_func *fn, wf_val v) {
  for (int i = 0; i < fn->nparams; i++)
    if (fn->params[i] == v) return i;
  return -1;
}

/* Root parameter and full index path of an access with nidx indices. */
static access resolve(const wf_func *fn, const wf_inst *in, int nidx) {
  access a = {in, -1, 0, {0}};
  wf_val tail[MAXPATH];
  int nt = 0;
  for (int k = nidx; k >= 1 && nt < MAXPATH; k--)
    tail[nt++] = in->args[k];
  wf_val arr = in->args[0];
  for (int depth = 0; depth < MAXPATH; depth++) {
    const wf_inst *d = fn->vals[arr].def;
    if (!d) break;
    if (d->op != WF_OP_VIEW || nt >= MAXPATH) return a;
    tail[nt++] = d->args[1];
    arr = d->args[0];
  }
  a.root = param_index(fn, arr);
  for (int k = 0; k < nt; k++)
    a.idx[k] = tail[nt - 1 - k];
  a.n = nt;
  return a;
}

/* Same value, or the same pure computation of equal operands. */
static int same_value(const wf_func *fn, wf_val a, wf_val b, int depth) {
  if (a == b) return 1;
  if (a < 0 || b < 0 || depth > 12) return 0;
  const wf_inst *x = fn->vals[a].def, *y = fn->vals[b].def;
  if (!x || !y || x->op != y->op || !(wf_op_flags(x->op) & WF_OPF_PURE)) return 0;
  if (x->nblocks || x->nargs != y->nargs || x->imm != y->imm) return 0;
  if (fn->vals[a].index != fn->vals[b].index || fn->vals[a].type != fn->vals[b].type) return 0;
  if (x->op == WF_OP_CONST && x->fimm != y->fimm) return 0;
  for (int k = 0; k < x->nargs; k++)
    if (!same_value(fn, x->args[k], y->args[k], depth + 1)) return 0;
  return 1;
}

static int same_element(const wf_func *fn, const access *a, const access *b) {
  if (a->root < 0 || a->root != b->root || a->n != b->n) return 0;
  for (int k = 0; k < a->n; k++)
    if (!same_value(fn, a->idx[k], b->idx[k], 0)) return 0;
  return 1;
}

static int difft(const wf_type *t) {
  if (!t) return 0;
  if (t->kind == WF_T_FLOAT) return 1;
  if (t->kind == WF_T_STRUCT) {
    for (int i = 0; i < t->nfields; i++)
      if (difft(t->fields[i].type)) return 1;
    return 0;
  }
  return t->elem && t->elem->kind == WF_T_FLOAT && t->kind != WF_T_ARRAY;
}

static void add_load(cstate *S, const access *a) {
  if (S->nloads == S->cap) {
    int nc = S->cap ? S->cap * 2 : 16;
    access *n = realloc(S->loads, sizeof(access) * (size_t)nc);
    if (!n) {
      S->oom = 1;
      return;
    }
    S->loads = n;
    S->cap = nc;
  }
  S->loads[S->nloads++] = *a;
}

/* Pre-order walk; stops at the first overwrite found. */
static void walk(cstate *S, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in && !S->bad_load && !S->oom; in = in->next) {
    if (in->op == WF_OP_LOAD && difft(S->fn->vals[in->res[0]].type)) {
      access a = resolve(S->fn, in, in->nargs - 1);
      if (a.root >= 0) add_load(S, &a);
    } else if ((in->op == WF_OP_STORE || in->op == WF_OP_ATOMIC_ADD) && in->nargs >= 2 &&
               difft(S->fn->vals[in->args[in->nargs - 1]].type)) {
      S->store = resolve(S->fn, in, in->nargs - 2);
      for (int i = 0; i < S->nloads; i++)
        if (same_element(S->fn, &S->loads[i], &S->store)) {
          S->bad_load = &S->loads[i];
          S->bad_store = &S->store;
          break;
        }
    }
    for (int k = 0; k < in->nblocks; k++)
      walk(S, in->blocks[k]);
  }
}

static const char *chunk_of(const wf_func *fn) {
  const char *c = fn->chunk && *fn->chunk ? fn->chunk : "?";
  return (*c == '@' || *c == '=') ? c + 1 : c;
}

int wf_ad_check_overwrite(const wf_func *fn, const char *const *names, char *err, size_t n) {
  cstate S;
  memset(&S, 0, sizeof S);
  S.fn = fn;
  walk(&S, fn->body);
  const wf_inst *st = S.bad_store ? S.bad_store->in : NULL;
  const wf_inst *ld = S.bad_load ? S.bad_load->in : NULL;
  int r = S.bad_store ? S.bad_store->root : -1;
  free(S.loads);
  if (S.oom) {
    snprintf(err, n, "autodiff: out of memory");
    return -1;
  }
  if (!ld) return 0;
  char pname[64];
  if (names && names[r])
    snprintf(pname, sizeof pname, "%s", names[r]);
  else
    snprintf(pname, sizeof pname, "parameter %d", r + 1);
  char where[32] = "";
  if (ld->loc.line > 0) snprintf(where, sizeof where, " at line %d", (int)ld->loc.line);
  snprintf(err, n,
           "%s:%d: autodiff: kernel '%s' %s an element of array '%s' that it read earlier%s; "
           "the adjoint would replay the new value, so gradients would be wrong (write the "
           "result to another array)",
           chunk_of(fn), (int)st->loc.line, fn->name,
           st->op == WF_OP_STORE ? "overwrites" : "atomically updates", pname, where);
  return -1;
}
