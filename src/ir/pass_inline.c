/*
** pass_inline.c -- inline every CALL (backends never see calls).
**
** Functions are processed callees first (post-order over the call graph),
** so a callee's body is already call-free when it is copied. A cycle in
** the call graph is an error naming the functions on it. The callee body is
** copied in front of the call with its params mapped to the call's
** arguments; the values of its final RET replace the call's results. The
** front end lowers early returns into flags, so RET must be the last
** instruction of a function body; a RET anywhere else is reported.
** Callees stay in the module (unused helpers are harmless to the backends,
** which compile kernels).
*/
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "ir/ir.h"

typedef struct istate {
  wf_module *m;
  char *color; /* per function: 0 new, 1 on the DFS stack, 2 done */
  int *stack, depth;
  char *err;
  size_t errsize;
} istate;

/* Writes "recursive call: @a -> @b -> @a" from the DFS stack. */
static int cycle_error(istate *S, int callee) {
  int at = 0;
  while (at < S->depth && S->stack[at] != callee)
    at++;
  size_t len = 0;
  len += (size_t)snprintf(S->err, S->errsize, "recursive call: ");
  for (int i = at; i < S->depth && len < S->errsize; i++)
    len +=
        (size_t)snprintf(S->err + len, S->errsize - len, "@%s -> ", S->m->funcs[S->stack[i]]->name);
  if (len < S->errsize)
    snprintf(S->err + len, S->errsize - len, "@%s (weft functions cannot be recursive)",
             S->m->funcs[callee]->name);
  return -1;
}

/* A RET that is not the last inst of the body cannot be inlined. */
static int check_rets(istate *S, wf_func *fn, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_RET && (bl != fn->body || in->next)) {
      snprintf(S->err, S->errsize, "in @%s: ret inside a nested block cannot be inlined", fn->name);
      return -1;
    }
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k] && check_rets(S, fn, in->blocks[k])) return -1;
  }
  return 0;
}

/* ---- copying ---- */
typedef struct cmap {
  wf_func *dst, *src;
  wf_val *map; /* src value -> dst value */
} cmap;

static wf_val mapv(cmap *c, wf_val v) {
  return v >= 0 && v < c->src->nvals ? c->map[v] : v;
}

static wf_block *copy_block(cmap *c, const wf_block *sb, wf_inst *owner);

/* Copies one inst (with nested blocks), not linked anywhere. */
static wf_inst *copy_inst(cmap *c, const wf_inst *si) {
  const wf_type *rt[16] = {0}, **rts = rt;
  if (si->nres > 16 && !(rts = malloc(sizeof(*rts) * (size_t)si->nres))) return NULL;
  for (int k = 0; k < si->nres; k++)
    rts[k] = c->src->vals[si->res[k]].type;
  wf_inst *in = wf_inst_new(c->dst, si->op, si->nargs, NULL, si->nres, rts, si->nblocks);
  if (rts != rt) free(rts);
  if (!in) return NULL;
  for (int k = 0; k < si->nargs; k++)
    in->args[k] = mapv(c, si->args[k]);
  for (int k = 0; k < si->nres; k++)
    c->map[si->res[k]] = in->res[k];
  in->loc = si->loc;
  in->imm = si->imm;
  in->fimm = si->fimm;
  in->str = si->str; /* same module arena */
  for (int k = 0; k < si->nblocks; k++) {
    in->blocks[k] = si->blocks[k] ? copy_block(c, si->blocks[k], in) : NULL;
    if (si->blocks[k] && !in->blocks[k]) return NULL;
  }
  return in;
}

static wf_block *copy_block(cmap *c, const wf_block *sb, wf_inst *owner) {
  const wf_type *pt[16] = {0}, **pts = pt;
  if (sb->nparams > 16 && !(pts = malloc(sizeof(*pts) * (size_t)sb->nparams))) return NULL;
  for (int k = 0; k < sb->nparams; k++)
    pts[k] = c->src->vals[sb->params[k]].type;
  wf_block *bl = wf_b_newblock(c->dst, sb->nparams, pts);
  if (pts != pt) free(pts);
  if (!bl) return NULL;
  bl->parent = owner;
  for (int k = 0; k < sb->nparams; k++)
    c->map[sb->params[k]] = bl->params[k];
  for (const wf_inst *si = sb->first; si; si = si->next) {
    wf_inst *in = copy_inst(c, si);
    if (!in) return NULL;
    wf_block_append(bl, in);
  }
  return bl;
}

/* Replaces one call with a copy of the callee's body. */
static int inline_call(istate *S, wf_func *fn, wf_inst *call) {
  wf_func *cal = S->m->funcs[call->imm];
  cmap c = {fn, cal, malloc(sizeof(wf_val) * (size_t)(cal->nvals > 0 ? cal->nvals : 1))};
  if (!c.map) return snprintf(S->err, S->errsize, "out of memory"), -1;
  for (int i = 0; i < cal->nvals; i++)
    c.map[i] = WF_NOVAL;
  for (int i = 0; i < cal->nparams && i < call->nargs; i++)
    c.map[cal->params[i]] = call->args[i];
  const wf_inst *ret = NULL;
  for (const wf_inst *si = cal->body->first; si; si = si->next) {
    if (si->op == WF_OP_RET) {
      ret = si;
      break;
    }
    wf_inst *in = copy_inst(&c, si);
    if (!in) {
      free(c.map);
      return snprintf(S->err, S->errsize, "out of memory"), -1;
    }
    if (!in->loc.line) in->loc = call->loc;
    wf_inst_insert_before(call, in);
  }
  for (int k = 0; ret && k < call->nres && k < ret->nargs; k++)
    wf_replace_uses(fn, call->res[k], mapv(&c, ret->args[k]));
  wf_inst_unlink(call);
  free(c.map);
  return 0;
}

/* Inlines every call found in bl (callees are already call-free). */
static int inline_block(istate *S, wf_func *fn, wf_block *bl) {
  for (wf_inst *in = bl->first, *nx; in; in = nx) {
    nx = in->next;
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k] && inline_block(S, fn, in->blocks[k])) return -1;
    if (in->op == WF_OP_CALL) {
      if (in->imm < 0 || in->imm >= S->m->nfuncs) {
        snprintf(S->err, S->errsize, "in @%s: call to a function that does not exist", fn->name);
        return -1;
      }
      if (inline_call(S, fn, in)) return -1;
    }
  }
  return 0;
}

static int visit(istate *S, int f);

/* Visits the callees of every call in bl before f itself is processed. */
static int visit_calls(istate *S, wf_block *bl) {
  for (wf_inst *in = bl->first; in; in = in->next) {
    for (int k = 0; k < in->nblocks; k++)
      if (in->blocks[k] && visit_calls(S, in->blocks[k])) return -1;
    if (in->op != WF_OP_CALL || in->imm < 0 || in->imm >= S->m->nfuncs) continue;
    int g = (int)in->imm;
    if (S->color[g] == 1) return cycle_error(S, g);
    if (S->color[g] == 0 && visit(S, g)) return -1;
  }
  return 0;
}

/* Post-order DFS: callees first, then inline into f. */
static int visit(istate *S, int f) {
  wf_func *fn = S->m->funcs[f];
  S->color[f] = 1;
  S->stack[S->depth++] = f;
  if (visit_calls(S, fn->body)) return -1;
  if (check_rets(S, fn, fn->body)) return -1;
  if (inline_block(S, fn, fn->body)) return -1;
  S->depth--;
  S->color[f] = 2;
  return 0;
}

int wf_pass_inline(wf_module *m, char *err, size_t errsize) {
  char dummy[8];
  istate S = {m,
              calloc((size_t)m->nfuncs + 1, 1),
              malloc(sizeof(int) * ((size_t)m->nfuncs + 1)),
              0,
              errsize ? err : dummy,
              errsize ? errsize : sizeof dummy};
  int rc = 0;
  S.err[0] = 0;
  if (!S.color || !S.stack) {
    snprintf(S.err, S.errsize, "out of memory");
    rc = -1;
  }
  for (int f = 0; !rc && f < m->nfuncs; f++)
    if (!S.color[f]) rc = visit(&S, f);
  free(S.color);
  free(S.stack);
  return rc;
}
