/*
** pass_cse.c -- common subexpression elimination over the scope tree.
**
** A pure instruction (WF_OPF_PURE, no blocks) equal to an earlier one in
** the same block or in an enclosing block (which dominates it in structured
** form) is removed and its results forwarded. Equal: same op, same operands
** (WF_OPF_COMM ops compared with sorted operands), same imm, bit-equal
** fimm, same result types.
**
** Available instructions live in a hash table whose chains are undone when
** a block is left (entries are pushed on a stack; leaving a block pops back
** to the mark taken on entry). Forwarded values go through `repl`, applied
** to operands as the walk reaches them (every use follows its definition).
*/
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

typedef struct centry {
  wf_inst *in;
  uint32_t hash;
  int next; /* previous head of the bucket */
} centry;

typedef struct cstate {
  wf_func *fn;
  wf_val *repl;
  int *buckets, nbuckets; /* power of two */
  centry *e;
  int ne, cape;
  int oom;
} cstate;

/* Operand k in canonical order. */
static wf_val argk(const wf_inst *in, int k) {
  if (in->nargs == 2 && (wf_op_flags(in->op) & WF_OPF_COMM) && in->args[0] > in->args[1])
    return in->args[1 - k];
  return in->args[k];
}

static uint32_t mix(uint32_t h, uint64_t v) {
  h ^= (uint32_t)v + 0x9e3779b9u + (h << 6) + (h >> 2);
  h ^= (uint32_t)(v >> 32) + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h;
}

static uint32_t hash_inst(const cstate *C, const wf_inst *in) {
  uint64_t fb;
  memcpy(&fb, &in->fimm, sizeof fb);
  uint32_t h = mix((uint32_t)in->op, (uint64_t)in->imm);
  h = mix(h, fb);
  for (int k = 0; k < in->nargs; k++)
    h = mix(h, (uint64_t)argk(in, k));
  for (int k = 0; k < in->nres; k++)
    h = mix(h, (uint64_t)(uintptr_t)C->fn->vals[in->res[k]].type);
  return h;
}

static int same(const cstate *C, const wf_inst *a, const wf_inst *b) {
  if (a->op != b->op || a->nargs != b->nargs || a->nres != b->nres || a->imm != b->imm ||
      memcmp(&a->fimm, &b->fimm, sizeof a->fimm) != 0)
    return 0;
  for (int k = 0; k < a->nargs; k++)
    if (argk(a, k) != argk(b, k)) return 0;
  for (int k = 0; k < a->nres; k++)
    if (C->fn->vals[a->res[k]].type != C->fn->vals[b->res[k]].type) return 0;
  if ((a->str || b->str) && (!a->str || !b->str || strcmp(a->str, b->str) != 0)) return 0;
  return 1;
}

static int candidate(const wf_inst *in) {
  return (wf_op_flags(in->op) & WF_OPF_PURE) && in->nblocks == 0 && in->op != WF_OP_PARAM &&
         in->nres > 0;
}

/* Returns an earlier equal inst, or records `in` as available. */
static wf_inst *lookup_or_add(cstate *C, wf_inst *in) {
  uint32_t h = hash_inst(C, in);
  int b = (int)(h & (uint32_t)(C->nbuckets - 1));
  for (int i = C->buckets[b]; i >= 0; i = C->e[i].next)
    if (C->e[i].hash == h && same(C, C->e[i].in, in)) return C->e[i].in;
  if (C->ne == C->cape) {
    int nc = C->cape ? C->cape * 2 : 256;
    centry *ne = realloc(C->e, sizeof(*ne) * (size_t)nc);
    if (!ne) {
      C->oom = 1;
      return NULL;
    }
    C->e = ne;
    C->cape = nc;
  }
  C->e[C->ne] = (centry){in, h, C->buckets[b]};
  C->buckets[b] = C->ne++;
  return NULL;
}

/* Forgets the entries added since `mark` (leaving a block). */
static void pop_to(cstate *C, int mark) {
  while (C->ne > mark) {
    centry *e = &C->e[--C->ne];
    C->buckets[e->hash & (uint32_t)(C->nbuckets - 1)] = e->next;
  }
}

static void cse_block(cstate *C, wf_block *bl) {
  int mark = C->ne;
  for (wf_inst *in = bl->first, *nx; in; in = nx) {
    nx = in->next;
    for (int k = 0; k < in->nargs; k++)
      if (in->args[k] >= 0 && C->repl[in->args[k]] >= 0) in->args[k] = C->repl[in->args[k]];
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k]) cse_block(C, in->blocks[k]);
    if (!candidate(in) || C->oom) continue;
    wf_inst *prev = lookup_or_add(C, in);
    if (!prev) continue;
    for (int k = 0; k < in->nres; k++)
      C->repl[in->res[k]] = prev->res[k];
    wf_inst_unlink(in);
  }
  pop_to(C, mark);
}

void wf_pass_cse(wf_module *m) {
  for (int f = 0; f < m->nfuncs; f++) {
    wf_func *fn = m->funcs[f];
    cstate C = {.fn = fn};
    wf_func_fix_parents(fn);
    C.nbuckets = 1024;
    while (C.nbuckets < fn->nvals)
      C.nbuckets *= 2;
    C.buckets = malloc(sizeof(int) * (size_t)C.nbuckets);
    C.repl = malloc(sizeof(wf_val) * (size_t)(fn->nvals > 0 ? fn->nvals : 1));
    if (C.buckets && C.repl) {
      for (int i = 0; i < C.nbuckets; i++)
        C.buckets[i] = -1;
      for (int i = 0; i < fn->nvals; i++)
        C.repl[i] = WF_NOVAL;
      cse_block(&C, fn->body);
    }
    free(C.buckets);
    free(C.repl);
    free(C.e);
  }
}
