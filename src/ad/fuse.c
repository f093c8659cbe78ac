/*
** fuse.c -- the fused, forward-order reversal of a summing for loop.
**
** Takes a for loop that the reverse sweep (loop.c, wf_ad_rev_for) would
** reverse without recomputation, whose replay loop R code after it also
** reads. Gives, when it is safe, one loop that computes R's primal slots
** and does the reverse work of each iteration in forward order (R is
** removed); otherwise nothing but dead code, and the caller takes the
** ordinary path.
*/
#include <stdint.h>
#include <string.h>

#include "ad/ad_int.h"

/* ---- fused forward-order reversal of a summing for loop ----
** A for loop reversed without recomputation whose carried adjoints come
** out of each reversed iteration unchanged (sums: adj(acc) is loop
** invariant) can run its reverse iterations in forward order. Its replay
** (which code after the loop reads, e.g. `m * acc`) is then fused into
** that loop: one loop computes the primal slots and does the reverse work
** of each iteration. Captured adjoints start at zero in F and the adjoint
** accumulated before F is added after it (inside a loop they are only
** summed into). The fused loop F is emitted speculatively; it is kept
** only when (a) every carried adjoint is invariant, (b) F's inits and body
** read no value computed from the replay loop R (the seed of acc must not
** depend on acc: loss = acc*acc falls back), and (c) moving the code
** between R and F that reads R's results to after F reorders no
** conflicting memory accesses. Otherwise F is unlinked and the O(n) path
** runs as before. */

/* Is adjoint value v equal to `target`, directly or through if results
** whose branches both yield it? */
static int same_adj(wf_adctx *A, wf_val v, wf_val target) {
  if (v == target) return 1;
  const wf_inst *d = v >= 0 && v < A->af->nvals ? A->af->vals[v].def : NULL;
  if (!d || d->op != WF_OP_IF) return 0;
  int k = A->af->vals[v].index;
  for (int b = 0; b < d->nblocks; b++) {
    const wf_inst *y = d->blocks[b]->last;
    if (!y || y->op != WF_OP_YIELD || k >= y->nargs || !same_adj(A, y->args[k], target)) return 0;
  }
  return 1;
}

/* Does any operand in the tree of `in` carry a taint mark? */
static int uses_tainted(const wf_inst *in, const uint8_t *taint, int32_t nt) {
  for (int k = 0; k < in->nargs; k++)
    if (in->args[k] >= 0 && in->args[k] < nt && taint[in->args[k]]) return 1;
  for (int b = 0; b < in->nblocks; b++)
    for (const wf_inst *c = in->blocks[b]->first; c; c = c->next)
      if (uses_tainted(c, taint, nt)) return 1;
  return 0;
}

/* Memory accesses of an instruction tree: root array (param, through
** views; -2 unknown) and kind (0 load, 1 atomic add, 2 other write). */
typedef struct memacc {
  int n, cap;
  wf_val *root;
  uint8_t *kind;
  int opaque; /* a call, print or trap: give up */
} memacc;

static wf_val mem_root(wf_adctx *A, wf_val v) {
  while (v >= 0 && v < A->af->nvals) {
    const wf_inst *d = A->af->vals[v].def;
    if (!d) return v;
    if (d->op != WF_OP_VIEW) return -2;
    v = d->args[0];
  }
  return -2;
}

static void mem_collect(wf_adctx *A, const wf_inst *in, memacc *m) {
  int kind = -1;
  if (in->op == WF_OP_LOAD)
    kind = 0;
  else if (in->op == WF_OP_ATOMIC_ADD)
    kind = 1;
  else if (wf_op_flags(in->op) & WF_OPF_WRITE) /* stores and the other atomics */
    kind = 2;
  else if (in->op == WF_OP_CALL || in->op == WF_OP_PRINT || in->op == WF_OP_TRAP)
    m->opaque = 1;
  if (kind >= 0) {
    if (m->n == m->cap) {
      int nc = m->cap ? m->cap * 2 : 16;
      wf_val *nr = wf_ad_scratch(A, sizeof(wf_val) * (size_t)nc);
      uint8_t *nk = wf_ad_scratch(A, (size_t)nc);
      if (m->n) {
        memcpy(nr, m->root, sizeof(wf_val) * (size_t)m->n);
        memcpy(nk, m->kind, (size_t)m->n);
      }
      m->root = nr;
      m->kind = nk;
      m->cap = nc;
    }
    m->root[m->n] = mem_root(A, in->args[0]);
    m->kind[m->n++] = (uint8_t)kind;
  }
  for (int b = 0; b < in->nblocks; b++)
    for (const wf_inst *c = in->blocks[b]->first; c; c = c->next)
      mem_collect(A, c, m);
}

/* May the accesses of x and y be reordered? Loads commute, atomic adds
** commute; anything else on the same (or an unknown) array does not. */
static int mem_commute(const memacc *x, const memacc *y) {
  if (x->opaque || y->opaque) return 0;
  for (int i = 0; i < x->n; i++)
    for (int j = 0; j < y->n; j++) {
      int same = x->root[i] == y->root[j] || x->root[i] == -2 || y->root[j] == -2;
      if (!same || (x->kind[i] == 0 && y->kind[j] == 0) || (x->kind[i] == 1 && y->kind[j] == 1))
        continue;
      return 0;
    }
  return 1;
}

/* Emits F = for i = lo, hi, st iter(primal slots, adjoint slots, captured
** adjoints) { replay + reverse of body(i) }; the builder ends after it. */
static wf_inst *emit_fused(wf_adctx *A, wf_inst *in, wf_ad_capset cs, int nd, const int *di) {
  wf_block *B = in->blocks[0];
  int ns = in->nres, nc = ns + nd + cs.n;
  wf_val *a = wf_ad_vals(A, 3 + nc);
  const wf_type **ct = wf_ad_scratch(A, sizeof(*ct) * (size_t)(nc + 1));
  for (int k = 0; k < 3; k++)
    a[k] = wf_ad_primal(A, in->args[k]);
  for (int j = 0; j < ns; j++) {
    ct[j] = wf_ad_ptype(A, in->res[j]);
    a[3 + j] = wf_ad_tmap(A, in->args[3 + j]);
  }
  for (int d = 0; d < nd; d++) {
    ct[ns + d] = wf_ad_ptype(A, in->res[di[d]]);
    a[3 + ns + d] = wf_ad_adjz(A, in->res[di[d]]);
  }
  for (int i = 0; i < cs.n; i++) { /* from zero: the caller adds the adjoint so far */
    ct[ns + nd + i] = wf_ad_ptype(A, cs.v[i]);
    a[3 + ns + nd + i] = wf_ad_zero(A, ct[ns + nd + i]);
  }
  wf_inst *F = wf_ad_emit(A, WF_OP_FOR, 3 + nc, a, nc, ct, 1);
  const wf_type **bt = wf_ad_scratch(A, sizeof(*bt) * (size_t)(nc + 1));
  bt[0] = wf_ad_ptype(A, in->args[0]);
  for (int i = 0; i < nc; i++)
    bt[1 + i] = ct[i];
  wf_block *saved = wf_ad_enter(A, wf_ad_newblock(A, F, 0, nc + 1, bt));
  wf_val *bp = F->blocks[0]->params;
  wf_val *seeds = wf_ad_vals(A, ns);
  for (int d = 0; d < nd; d++)
    seeds[di[d]] = bp[1 + ns + d];
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = bp[1 + ns + nd + i];
  wf_ad_reverse_region(A, B, bp, seeds);
  wf_val *y = wf_ad_vals(A, nc);
  for (int j = 0; j < ns; j++)
    y[j] = wf_ad_tmap(A, B->last->args[j]);
  for (int d = 0; d < nd; d++)
    y[ns + d] = wf_ad_adjz(A, B->params[1 + di[d]]);
  for (int i = 0; i < cs.n; i++)
    y[ns + nd + i] = A->adj[cs.v[i]];
  wf_ad_emit(A, WF_OP_YIELD, nc, y, 0, NULL, 0);
  A->b.block = saved;
  A->b.loc = in->loc;
  return F;
}

/* The replay loop R of `in` (in the current block), or NULL. */
static wf_inst *replay_loop_of(wf_adctx *A, const wf_inst *in) {
  for (int j = 0; j < in->nres; j++) {
    wf_val r = A->need[in->res[j]] ? A->map[in->res[j]] : WF_NOVAL;
    if (r < 0 || r >= A->af->nvals) continue;
    wf_inst *R = A->af->vals[r].def;
    return R && R->op == WF_OP_FOR && R->parent == A->b.block ? R : NULL;
  }
  return NULL;
}

/* Tries the fused reversal of `in`; 1 when done, 0 when the caller must
** take the ordinary path (nothing emitted is left behind but dead code). */
int wf_ad_try_fuse(wf_adctx *A, wf_inst *in, wf_ad_capset cs) {
  wf_inst *R = replay_loop_of(A, in);
  if (!R || R->nres != in->nres) return 0;
  int ns = in->nres;
  int *di = wf_ad_scratch(A, sizeof(int) * (size_t)(ns + 1));
  int nd = wf_ad_dslots(A, ns, in->res, di);
  wf_val *saved_cap = wf_ad_vals(A, cs.n);
  for (int i = 0; i < cs.n; i++)
    saved_cap[i] = A->adj[cs.v[i]];
  wf_inst *F = emit_fused(A, in, cs, nd, di);
  wf_val *bp = F->blocks[0]->params;
  const wf_inst *fy = F->blocks[0]->last;
  int ok = 1;
  for (int d = 0; ok && d < nd; d++) /* (a) invariant carried adjoints */
    ok = same_adj(A, fy->args[ns + d], bp[1 + ns + d]);
  /* (b) the code between R and F that reads R's results (S) */
  int32_t nt = A->af->nvals;
  uint8_t *taint = wf_ad_scratch(A, (size_t)nt);
  for (int j = 0; j < R->nres; j++)
    taint[R->res[j]] = 1;
  int nS = 0;
  wf_inst **S = wf_ad_scratch(A, sizeof(wf_inst *) * (size_t)nt);
  memacc ms = {0}, mo = {0};
  wf_inst *x = R->next;
  for (; ok && x && x != F; x = x->next) {
    if (uses_tainted(x, taint, nt)) {
      for (int j = 0; j < x->nres; j++)
        taint[x->res[j]] = 1;
      S[nS++] = x;
      mem_collect(A, x, &ms);
    } else {
      mem_collect(A, x, &mo);
    }
  }
  ok = ok && x == F && !uses_tainted(F, taint, nt);
  /* (c) S moves after F; F's iterations run in the other order */
  if (ok) {
    memacc mf = {0};
    mem_collect(A, F, &mf);
    ok = mem_commute(&ms, &mo) && mem_commute(&ms, &mf) && mem_commute(&mf, &mf);
  }
  if (!ok) {
    wf_inst_unlink(F);
    for (int i = 0; i < cs.n; i++)
      A->adj[cs.v[i]] = saved_cap[i];
    return 0;
  }
  for (int j = 0; j < ns; j++) {
    wf_replace_uses(A->af, R->res[j], F->res[j]);
    A->map[in->res[j]] = F->res[j];
  }
  wf_inst *after = F->next;
  for (int s = 0; s < nS; s++) {
    wf_inst_unlink(S[s]);
    if (after)
      wf_inst_insert_before(after, S[s]);
    else
      wf_block_append(F->parent, S[s]);
  }
  wf_inst_unlink(R);
  /* captured first, as in wf_ad_rev_for; their adjoints so far (which may read
  ** acc, as S does) are added after F: captured adjoints only accumulate */
  for (int i = 0; i < cs.n; i++) {
    A->adj[cs.v[i]] = saved_cap[i];
    wf_ad_acc(A, cs.v[i], F->res[ns + nd + i]);
  }
  for (int d = 0; d < nd; d++)
    wf_ad_acc(A, in->args[3 + di[d]], F->res[ns + d]);
  return 1;
}
