/*
** loop.c -- reverse mode of for and while loops.
**
** Takes a primal loop instruction at the adjoint's current emission point
** (its adjoints so far in A->adj, its inits replayed) and gives the
** adjoint loop that runs its iterations backwards: the adjoints of the
** loop's inits and of the values captured by its body accumulated, the
** builder after the loop. Called by the reverse sweep (ad.c); a body is
** reversed with wf_ad_reverse_region.
**
**   for:    N = trip count (a counting copy of the loop, O(n) trivial work)
**           for r = 1, N { k = N - r
**              state_k = recompute(k)       only if the reverse needs the
**                                           carried values (see below)
**              reverse(body at i_k, state_k), seeded with adj(state_k+1) }
**
**   while:  N = trip count (a counting replay of the loop)
**           for r = 0, N { k = N - r
**              s_k = recompute(k); v_k = before(s_k)
**              if k < N: reverse(after(v_k)) seeded with adj(s_k+1)
**              else: adj(v_N) = adj(results)
**              reverse(before(s_k)) seeded with adj(v_k) }
**
** Loop cost (per thread). recompute(k) runs k iterations from the loop
** entry, carrying only the needed slots: memory O(1) (no stack, nothing
** allocated), time O(n^2) iteration replays for n iterations (n^2/2 for a
** for loop, about n^2 for a while loop). A for loop whose reverse reads
** no carried value (accumulations such as s = s + f(x[i]), the common
** case) is reversed without recomputation: O(n) with i_k = lo + k*step.
** When code after such a loop also reads its result (so the replay runs
** the loop once more) and the carried adjoints are loop invariant, the
** replay is fused into the reverse loop, which then runs in forward order
** (fuse.c, wf_ad_try_fuse): one loop instead of two.
** Nested loops multiply. Trip counts are int32.
*/
#include <stdint.h>

#include "ad/ad_int.h"
#include "geom/native.h"

/* An adjoint loop `for r = from, N, 1` carrying nc values; returns it with
** the builder inside its body. */
static wf_inst *rev_loop(wf_adctx *A, int from, wf_val N, int nc, const wf_val *init,
                         const wf_type **ct, wf_block **saved) {
  wf_val *a = wf_ad_vals(A, 3 + nc);
  a[0] = wf_ad_consti(A, wf_ad_i32t(A), from);
  a[1] = N;
  a[2] = wf_ad_consti(A, wf_ad_i32t(A), 1);
  for (int i = 0; i < nc; i++)
    a[3 + i] = init[i];
  wf_inst *L = wf_ad_emit(A, WF_OP_FOR, 3 + nc, a, nc, ct, 1);
  const wf_type **bt = wf_ad_scratch(A, sizeof(*bt) * (size_t)(nc + 1));
  bt[0] = wf_ad_i32t(A);
  for (int i = 0; i < nc; i++)
    bt[1 + i] = ct[i];
  *saved = wf_ad_enter(A, wf_ad_newblock(A, L, 0, nc + 1, bt));
  return L;
}

/* Trip count of a for loop: a copy of it that only counts. */
static wf_val count_for(wf_adctx *A, const wf_inst *in, wf_val lo, wf_val hi, wf_val st) {
  const wf_type *it = wf_ad_ptype(A, in->args[0]), *i32 = wf_ad_i32t(A);
  wf_val a[4] = {lo, hi, st, wf_ad_consti(A, i32, 0)};
  wf_inst *L = wf_ad_emit(A, WF_OP_FOR, 4, a, 1, &i32, 1);
  const wf_type *bt[2] = {it, i32};
  wf_block *old = wf_ad_enter(A, wf_ad_newblock(A, L, 0, 2, bt));
  wf_val n1 = wf_ad_op2(A, WF_OP_ADD, i32, L->blocks[0]->params[1], wf_ad_consti(A, i32, 1));
  wf_ad_emit(A, WF_OP_YIELD, 1, &n1, 0, NULL, 0);
  A->b.block = old;
  return L->res[0];
}

/* (k, i_k, state_k...) of a for loop: k iterations replayed from the entry
** in a counted while loop (needed slots only). */
static wf_inst *recompute_for(wf_adctx *A, const wf_inst *in, wf_val lo, wf_val st, wf_val k) {
  wf_block *B = in->blocks[0];
  int ns = in->nres, nw = 2 + ns;
  const wf_type *i32 = wf_ad_i32t(A), *it = wf_ad_ptype(A, in->args[0]);
  const wf_type **wt = wf_ad_scratch(A, sizeof(*wt) * (size_t)nw);
  wf_val *init = wf_ad_vals(A, nw);
  wt[0] = i32;
  wt[1] = it;
  init[0] = wf_ad_consti(A, i32, 0);
  init[1] = lo;
  for (int j = 0; j < ns; j++) {
    wt[2 + j] = wf_ad_ptype(A, in->res[j]);
    init[2 + j] = wf_ad_tmap(A, in->args[3 + j]);
  }
  wf_inst *W = wf_ad_emit(A, WF_OP_WHILE, nw, init, nw, wt, 2);
  wf_block *b0 = wf_ad_newblock(A, W, 0, nw, wt), *b1 = wf_ad_newblock(A, W, 1, nw, wt);
  wf_block *old = wf_ad_enter(A, b0);
  wf_val *ca = wf_ad_vals(A, nw + 1);
  ca[0] = wf_ad_op2(A, WF_OP_LT, wf_ad_boolt(A), b0->params[0], k);
  for (int i = 0; i < nw; i++)
    ca[1 + i] = b0->params[i];
  wf_ad_emit(A, WF_OP_COND, nw + 1, ca, 0, NULL, 0);
  A->b.block = b1;
  for (int p = 0; p < B->nparams; p++)
    A->map[B->params[p]] = b1->params[1 + p];
  wf_ad_replay_block(A, B);
  wf_val *y = wf_ad_vals(A, nw);
  y[0] = wf_ad_op2(A, WF_OP_ADD, i32, b1->params[0], wf_ad_consti(A, i32, 1));
  y[1] = wf_ad_op2(A, WF_OP_ADD, it, b1->params[1], st);
  for (int j = 0; j < ns; j++)
    y[2 + j] = wf_ad_tmap(A, B->last->args[j]);
  wf_ad_emit(A, WF_OP_YIELD, nw, y, 0, NULL, 0);
  A->b.block = old;
  return W;
}

/* Indices of the differentiable entries of a value list. */
int wf_ad_dslots(wf_adctx *A, int n, const wf_val *v, int *idx) {
  int nd = 0;
  for (int j = 0; j < n; j++)
    if (wf_ad_difft(wf_ad_ptype(A, v[j]))) idx[nd++] = j;
  return nd;
}

/* What the reverse of block B alone reads: the need closure of the rules
** inside B (the global need[] also holds what code AFTER a loop reads of
** its results, which the reverse of its body does not need). */
static uint8_t *local_need(wf_adctx *A, wf_block *B) {
  uint8_t *saved = A->need, *loc = wf_ad_scratch(A, (size_t)A->np + 1);
  A->need = loc;
  while (wf_ad_need_block(A, B)) {
  }
  A->need = saved;
  return loc;
}

void wf_ad_rev_for(wf_adctx *A, wf_inst *in) {
  if (!wf_ad_region_active(A, in)) return;
  wf_block *B = in->blocks[0];
  int ns = in->nres;
  const wf_type *it = wf_ad_ptype(A, in->args[0]), *i32 = wf_ad_i32t(A);
  uint8_t *bneed = local_need(A, B);
  int recompute = !wf_t_is_int(it);
  for (int j = 0; j < ns; j++)
    recompute |= bneed[B->params[1 + j]];
  wf_ad_capset cs = wf_ad_captured(A, in);
  if (!recompute && wf_ad_try_fuse(A, in, cs)) return;
  wf_val lo = wf_ad_primal(A, in->args[0]), hi = wf_ad_primal(A, in->args[1]);
  wf_val st = wf_ad_primal(A, in->args[2]);
  wf_val N = count_for(A, in, lo, hi, st);
  int *di = wf_ad_scratch(A, sizeof(int) * (size_t)(ns + 1));
  int nd = wf_ad_dslots(A, ns, in->res, di), nc = nd + cs.n;
  wf_val *init = wf_ad_vals(A, nc);
  const wf_type **ct = wf_ad_scratch(A, sizeof(*ct) * (size_t)(nc + 1));
  for (int d = 0; d < nd; d++) {
    ct[d] = wf_ad_ptype(A, in->res[di[d]]);
    init[d] = wf_ad_adjz(A, in->res[di[d]]);
  }
  for (int i = 0; i < cs.n; i++) {
    ct[nd + i] = wf_ad_ptype(A, cs.v[i]);
    init[nd + i] = A->adj[cs.v[i]];
  }
  wf_block *saved;
  wf_inst *L = rev_loop(A, 1, N, nc, init, ct, &saved);
  wf_val *bp = L->blocks[0]->params;
  wf_val k = wf_ad_op2(A, WF_OP_SUB, i32, N, bp[0]);
  wf_val *pv = wf_ad_vals(A, 1 + ns);
  if (recompute) {
    wf_inst *W = recompute_for(A, in, lo, st, k);
    for (int p = 0; p < 1 + ns; p++)
      pv[p] = W->res[1 + p];
  } else {
    wf_val kk = it == i32 ? k : wf_ad_op1(A, WF_OP_CAST, it, k);
    pv[0] = wf_ad_op2(A, WF_OP_ADD, it, lo, wf_ad_op2(A, WF_OP_MUL, it, kk, st));
    for (int j = 0; j < ns; j++)
      pv[1 + j] = wf_ad_zero(A, wf_ad_ptype(A, in->res[j]));
  }
  wf_val *seeds = wf_ad_vals(A, ns);
  for (int d = 0; d < nd; d++)
    seeds[di[d]] = bp[1 + d];
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = bp[1 + nd + i];
  /* without recomputation the carried values are placeholders: replay only
  ** what the body's reverse reads, which never depends on them */
  uint8_t *gneed = A->need;
  if (!recompute) A->need = bneed;
  wf_ad_reverse_region(A, B, pv, seeds);
  A->need = gneed;
  wf_val *y = wf_ad_vals(A, nc);
  for (int d = 0; d < nd; d++)
    y[d] = wf_ad_adjz(A, B->params[1 + di[d]]);
  for (int i = 0; i < cs.n; i++)
    y[nd + i] = A->adj[cs.v[i]];
  wf_ad_emit(A, WF_OP_YIELD, nc, y, 0, NULL, 0);
  A->b.block = saved;
  A->b.loc = in->loc;
  /* captured adjoints first: a loop init may also be captured (a constant
  ** shared with an inner loop), and its adjoint is then the loop's result */
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = L->res[nd + i];
  for (int d = 0; d < nd; d++)
    wf_ad_acc(A, in->args[3 + di[d]], L->res[d]);
}

/* Trip count of a while loop: a replay that counts the `after` runs. */
static wf_val count_while(wf_adctx *A, const wf_inst *in) {
  wf_block *B0 = in->blocks[0], *B1 = in->blocks[1];
  int nst = B0->nparams, np = B1->nparams;
  const wf_type *i32 = wf_ad_i32t(A);
  const wf_type **st = wf_ad_scratch(A, sizeof(*st) * (size_t)(nst + 1));
  const wf_type **pt = wf_ad_scratch(A, sizeof(*pt) * (size_t)(np + 1));
  wf_val *init = wf_ad_vals(A, nst + 1);
  st[0] = pt[0] = i32;
  init[0] = wf_ad_consti(A, i32, 0);
  for (int j = 0; j < nst; j++) {
    st[1 + j] = wf_ad_ptype(A, B0->params[j]);
    init[1 + j] = wf_ad_tmap(A, in->args[j]);
  }
  for (int j = 0; j < np; j++)
    pt[1 + j] = wf_ad_ptype(A, B1->params[j]);
  wf_inst *W = wf_ad_emit(A, WF_OP_WHILE, nst + 1, init, np + 1, pt, 2);
  wf_block *b0 = wf_ad_newblock(A, W, 0, nst + 1, st), *b1 = wf_ad_newblock(A, W, 1, np + 1, pt);
  wf_block *old = wf_ad_enter(A, b0);
  for (int j = 0; j < nst; j++)
    A->map[B0->params[j]] = b0->params[1 + j];
  wf_ad_replay_block(A, B0);
  wf_val *ca = wf_ad_vals(A, np + 2);
  ca[0] = wf_ad_primal(A, B0->last->args[0]);
  ca[1] = b0->params[0];
  for (int j = 0; j < np; j++)
    ca[2 + j] = wf_ad_tmap(A, B0->last->args[1 + j]);
  wf_ad_emit(A, WF_OP_COND, np + 2, ca, 0, NULL, 0);
  A->b.block = b1;
  for (int j = 0; j < np; j++)
    A->map[B1->params[j]] = b1->params[1 + j];
  wf_ad_replay_block(A, B1);
  wf_val *y = wf_ad_vals(A, nst + 1);
  y[0] = wf_ad_op2(A, WF_OP_ADD, i32, b1->params[0], wf_ad_consti(A, i32, 1));
  for (int j = 0; j < nst; j++)
    y[1 + j] = wf_ad_tmap(A, B1->last->args[j]);
  wf_ad_emit(A, WF_OP_YIELD, nst + 1, y, 0, NULL, 0);
  A->b.block = old;
  return W->res[0];
}

/* (k, s_k...) of a while loop: k before+after runs replayed from the entry. */
static wf_inst *recompute_while(wf_adctx *A, const wf_inst *in, wf_val k) {
  wf_block *B0 = in->blocks[0], *B1 = in->blocks[1];
  int nst = B0->nparams, np = B1->nparams, nw = nst + 1;
  const wf_type *i32 = wf_ad_i32t(A);
  const wf_type **wt = wf_ad_scratch(A, sizeof(*wt) * (size_t)nw);
  wf_val *init = wf_ad_vals(A, nw);
  wt[0] = i32;
  init[0] = wf_ad_consti(A, i32, 0);
  for (int j = 0; j < nst; j++) {
    wt[1 + j] = wf_ad_ptype(A, B0->params[j]);
    init[1 + j] = wf_ad_tmap(A, in->args[j]);
  }
  wf_inst *W = wf_ad_emit(A, WF_OP_WHILE, nw, init, nw, wt, 2);
  wf_block *b0 = wf_ad_newblock(A, W, 0, nw, wt), *b1 = wf_ad_newblock(A, W, 1, nw, wt);
  wf_block *old = wf_ad_enter(A, b0);
  wf_val *ca = wf_ad_vals(A, nw + 1);
  ca[0] = wf_ad_op2(A, WF_OP_LT, wf_ad_boolt(A), b0->params[0], k);
  for (int i = 0; i < nw; i++)
    ca[1 + i] = b0->params[i];
  wf_ad_emit(A, WF_OP_COND, nw + 1, ca, 0, NULL, 0);
  A->b.block = b1;
  for (int j = 0; j < nst; j++)
    A->map[B0->params[j]] = b1->params[1 + j];
  wf_ad_replay_block(A, B0);
  wf_val *pv = wf_ad_vals(A, np);
  for (int j = 0; j < np; j++)
    pv[j] = wf_ad_tmap(A, B0->last->args[1 + j]);
  for (int j = 0; j < np; j++)
    A->map[B1->params[j]] = pv[j];
  wf_ad_replay_block(A, B1);
  wf_val *y = wf_ad_vals(A, nw);
  y[0] = wf_ad_op2(A, WF_OP_ADD, i32, b1->params[0], wf_ad_consti(A, i32, 1));
  for (int j = 0; j < nst; j++)
    y[1 + j] = wf_ad_tmap(A, B1->last->args[j]);
  wf_ad_emit(A, WF_OP_YIELD, nw, y, 0, NULL, 0);
  A->b.block = old;
  return W;
}

/* Iterating queries (for f in weft.mesh_query_aabb(...), lowered to a
** while loop over a handle; src/geom/native.h) keep their position in
** memory that the loop's _next calls advance, so every replay of the loop
** from its entry must restart them: each handle begun outside the loop
** and stepped inside gets a fresh begin call on the replayed arguments,
** mapped in place of the old one. */
#define WF_AD_MAXITERS 16
typedef struct wf_ad_iters {
  int n;
  wf_val h[WF_AD_MAXITERS];   /* the handles */
  wf_val old[WF_AD_MAXITERS]; /* their mappings before the reversal */
} wf_ad_iters;

static int is_begin(const wf_inst *d) {
  return d && d->op == WF_OP_NATIVE && d->imm >= 0 && d->imm < WF_NAT__COUNT &&
         (wf_native_tab[d->imm].flags & WF_NATF_ITER);
}

/* The handles bl's instructions step whose begin is not in `loop`. */
static void find_iters(wf_adctx *A, const wf_block *bl, const wf_inst *loop, wf_ad_iters *it) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    for (int k = 0; in->op == WF_OP_NATIVE && k < in->nargs; k++) {
      wf_val h = in->args[k];
      const wf_inst *d = A->pf->vals[h].def;
      if (!is_begin(d)) continue;
      int outside = 1;
      for (const wf_block *b = d->parent; b && outside; b = b->parent ? b->parent->parent : NULL)
        outside = b->parent != loop;
      int seen = 0;
      for (int i = 0; i < it->n; i++)
        seen |= it->h[i] == h;
      if (outside && !seen && it->n < WF_AD_MAXITERS) {
        it->old[it->n] = A->map[h];
        it->h[it->n++] = h;
      }
    }
    for (int k = 0; k < in->nblocks; k++)
      find_iters(A, in->blocks[k], loop, it);
  }
}

static void restart_iters(wf_adctx *A, const wf_ad_iters *it) {
  for (int i = 0; i < it->n; i++) {
    const wf_inst *d = A->pf->vals[it->h[i]].def;
    wf_val *a = wf_ad_vals(A, d->nargs);
    for (int k = 0; k < d->nargs; k++)
      a[k] = wf_ad_primal(A, d->args[k]);
    const wf_type *t = wf_ad_ptype(A, it->h[i]);
    wf_inst *c = wf_ad_emit(A, WF_OP_NATIVE, d->nargs, a, 1, &t, 0);
    c->imm = d->imm;
    A->map[it->h[i]] = c->res[0];
  }
}

void wf_ad_rev_while(wf_adctx *A, wf_inst *in) {
  if (!wf_ad_region_active(A, in)) return;
  wf_block *B0 = in->blocks[0], *B1 = in->blocks[1];
  int nst = B0->nparams, np = B1->nparams;
  const wf_type *i32 = wf_ad_i32t(A);
  wf_ad_capset cs = wf_ad_captured(A, in);
  wf_ad_iters *iters = wf_ad_scratch(A, sizeof *iters);
  iters->n = 0;
  for (int k = 0; k < in->nblocks; k++)
    find_iters(A, in->blocks[k], in, iters);
  restart_iters(A, iters);
  wf_val N = count_while(A, in);
  int *ds = wf_ad_scratch(A, sizeof(int) * (size_t)(nst + 1));
  int *dp = wf_ad_scratch(A, sizeof(int) * (size_t)(np + 1));
  int nds = wf_ad_dslots(A, nst, B0->params, ds), ndp = wf_ad_dslots(A, np, B1->params, dp);
  int nc = nds + cs.n;
  wf_val *init = wf_ad_vals(A, nc);
  const wf_type **ct = wf_ad_scratch(A, sizeof(*ct) * (size_t)(nc + 1));
  for (int d = 0; d < nds; d++) {
    ct[d] = wf_ad_ptype(A, B0->params[ds[d]]);
    init[d] = wf_ad_zero(A, ct[d]);
  }
  for (int i = 0; i < cs.n; i++) {
    ct[nds + i] = wf_ad_ptype(A, cs.v[i]);
    init[nds + i] = A->adj[cs.v[i]];
  }
  wf_block *saved;
  wf_inst *L = rev_loop(A, 0, N, nc, init, ct, &saved);
  wf_val *bp = L->blocks[0]->params;
  wf_val k = wf_ad_op2(A, WF_OP_SUB, i32, N, bp[0]);
  restart_iters(A, iters);
  wf_inst *W = recompute_while(A, in, k);
  wf_val *sk = W->res + 1;
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = bp[1 + nds + i];
  /* v_k = before(s_k), for the reverse of after(v_k) */
  for (int j = 0; j < nst; j++)
    A->map[B0->params[j]] = sk[j];
  wf_ad_replay_block(A, B0);
  wf_val *vk = wf_ad_vals(A, np);
  for (int j = 0; j < np; j++)
    vk[j] = wf_ad_tmap(A, B0->last->args[1 + j]);
  /* adj(v_k): from after's reverse (k < N) or the loop's results (k = N) */
  int ni = ndp + cs.n;
  const wf_type **it = wf_ad_scratch(A, sizeof(*it) * (size_t)(ni + 1));
  for (int d = 0; d < ndp; d++)
    it[d] = wf_ad_ptype(A, B1->params[dp[d]]);
  for (int i = 0; i < cs.n; i++)
    it[ndp + i] = ct[nds + i];
  wf_val *saved_cap = wf_ad_vals(A, cs.n), *y = wf_ad_vals(A, ni), *seeds = wf_ad_vals(A, nst);
  for (int i = 0; i < cs.n; i++)
    saved_cap[i] = A->adj[cs.v[i]];
  wf_ad_if s;
  wf_ad_if_begin(A, &s, wf_ad_op2(A, WF_OP_LT, wf_ad_boolt(A), k, N), ni, it);
  for (int d = 0; d < nds; d++)
    seeds[ds[d]] = bp[1 + d];
  wf_ad_reverse_region(A, B1, vk, seeds);
  for (int d = 0; d < ndp; d++)
    y[d] = wf_ad_adjz(A, B1->params[dp[d]]);
  for (int i = 0; i < cs.n; i++)
    y[ndp + i] = A->adj[cs.v[i]];
  wf_ad_if_else(A, &s, y);
  for (int d = 0; d < ndp; d++)
    y[d] = wf_ad_adjz(A, in->res[dp[d]]);
  for (int i = 0; i < cs.n; i++)
    y[ndp + i] = saved_cap[i];
  wf_ad_if_end(A, &s, y);
  for (int i = 0; i < cs.n; i++)
    A->adj[cs.v[i]] = s.in->res[ndp + i];
  /* reverse of before(s_k), seeded with adj(v_k) */
  wf_val *pseeds = wf_ad_vals(A, np);
  for (int d = 0; d < ndp; d++)
    pseeds[dp[d]] = s.in->res[d];
  wf_ad_reverse_region(A, B0, sk, pseeds);
  wf_val *ly = wf_ad_vals(A, nc);
  for (int d = 0; d < nds; d++)
    ly[d] = wf_ad_adjz(A, B0->params[ds[d]]);
  for (int i = 0; i < cs.n; i++)
    ly[nds + i] = A->adj[cs.v[i]];
  wf_ad_emit(A, WF_OP_YIELD, nc, ly, 0, NULL, 0);
  A->b.block = saved;
  A->b.loc = in->loc;
  for (int i = 0; i < iters->n; i++)
    A->map[iters->h[i]] = iters->old[i];
  for (int i = 0; i < cs.n; i++) /* captured first, as in wf_ad_rev_for */
    A->adj[cs.v[i]] = L->res[nds + i];
  for (int d = 0; d < nds; d++)
    wf_ad_acc(A, in->args[ds[d]], L->res[d]);
}
