/*
** check.c -- what the adjoint's replay may read from memory, and the check
** for kernels whose reverse mode would be wrong.
**
** The adjoint kernel replays the forward pass AFTER the forward launch, so
** a replayed load x[i] sees the value the forward pass stored there last,
** not the value it read. wf_ad_memfacts (see ad_int.h) finds, per load,
** an earlier store of the same element whose value the replay can use
** instead, or a later write that makes the replay wrong; the transform
** then fails only if the adjoint really uses such a stale value (Warp has
** the same limitation and checks it only on request, without the
** distinction, and gives wrong gradients otherwise).
**
** Elements are compared statically: an access is reduced to its root
** kernel array parameter (views are followed and their indices
** prepended) and its index path. Indices are equal when they are the same
** SSA value or pure instructions with the same op, immediates, types and
** (recursively) equal operands. Different threads touching each other's
** elements (x[i+1] read, x[i] written) are not seen.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ad/ad_int.h"

#define MAXPATH 8 /* views of views plus the access indices */

/* A memory access reduced to its root kernel parameter and index path. */
typedef struct access {
  const wf_inst *in;
  int root; /* parameter index, or -1 when the array is not a parameter view */
  int n;
  wf_val idx[MAXPATH];
} access;

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

/* ======================================================================
** memory facts for the adjoint's replay (see ad_int.h)
** ====================================================================== */
static int is_write(const wf_inst *in) {
  return (wf_op_flags(in->op) & WF_OPF_WRITE) != 0;
}

static int nidx_of(const wf_inst *in) {
  return in->op == WF_OP_LOAD ? in->nargs - 1 : in->nargs - 2;
}

/* Does `in` (or a region's contents) write array parameter root (any
** array when root < 0 or the written array is not a parameter view), or
** call a function (which may write anything)? */
static int writes_root(const wf_func *fn, const wf_inst *in, int root) {
  if (in->op == WF_OP_CALL) return 1;
  if (is_write(in)) {
    int r = resolve(fn, in, nidx_of(in)).root;
    return root < 0 || r < 0 || r == root;
  }
  for (int k = 0; k < in->nblocks; k++)
    for (const wf_inst *c = in->blocks[k]->first; c; c = c->next)
      if (writes_root(fn, c, root)) return 1;
  return 0;
}

/* The value an earlier store of the same element left for load ld, found
** by walking back through ld's block and the blocks of enclosing ifs
** (never out of a loop: an earlier iteration may have written it). */
static wf_val forwarded(const wf_func *fn, const wf_inst *ld, const access *la) {
  const wf_inst *p = ld->prev;
  const wf_block *bl = ld->parent;
  for (;;) {
    for (; p; p = p->prev) {
      if (p->op == WF_OP_STORE) {
        access sa = resolve(fn, p, nidx_of(p));
        if (same_element(fn, &sa, la)) return p->args[p->nargs - 1];
      }
      if (writes_root(fn, p, la->root)) return WF_NOVAL;
    }
    const wf_inst *own = bl ? bl->parent : NULL;
    if (!own || own->op != WF_OP_IF) return WF_NOVAL;
    p = own->prev;
    bl = own->parent;
  }
}

static int is_loop(const wf_inst *in) {
  return in && (in->op == WF_OP_FOR || in->op == WF_OP_WHILE);
}

/* Is instruction x (NULL: a function parameter) inside region r? */
static int inside(const wf_inst *x, const wf_inst *r) {
  for (; x; x = x->parent ? x->parent->parent : NULL)
    if (x == r) return 1;
  return 0;
}

/* Is value v computed inside region r (block params of r's blocks too)? */
static int defined_in(const wf_func *fn, wf_val v, const wf_inst *r) {
  const wf_valinfo *vi = &fn->vals[v];
  const wf_inst *d = vi->def ? vi->def : vi->block ? vi->block->parent : NULL;
  return inside(d, r);
}

/* Memory instructions in pre-order, with their positions. */
typedef struct mlist {
  const wf_inst **in;
  int n, cap, oom;
} mlist;

static void collect_mem(mlist *L, const wf_block *bl) {
  for (const wf_inst *in = bl->first; in && !L->oom; in = in->next) {
    if (in->op == WF_OP_LOAD || is_write(in)) {
      if (L->n == L->cap) {
        int nc = L->cap ? L->cap * 2 : 32;
        const wf_inst **ni = realloc(L->in, sizeof(*ni) * (size_t)nc);
        if (!ni) {
          L->oom = 1;
          return;
        }
        L->in = ni;
        L->cap = nc;
      }
      L->in[L->n++] = in;
    }
    for (int k = 0; k < in->nblocks; k++)
      collect_mem(L, in->blocks[k]);
  }
}

/* A write w (at position wp) of the element load ld (at lp, access la)
** reads: does it make ld's replay wrong? */
static int overwrites(const wf_func *fn, const wf_inst *ld, int lp, const access *la,
                      const wf_inst *w, int wp) {
  if (wp > lp) return 1;
  /* earlier in program order: only in a later iteration of a loop around
  ** both in which the element stays the same */
  for (const wf_inst *r = w->parent ? w->parent->parent : NULL; r;
       r = r->parent ? r->parent->parent : NULL) {
    if (!is_loop(r) || !inside(ld, r)) continue;
    int inv = 1;
    for (int k = 0; k < la->n && inv; k++)
      inv = !defined_in(fn, la->idx[k], r);
    if (inv) return 1;
  }
  return 0;
}

void wf_ad_memfacts(wf_adctx *A) {
  const wf_func *fn = A->pf;
  A->fwd = wf_ad_scratch(A, sizeof(wf_val) * (size_t)(A->np + 1));
  A->stale = wf_ad_scratch(A, sizeof(*A->stale) * (size_t)(A->np + 1));
  for (int32_t v = 0; v < A->np; v++)
    A->fwd[v] = WF_NOVAL;
  mlist L = {NULL, 0, 0, 0};
  collect_mem(&L, fn->body);
  if (L.oom) {
    free(L.in);
    wf_ad_fail(A, NULL, "autodiff: out of memory");
  }
  for (int i = 0; i < L.n; i++) {
    const wf_inst *ld = L.in[i];
    if (ld->nres < 1) continue;
    if (ld->op != WF_OP_LOAD) { /* an atomic's old value: re-read by the replay */
      A->stale[ld->res[0]] = ld;
      continue;
    }
    access la = resolve(fn, ld, nidx_of(ld));
    if (la.root < 0) continue;
    wf_val f = forwarded(fn, ld, &la);
    if (f >= 0) {
      A->fwd[ld->res[0]] = f;
      continue;
    }
    for (int j = 0; j < L.n; j++) {
      const wf_inst *w = L.in[j];
      if (!is_write(w)) continue;
      access wa = resolve(fn, w, nidx_of(w));
      if (same_element(fn, &wa, &la) && overwrites(fn, ld, i, &la, w, j)) {
        A->stale[ld->res[0]] = w;
        break;
      }
    }
  }
  free(L.in);
}

void wf_ad_note_stale(wf_adctx *A, wf_val replayed, const wf_inst *primal) {
  const wf_inst *w = A->stale[primal->res[0]];
  const wf_func *fn = A->pf;
  if (A->root) A = A->root; /* a weft.func reversed inside the kernel's adjoint */
  if (A->nstale == A->capstale) {
    int nc = A->capstale ? A->capstale * 2 : 16;
    wf_val *nv = wf_ad_scratch(A, sizeof(wf_val) * (size_t)nc);
    const wf_inst **ni = wf_ad_scratch(A, sizeof(*ni) * (size_t)nc);
    const wf_inst **nw = wf_ad_scratch(A, sizeof(*nw) * (size_t)nc);
    const wf_func **nf = wf_ad_scratch(A, sizeof(*nf) * (size_t)nc);
    if (A->nstale) {
      memcpy(nv, A->sv, sizeof(wf_val) * (size_t)A->nstale);
      memcpy(ni, A->si, sizeof(*ni) * (size_t)A->nstale);
      memcpy(nw, A->sw, sizeof(*nw) * (size_t)A->nstale);
      memcpy(nf, A->sf, sizeof(*nf) * (size_t)A->nstale);
    }
    A->sv = nv;
    A->si = ni;
    A->sw = nw;
    A->sf = nf;
    A->capstale = nc;
  }
  A->sv[A->nstale] = replayed;
  A->si[A->nstale] = primal;
  A->sw[A->nstale] = w;
  A->sf[A->nstale++] = fn;
}

/* ---- liveness of the adjoint's values (a conservative copy of the
** marking in pass_dce.c: effects and ret are roots; if results and for
** slots are live one by one; while loops keep all their operands) ---- */
static int lv_mark(uint8_t *live, wf_val v) {
  if (v < 0 || live[v]) return 0;
  live[v] = 1;
  return 1;
}

static int lv_block(const wf_func *fn, const wf_block *bl, uint8_t *live, int *eff);

/* The value component imm of extract `ex` comes from, looking through
** inserts of other components and aggregates (else the operand). */
static wf_val lv_component(const wf_func *fn, const wf_inst *ex) {
  wf_val v = ex->args[0];
  for (;;) {
    const wf_inst *d = v >= 0 && v < fn->nvals ? fn->vals[v].def : NULL;
    if (d && d->op == WF_OP_INSERT) {
      if (d->imm == ex->imm) return d->args[1];
      v = d->args[0];
    } else if (d && d->op == WF_OP_AGG && ex->imm >= 0 && ex->imm < d->nargs) {
      return d->args[ex->imm];
    } else {
      return v;
    }
  }
}

static int lv_inst(const wf_func *fn, const wf_inst *in, uint8_t *live, int *eff) {
  int ch = 0, e = 0, any = 0;
  for (int k = 0; k < in->nblocks; k++)
    ch |= lv_block(fn, in->blocks[k], live, &e);
  for (int j = 0; j < in->nres; j++)
    any |= live[in->res[j]];
  wf_op op = in->op;
  if (op == WF_OP_IF) {
    if (e || any) ch |= lv_mark(live, in->args[0]);
    for (int j = 0; j < in->nres; j++)
      if (live[in->res[j]])
        for (int k = 0; k < 2; k++)
          ch |= lv_mark(live, in->blocks[k]->last->args[j]);
  } else if (op == WF_OP_FOR) {
    const wf_block *B = in->blocks[0];
    if (e || any)
      for (int k = 0; k < 3; k++)
        ch |= lv_mark(live, in->args[k]);
    for (int j = 0; j < in->nres; j++)
      if (live[in->res[j]] || live[B->params[1 + j]]) {
        ch |= lv_mark(live, in->res[j]) | lv_mark(live, B->params[1 + j]);
        ch |= lv_mark(live, in->args[3 + j]) | lv_mark(live, B->last->args[j]);
      }
  } else if (op == WF_OP_WHILE) {
    e = 1;
    for (int k = 0; k < in->nargs; k++)
      ch |= lv_mark(live, in->args[k]);
    for (int b = 0; b < in->nblocks; b++)
      for (int k = 0; k < in->blocks[b]->last->nargs; k++)
        ch |= lv_mark(live, in->blocks[b]->last->args[k]);
  } else if (op == WF_OP_EXTRACT) {
    /* a component of an insert chain: only the value that set it (the
    ** backend's fold does the same), so y[i].x = v; ... y[i].x reads v,
    ** not the stale rest of y[i] */
    if (any) ch |= lv_mark(live, lv_component(fn, in));
  } else if (!(wf_op_flags(op) & WF_OPF_TERM) || op == WF_OP_RET) {
    int effect = !(wf_op_flags(op) & WF_OPF_PURE) && op != WF_OP_LOAD;
    e |= effect;
    if (effect || any)
      for (int k = 0; k < in->nargs; k++)
        ch |= lv_mark(live, in->args[k]);
  }
  *eff |= e;
  return ch;
}

static int lv_block(const wf_func *fn, const wf_block *bl, uint8_t *live, int *eff) {
  int ch = 0;
  for (const wf_inst *in = bl->last; in; in = in->prev)
    ch |= lv_inst(fn, in, live, eff);
  return ch;
}

void wf_ad_check_stale(wf_adctx *A) {
  if (!A->nstale) return;
  uint8_t *live = wf_ad_scratch(A, (size_t)A->af->nvals + 1);
  int eff = 0;
  while (lv_block(A->af, A->af->body, live, &eff)) {
  }
  for (int i = 0; i < A->nstale; i++) {
    if (A->sv[i] < 0 || !live[A->sv[i]]) continue;
    const wf_inst *ld = A->si[i], *w = A->sw[i];
    const wf_func *fn = A->sf[i];
    if (fn != A->pf) { /* in a weft.func: its own chunk, its parameter names unknown */
      A->pf = (wf_func *)fn;
      A->names = NULL;
    }
    if (ld->op != WF_OP_LOAD)
      wf_ad_fail(A, ld,
                 "autodiff: the adjoint needs the value %s returned here, which it cannot replay "
                 "(the array holds the updated value by then); compute it in a weft.func with a "
                 "replay function (f:replay)",
                 wf_op_name(ld->op));
    access a = resolve(fn, w, nidx_of(w));
    char pname[64];
    if (a.root >= 0 && A->names && A->names[a.root])
      snprintf(pname, sizeof pname, "%s", A->names[a.root]);
    else
      snprintf(pname, sizeof pname, "parameter %d", a.root + 1);
    wf_ad_fail(A, w,
               "autodiff: %s '%s' %s an element of array '%s' that it read earlier at line "
               "%d; the adjoint would replay the new value, so gradients would be wrong (write "
               "the result to another array)",
               fn->is_kernel ? "kernel" : "weft.func", fn->name,
               w->op == WF_OP_STORE ? "overwrites" : "atomically updates", pname,
               (int)ld->loc.line);
  }
}

/* ---- which array parameters a function reads and writes ---- */
static void uses_walk(const wf_func *fn, const wf_block *bl, int n, uint8_t *loads,
                      uint8_t *writes) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_LOAD || is_write(in)) {
      int r = resolve(fn, in, nidx_of(in)).root;
      if (r >= 0 && r < n) (in->op == WF_OP_LOAD ? loads : writes)[r] = 1;
    }
    for (int k = 0; k < in->nblocks; k++)
      uses_walk(fn, in->blocks[k], n, loads, writes);
  }
}

void wf_ad_param_uses(const wf_func *fn, int n, uint8_t *loads, uint8_t *writes) {
  uses_walk(fn, fn->body, n, loads, writes);
}

/* ---- arrays held by struct parameters: which ones it reads and writes ---- */
/* The dotted field path ("state.x") of the array an access reaches by
** views from fields of struct parameter p < n, or -1 when it is not one. */
static int held_path(const wf_func *fn, const wf_inst *in, int n, char *path, size_t size) {
  wf_val v = in->args[0];
  for (int hops = 0; hops < MAXPATH && fn->vals[v].def && fn->vals[v].def->op == WF_OP_VIEW; hops++)
    v = fn->vals[v].def->args[0];
  int comp[MAXPATH], nc = 0;
  while (nc < MAXPATH && fn->vals[v].def && fn->vals[v].def->op == WF_OP_EXTRACT) {
    comp[nc++] = (int)fn->vals[v].def->imm;
    v = fn->vals[v].def->args[0];
  }
  int p = param_index(fn, v);
  if (!nc || p < 0 || p >= n) return -1;
  const wf_type *t = fn->vals[v].type;
  size_t len = 0;
  path[0] = '\0';
  for (int k = nc - 1; k >= 0; k--) { /* comp[] runs from the array outwards */
    if (t->kind != WF_T_STRUCT || comp[k] < 0 || comp[k] >= t->nfields) return -1;
    const wf_field *f = &t->fields[comp[k]];
    int w = snprintf(path + len, size - len, "%s%s", len ? "." : "", f->name);
    if (w < 0 || (size_t)w >= size - len) return -1;
    len += (size_t)w;
    t = f->type;
  }
  return p;
}

static void held_walk(const wf_func *fn, const wf_block *bl, int n, wf_ad_held_fn on, void *ud) {
  char path[256];
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_LOAD || is_write(in)) {
      int p = held_path(fn, in, n, path, sizeof path);
      if (p >= 0) on(ud, p, path, in->op != WF_OP_LOAD);
    }
    for (int k = 0; k < in->nblocks; k++)
      held_walk(fn, in->blocks[k], n, on, ud);
  }
}

void wf_ad_held_uses(const wf_func *fn, int n, wf_ad_held_fn on, void *ud) {
  held_walk(fn, fn->body, n, on, ud);
}
