/*
** Local arrays in memory: which aggregate values share one stack slot.
**
** A kernel's local array (`local st = weft.vector(64, weft.int32)()`) is
** an SSA value in the IR: `st[k] = v` makes a new aggregate (INSERTD),
** loops carry it in block parameters, ifs merge it in results. Emitted as
** LLVM values, each dynamic access copies or selects over every component.
** Here the values that are versions of one local array are grouped into a
** web (union-find over inserts, yields, conditions, loop inits and
** results); a web is given one stack slot, updated in place, when that is
** exact:
**   - it holds an EXTRACTD or INSERTD (else SSA values are better);
**   - one value in it is made by another op (the root: AGG, CONST, ...),
**     and not by a function parameter;
**   - every value is dead once a newer version is made from it: each
**     read comes before the value's consumes (an insert of it, or passing
**     it on) or lies in the other branch of an if; two consumes of one
**     value lie in different branches; a value made outside a loop is not
**     consumed inside it (the next trip would see the change).
** Other webs keep SSA values; their dynamic accesses go through a
** temporary slot (emit.c).
**
** A row of a local matrix (`m[r][c] = v` is row = m[r], row' = row with
** c set, m' = m with row r set) is a web of its own, rooted at the
** extract. It borrows its matrix's memory instead of copying the row
** (WF_CPU_BORROW) when no other version of the row is live there: it is
** made only by inserts (no loop or if carries it), and either it is only
** read, all before the matrix changes, or it ends in the write-back
** m' = m with row r set (WF_CPU_WRITEBACK: nothing to store), the matrix's
** one consume, with no other read of m after the row is taken.
*/
#include <stdlib.h>

#include "cpu/cpu.h"

typedef struct use {
  const wf_inst *in;
  int32_t pos; /* preorder position of `in` */
  int consume; /* the value's slot is taken over by a newer version */
} use;

typedef struct scan {
  const wf_func *fn;
  int32_t *par;   /* union-find parent per value */
  int32_t *nuse;  /* per value */
  int32_t *first; /* per value: start in uses */
  use *uses;
  int32_t nuses, pos;
  int fill; /* second walk: record uses */
} scan;

static int is_local_type(const wf_type *t) {
  return t && (t->kind == WF_T_VEC || t->kind == WF_T_MAT || t->kind == WF_T_QUAT);
}

static int32_t find(scan *S, int32_t v) {
  while (S->par[v] != v)
    v = S->par[v] = S->par[S->par[v]];
  return v;
}

static void unite(scan *S, wf_val a, wf_val b) {
  if (a < 0 || b < 0 || !is_local_type(wf_vtype(S->fn, a))) return;
  int32_t x = find(S, a), y = find(S, b);
  if (x != y) S->par[x] = y;
}

static void add_use(scan *S, const wf_inst *in, wf_val v, int consume) {
  if (v < 0 || !is_local_type(wf_vtype(S->fn, v))) return;
  if (!S->fill) {
    S->nuse[v]++;
    return;
  }
  use *u = &S->uses[S->first[v] + S->nuse[v]++];
  u->in = in;
  u->pos = S->pos;
  u->consume = consume;
}

/* Operand k of `in` passes its value on to a block parameter or a region
** result (a consume), or is read. */
static int passes_on(const wf_inst *in, int k) {
  const wf_inst *r = in->parent ? in->parent->parent : NULL;
  switch (in->op) {
  case WF_OP_INSERT:
  case WF_OP_INSERTD: return k == 0;
  case WF_OP_WHILE: return 1;
  case WF_OP_FOR: return k >= 3;
  case WF_OP_YIELD: return r != NULL;
  case WF_OP_COND: return k >= 1;
  default: return 0;
  }
}

static void walk_block(scan *S, const wf_block *bl);

static void walk_inst(scan *S, const wf_inst *in) {
  S->pos++;
  for (int k = 0; k < in->nargs; k++)
    add_use(S, in, in->args[k], passes_on(in, k));
  if (!S->fill) {
    if (in->op == WF_OP_INSERT || in->op == WF_OP_INSERTD) unite(S, in->res[0], in->args[0]);
    const wf_block *b0 = in->nblocks > 0 ? in->blocks[0] : NULL;
    const wf_block *b1 = in->nblocks > 1 ? in->blocks[1] : NULL;
    if (in->op == WF_OP_IF && b0 && b1 && b0->last && b1->last) {
      for (int j = 0; j < in->nres; j++) {
        if (j < b0->last->nargs) unite(S, in->res[j], b0->last->args[j]);
        if (j < b1->last->nargs) unite(S, in->res[j], b1->last->args[j]);
      }
    } else if (in->op == WF_OP_WHILE && b0 && b1 && b0->last && b1->last) {
      for (int k = 0; k < in->nargs && k < b0->nparams; k++) {
        unite(S, b0->params[k], in->args[k]);
        if (k < b1->last->nargs) unite(S, b0->params[k], b1->last->args[k]);
      }
      for (int j = 0; j < in->nres && j < b1->nparams && 1 + j < b0->last->nargs; j++) {
        unite(S, in->res[j], b0->last->args[1 + j]);
        unite(S, b1->params[j], b0->last->args[1 + j]);
      }
    } else if (in->op == WF_OP_FOR && b0 && b0->last) {
      for (int j = 0; j < in->nres && 1 + j < b0->nparams && 3 + j < in->nargs; j++) {
        unite(S, b0->params[1 + j], in->args[3 + j]);
        unite(S, in->res[j], in->args[3 + j]);
        if (j < b0->last->nargs) {
          unite(S, b0->params[1 + j], b0->last->args[j]);
          unite(S, in->res[j], b0->last->args[j]);
        }
      }
    }
  }
  for (int k = 0; k < in->nblocks; k++)
    walk_block(S, in->blocks[k]);
}

static void walk_block(scan *S, const wf_block *bl) {
  if (!bl) return;
  for (const wf_inst *in = bl->first; in; in = in->next)
    walk_inst(S, in);
}

/* Is block bl inside (or equal to) block outer? */
static int inside(const wf_block *bl, const wf_block *outer) {
  while (bl) {
    if (bl == outer) return 1;
    bl = bl->parent ? bl->parent->parent : NULL;
  }
  return 0;
}

/* Do a and b lie in different branches of one if? */
static int exclusive(const wf_inst *a, const wf_inst *b) {
  for (const wf_block *bl = a->parent; bl && bl->parent; bl = bl->parent->parent) {
    const wf_inst *r = bl->parent;
    if (r->op != WF_OP_IF || r->nblocks != 2) continue;
    const wf_block *other = r->blocks[r->blocks[0] == bl ? 1 : 0];
    if (inside(b->parent, other)) return 1;
  }
  return 0;
}

/* The block where value v is defined. */
static const wf_block *def_block(const wf_func *fn, wf_val v) {
  const wf_valinfo *vi = &fn->vals[v];
  if (vi->block) return vi->block;
  return vi->def ? vi->def->parent : NULL;
}

/* A consume at c of a value defined in block d, with no loop between. */
static int same_trip(const wf_inst *c, const wf_block *d) {
  for (const wf_block *bl = c->parent; bl; bl = bl->parent ? bl->parent->parent : NULL) {
    if (bl == d) return 1;
    if (!bl->parent || bl->parent->op == WF_OP_WHILE || bl->parent->op == WF_OP_FOR) return 0;
  }
  return 0;
}

static int linear(const scan *S, wf_val v) {
  const use *u = &S->uses[S->first[v]];
  int n = S->nuse[v];
  const wf_block *d = def_block(S->fn, v);
  for (int i = 0; i < n; i++) {
    if (!u[i].consume) continue;
    if (!d || !same_trip(u[i].in, d)) return 0;
    for (int j = 0; j < n; j++) {
      if (j == i) continue;
      if (u[j].in == u[i].in) return 0; /* passed on twice by one instruction */
      if (u[j].consume || u[j].pos > u[i].pos)
        if (!exclusive(u[j].in, u[i].in)) return 0;
    }
  }
  return 1;
}

/* Is v made from another version of its web (not a root)? */
static int derived(const wf_func *fn, wf_val v) {
  const wf_valinfo *vi = &fn->vals[v];
  if (vi->block) return 1; /* block parameter */
  const wf_inst *d = vi->def;
  if (!d) return 0; /* function parameter */
  return d->op == WF_OP_INSERT || d->op == WF_OP_INSERTD || (wf_op_flags(d->op) & WF_OPF_REGION);
}

/* Does the row web w (root value root) borrow its matrix's memory? Sets
** the write-back result in *wb (WF_NOVAL when the row is only read). */
static int borrows(const scan *S, const int32_t *web, int32_t w, wf_val root, wf_val *wb) {
  const wf_func *fn = S->fn;
  const wf_inst *x = fn->vals[root].def;
  wf_val m = x->args[0];
  int rpos = 0, writes = 0;
  *wb = WF_NOVAL;
  for (int i = 0; i < S->nuse[m]; i++)
    if (S->uses[S->first[m] + i].in == x) rpos = S->uses[S->first[m] + i].pos;
  /* the row's versions: made by inserts only; the last use of any of them */
  int last = 0;
  for (wf_val v = 0; v < fn->nvals; v++) {
    if (web[v] != w) continue;
    if (v != root) {
      const wf_inst *d = fn->vals[v].def;
      if (!d || (d->op != WF_OP_INSERT && d->op != WF_OP_INSERTD)) return 0;
      writes = 1;
    }
    for (int i = 0; i < S->nuse[v]; i++) {
      const use *u = &S->uses[S->first[v] + i];
      const wf_inst *in = u->in;
      int back = (in->op == WF_OP_INSERTD && in->nargs == 3 && in->args[0] == m &&
                  in->args[2] == v && x->op == WF_OP_EXTRACTD && in->args[1] == x->args[1]) ||
                 (in->op == WF_OP_INSERT && in->nargs == 2 && in->args[0] == m &&
                  in->args[1] == v && x->op == WF_OP_EXTRACT && in->imm == x->imm);
      if (back) {
        if (*wb != WF_NOVAL) return 0;
        *wb = in->res[0];
      } else if (u->pos > last) {
        last = u->pos;
      }
    }
  }
  for (int i = 0; i < S->nuse[m]; i++) {
    const use *u = &S->uses[S->first[m] + i];
    if (u->in == x || (*wb != WF_NOVAL && u->in == fn->vals[*wb].def)) continue;
    if (writes) {
      /* the row is written in place: m is not read after the row is taken
      ** and consumed only by the write-back */
      if (u->consume || u->pos > rpos) return 0;
    } else if (u->consume && u->pos < last && !exclusive(u->in, x)) {
      return 0; /* m changes while the row is read */
    }
  }
  return !writes || *wb != WF_NOVAL;
}

int32_t *wf_cpu_local_scan(const wf_func *fn, uint8_t *flags) {
  int32_t n = fn->nvals > 0 ? fn->nvals : 1;
  scan S = {fn, NULL, NULL, NULL, NULL, 0, 0, 0};
  S.par = malloc(sizeof(int32_t) * (size_t)n);
  S.nuse = calloc((size_t)n, sizeof(int32_t));
  S.first = malloc(sizeof(int32_t) * (size_t)n);
  int32_t *web = malloc(sizeof(int32_t) * (size_t)n);
  /* per web root: 1 dynamic access, 2 a second root or a parameter, 4 not
  ** linear, 8 passed to a native builtin */
  uint8_t *bad = calloc((size_t)n, 1);
  int32_t *roots = calloc((size_t)n, sizeof(int32_t));
  if (!S.par || !S.nuse || !S.first || !web || !bad || !roots) goto fail;
  for (int32_t v = 0; v < n; v++)
    S.par[v] = v;
  walk_block(&S, fn->body);
  int32_t total = 0;
  for (int32_t v = 0; v < n; v++) {
    S.first[v] = total;
    total += S.nuse[v];
    S.nuse[v] = 0;
  }
  S.uses = malloc(sizeof(use) * (size_t)(total + 1));
  if (!S.uses) goto fail;
  S.fill = 1;
  S.pos = 0;
  walk_block(&S, fn->body);
  for (int32_t v = 0; v < fn->nvals; v++) {
    if (!is_local_type(fn->vals[v].type)) continue;
    int32_t r = find(&S, v);
    const wf_inst *d = fn->vals[v].def;
    if (d && (d->op == WF_OP_INSERTD || d->op == WF_OP_EXTRACTD)) bad[r] |= 1;
    for (int i = 0; i < S.nuse[v]; i++) {
      wf_op op = S.uses[S.first[v] + i].in->op;
      if (op == WF_OP_EXTRACTD) bad[r] |= 1;
      if (op == WF_OP_NATIVE) bad[r] |= 8; /* native.c takes operands as values */
    }
    if (!derived(fn, v) && (!d || roots[r]++ > 0)) bad[r] |= 2;
    if (!linear(&S, v)) bad[r] |= 4;
  }
  for (int32_t v = 0; v < n; v++) {
    int32_t r = v < fn->nvals && is_local_type(fn->vals[v].type) ? find(&S, v) : -1;
    web[v] = r >= 0 && bad[r] == 1 && roots[r] == 1 ? r : -1;
    flags[v] = 0;
  }
  /* rows that borrow their matrix's memory (matrices are decided above) */
  for (int32_t v = 0; v < fn->nvals; v++) {
    const wf_inst *d = fn->vals[v].def;
    if (web[v] < 0 || !d || (d->op != WF_OP_EXTRACT && d->op != WF_OP_EXTRACTD) ||
        web[d->args[0]] < 0)
      continue;
    wf_val wb;
    if (!borrows(&S, web, web[v], v, &wb)) continue;
    for (int32_t u = 0; u < fn->nvals; u++)
      if (web[u] == web[v]) flags[u] |= WF_CPU_BORROW;
    if (wb != WF_NOVAL) flags[wb] |= WF_CPU_WRITEBACK;
  }
  free(S.par), free(S.nuse), free(S.first), free(S.uses), free(bad), free(roots);
  return web;
fail:
  free(S.par), free(S.nuse), free(S.first), free(S.uses), free(bad), free(roots), free(web);
  return NULL;
}
