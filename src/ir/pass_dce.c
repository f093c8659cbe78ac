/*
** pass_dce.c -- dead code elimination (mark live, then sweep).
**
** Roots: instructions with effects (store, atomics, print, trap, call, and
** while loops, which may not terminate), the values returned by ret, and
** every operand of a while and of its condition/yield. Pure instructions,
** loads, and if/for whose blocks hold no effects are live only when one of
** their results is. Liveness flows backwards:
**   - a live inst makes its operands live;
**   - if: result k live -> operand k of both yields live;
**   - for: carried slot k is live when result k or body param 1+k is live;
**     a live slot makes its init and operand k of the yield live.
** The marking is repeated until nothing changes (loop-carried values feed
** back into their own params). The sweep removes dead instructions, dead if
** results and dead for slots (init, param, yield operand, result).
*/
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

#define LIVE 1u      /* inst->flags: kept */
#define EFFECT 2u    /* inst->flags: has or contains an effect */
#define EFF_KNOWN 4u /* EFFECT computed */

typedef struct dstate {
  wf_func *fn;
  char *live; /* per value */
  int changed;
} dstate;

static int has_effect(wf_inst *in);

static int block_has_effect(wf_block *bl) {
  int e = 0;
  for (wf_inst *in = bl ? bl->first : NULL; in; in = in->next)
    e |= has_effect(in);
  return e;
}

/* Effects: anything but pure ops, loads, terminators and effect-free if/for. */
static int has_effect(wf_inst *in) {
  if (in->flags & EFF_KNOWN) return (in->flags & EFFECT) != 0;
  int e;
  wf_op op = in->op;
  if ((wf_op_flags(op) & WF_OPF_PURE) || op == WF_OP_LOAD || (wf_op_flags(op) & WF_OPF_TERM))
    e = 0;
  else if (op == WF_OP_IF || op == WF_OP_FOR) {
    e = 0;
    for (int k = 0; k < in->nblocks; k++)
      e |= block_has_effect(in->blocks[k]);
  } else {
    e = 1;
  }
  in->flags |= EFF_KNOWN | (e ? EFFECT : 0);
  return e;
}

static void mark(dstate *D, wf_val v) {
  if (v >= 0 && !D->live[v]) {
    D->live[v] = 1;
    D->changed = 1;
  }
}

static int any_res_live(dstate *D, const wf_inst *in) {
  for (int k = 0; k < in->nres; k++)
    if (D->live[in->res[k]]) return 1;
  return 0;
}

/* For slot k of a for loop: result k or body param 1+k is live. */
static int for_slot_live(dstate *D, const wf_inst *in, int k) {
  return D->live[in->res[k]] || D->live[in->blocks[0]->params[1 + k]];
}

/* Operands of a terminator that its owner needs. */
static void mark_term(dstate *D, wf_inst *t) {
  wf_inst *own = t->parent ? t->parent->parent : NULL;
  if (!own || own->op == WF_OP_WHILE || t->op != WF_OP_YIELD) {
    for (int k = 0; k < t->nargs; k++)
      mark(D, t->args[k]);
    return;
  }
  for (int k = 0; k < t->nargs; k++) {
    int need = own->op == WF_OP_IF    ? k < own->nres && D->live[own->res[k]]
               : own->op == WF_OP_FOR ? k < own->nres && for_slot_live(D, own, k)
                                      : 1;
    if (need) mark(D, t->args[k]);
  }
}

static void mark_block(dstate *D, wf_block *bl) {
  for (wf_inst *in = bl->last; in; in = in->prev) {
    if (wf_op_flags(in->op) & WF_OPF_TERM) {
      in->flags |= LIVE;
      mark_term(D, in);
      continue;
    }
    if (!(in->flags & LIVE) && (has_effect(in) || in->op == WF_OP_WHILE || any_res_live(D, in))) {
      in->flags |= LIVE;
      D->changed = 1;
    }
    if (!(in->flags & LIVE)) continue;
    if (in->op == WF_OP_FOR && in->nblocks == 1 && in->nargs >= 3) {
      for (int k = 0; k < 3; k++)
        mark(D, in->args[k]);
      for (int k = 0; k + 3 < in->nargs && k < in->nres; k++)
        if (for_slot_live(D, in, k)) mark(D, in->args[3 + k]);
    } else {
      for (int k = 0; k < in->nargs; k++)
        mark(D, in->args[k]);
    }
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) mark_block(D, in->blocks[k]);
  }
}

/* Removes operand k of a terminator (the yield of a dropped slot). */
static void drop_arg(wf_inst *t, int k) {
  if (!t || k >= t->nargs) return;
  memmove(t->args + k, t->args + k + 1, sizeof(wf_val) * (size_t)(t->nargs - k - 1));
  t->nargs--;
}

static void drop_res(dstate *D, wf_inst *in, int k) {
  memmove(in->res + k, in->res + k + 1, sizeof(wf_val) * (size_t)(in->nres - k - 1));
  in->nres--;
  for (int j = k; j < in->nres; j++)
    D->fn->vals[in->res[j]].index = j;
}

static void drop_param(dstate *D, wf_block *bl, int k) {
  memmove(bl->params + k, bl->params + k + 1, sizeof(wf_val) * (size_t)(bl->nparams - k - 1));
  bl->nparams--;
  for (int j = k; j < bl->nparams; j++)
    D->fn->vals[bl->params[j]].index = j;
}

/* Drops dead results of if and dead slots of for. */
static void sweep_regions(dstate *D, wf_inst *in) {
  if (in->op == WF_OP_IF) {
    for (int k = in->nres - 1; k >= 0; k--) {
      if (D->live[in->res[k]]) continue;
      for (int b = 0; b < in->nblocks; b++)
        if (in->blocks[b] && in->blocks[b]->last && in->blocks[b]->last->op == WF_OP_YIELD)
          drop_arg(in->blocks[b]->last, k);
      drop_res(D, in, k);
    }
  } else if (in->op == WF_OP_FOR && in->nblocks == 1 && in->blocks[0]) {
    wf_block *body = in->blocks[0];
    for (int k = in->nres - 1; k >= 0; k--) {
      if (3 + k >= in->nargs || 1 + k >= body->nparams || for_slot_live(D, in, k)) continue;
      drop_arg(in, 3 + k);
      drop_param(D, body, 1 + k);
      if (body->last && body->last->op == WF_OP_YIELD) drop_arg(body->last, k);
      drop_res(D, in, k);
    }
  }
}

static void sweep_block(dstate *D, wf_block *bl) {
  for (wf_inst *in = bl->first, *nx; in; in = nx) {
    nx = in->next;
    if (!(in->flags & LIVE)) {
      wf_inst_unlink(in);
      continue;
    }
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) sweep_block(D, in->blocks[k]);
    sweep_regions(D, in);
  }
}

static void clear_flags(wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    in->flags = 0;
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) clear_flags(in->blocks[k]);
  }
}

void wf_pass_dce(wf_module *m) {
  for (int f = 0; f < m->nfuncs; f++) {
    wf_func *fn = m->funcs[f];
    dstate D = {fn, calloc((size_t)(fn->nvals > 0 ? fn->nvals : 1), 1), 0};
    if (!D.live) continue; /* out of memory: leave the function as it is */
    wf_func_fix_parents(fn);
    clear_flags(fn->body);
    do {
      D.changed = 0;
      mark_block(&D, fn->body);
    } while (D.changed);
    sweep_block(&D, fn->body);
    clear_flags(fn->body);
    free(D.live);
  }
}
