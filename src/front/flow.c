/*
** flow.c -- control-flow merging in the typed lowering.
**
** Takes the bindings of the locals (F->vars) before a branch or a loop and
** the functions that lower what is inside it; gives the structured IR
** region and the bindings after it. `if` (wf_lo_if) lowers both branches
** into fresh blocks and merges the bindings either changed into the if's
** results (locals both leave untyped merge into a weak conditional);
** `and`/`or` (wf_lo_andor) lower through it. Loops (wf_lo_for,
** wf_lo_while) are probed first to learn which bindings their body
** changes, then lowered with those carried as block parameters; see
** lower.c's header for the whole scheme.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)
#define TN(t) wf_lo_tname(F->C, (t))

static const wf_type *t_i32(wf_fstate *F) {
  return wf_t_int(F->C->T, 32, 1);
}
static const wf_type *t_f32(wf_fstate *F) {
  return wf_t_float(F->C->T, 32);
}
static const wf_type *t_bool(wf_fstate *F) {
  return wf_t_bool(F->C->T);
}

/* Number literal local x is carried by the innermost loop: remember that
** for error messages. */
static void loop_typed(wf_fstate *F, wf_var *x) {
  x->loopline = F->loopline;
  x->loophasnum = !x->weak;
  x->loopnum = x->num;
}

/* ======================================================================
** structured if: both branches lowered into fresh blocks; the bindings
** changed in either branch (and an optional expression value) become the
** if's results.
** ====================================================================== */

static wf_val undef_of(wf_fstate *F, const wf_type *t) {
  return wf_b_inst(&F->b, WF_OP_UNDEF, 0, NULL, 1, &t, 0)->res[0];
}

/* The value of local x where it merges into type t: its SSA value, its
** literal as a constant of t, or undef when it never got a value. */
wf_val wf_lo_var_value(wf_fstate *F, wf_var *x, const wf_type *t) {
  if (x->v != WF_NOVAL) return x->v;
  if (x->islit && x->weak) {
    if (t->kind == WF_T_INT && !x->weak->integral)
      wf_lo_err(F, F->b.loc.line, F->b.loc.col,
                "local '%s' holds a number that is not always an integer here but %s elsewhere",
                x->name, TN(t));
    if (t->kind != WF_T_INT && t->kind != WF_T_FLOAT)
      wf_lo_err(F, F->b.loc.line, F->b.loc.col, "local '%s' holds a number here but %s elsewhere",
                x->name, TN(t));
    wf_expr here;
    memset(&here, 0, sizeof here);
    here.line = F->b.loc.line;
    here.col = F->b.loc.col;
    return wf_lo_weak_as(F, x->weak, t, &here);
  }
  if (x->islit) {
    if (t->kind == WF_T_INT && x->num != floor(x->num))
      wf_lo_err(F, F->b.loc.line, F->b.loc.col,
                "local '%s' holds the number %g here but %s elsewhere", x->name, x->num, TN(t));
    if (t->kind == WF_T_INT) {
      wf_expr here;
      memset(&here, 0, sizeof here);
      here.line = F->b.loc.line;
      here.col = F->b.loc.col;
      wf_lo_check_int_fits(F, x->num, t, &here);
      return wf_b_consti(&F->b, t, wf_lo_int_bits(x->num));
    }
    if (t->kind == WF_T_FLOAT) return wf_lo_const(F, t, x->num);
    wf_lo_err(F, F->b.loc.line, F->b.loc.col, "local '%s' holds a number here but %s elsewhere",
              x->name, TN(t));
  }
  return undef_of(F, t);
}

/* Has local binding b changed from a (a new value or a new untyped number)? */
static int binding_changed(const wf_var *a, const wf_var *b) {
  if (a->v != b->v || a->islit != b->islit) return 1;
  return a->islit &&
         (a->weak != b->weak || a->litint != b->litint || memcmp(&a->num, &b->num, sizeof a->num));
}

/* The weak number an untyped local holds. */
static const wf_weak *var_weak(wf_fstate *F, const wf_var *x) {
  return x->weak ? x->weak : wf_lo_weak_leaf(F, x->num, x->litint);
}

/* Local x holds the weak number w from now on. */
static void set_weak(wf_var *x, const wf_weak *w) {
  x->v = WF_NOVAL;
  x->t = NULL;
  x->islit = 1;
  x->weak = wf_lo_weak_isleaf(w) && w->dyn == WF_NOVAL ? NULL : w;
  x->num = w->num;
  x->litint = w->isint;
}

#define WEAK_MAXNODES 128 /* a merged weak conditional grows up to this */

/* Nodes of w, shared parts counted once per use (what building it costs),
** or a number above lim. */
static int weak_size(const wf_weak *w, int lim) {
  if (!w) return 0;
  int n = 1;
  if (w->cond != WF_NOVAL || w->op) {
    n += weak_size(w->a, lim);
    if (n <= lim) n += weak_size(w->b, lim);
  }
  return n;
}

/* The locals an `if` merges as weak conditionals, and the values of its
** branches (those from mark on: conditions, dyn leaves) they use, which
** become results of the if. */
typedef struct wmerge {
  wf_val mark;
  int nvar, nv, capv;
  int *var;
  const wf_weak **wt, **we;
  wf_val *v;
  int *side; /* 0: then, 1: else */
} wmerge;

static void wmerge_val(wf_fstate *F, wmerge *m, wf_val v, int side) {
  if (v == WF_NOVAL || v < m->mark) return;
  for (int k = 0; k < m->nv; k++)
    if (m->v[k] == v) return;
  if (m->nv == m->capv) {
    int nc = m->capv ? m->capv * 2 : 8;
    wf_val *nv = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)nc);
    int *ns = wf_front_alloc(F->C, sizeof(int) * (size_t)nc);
    if (m->nv) memcpy(nv, m->v, sizeof(wf_val) * (size_t)m->nv);
    if (m->nv) memcpy(ns, m->side, sizeof(int) * (size_t)m->nv);
    m->v = nv;
    m->side = ns;
    m->capv = nc;
  }
  m->v[m->nv] = v;
  m->side[m->nv] = side;
  m->nv++;
}

static void wmerge_scan(wf_fstate *F, wmerge *m, const wf_weak *w, int side) {
  if (!w) return;
  wmerge_val(F, m, w->cond, side);
  wmerge_val(F, m, w->dyn, side);
  wmerge_scan(F, m, w->a, side);
  wmerge_scan(F, m, w->b, side);
}

static void wmerge_add(wf_fstate *F, wmerge *m, int vi, const wf_weak *wt, const wf_weak *we) {
  if (!m->var) {
    /* at most one per visible local: sized on first use */
    int cap = F->nvars + 1;
    m->var = wf_front_alloc(F->C, sizeof(int) * (size_t)cap);
    m->wt = wf_front_alloc(F->C, sizeof(wf_weak *) * (size_t)cap);
    m->we = wf_front_alloc(F->C, sizeof(wf_weak *) * (size_t)cap);
  }
  m->var[m->nvar] = vi;
  m->wt[m->nvar] = wt;
  m->we[m->nvar] = we;
  m->nvar++;
  wmerge_scan(F, m, wt, 0);
  wmerge_scan(F, m, we, 1);
}

static wf_val wmerge_res(const wmerge *m, wf_val v, const wf_val *res) {
  if (v == WF_NOVAL || v < m->mark) return v;
  for (int k = 0; k < m->nv; k++)
    if (m->v[k] == v) return res[k];
  return v; /* cannot happen: every value was scanned */
}

/* w with the branches' values replaced by the if's results res[]. */
static const wf_weak *weak_map(wf_fstate *F, const wf_weak *w, const wmerge *m, const wf_val *res) {
  if (!w) return NULL;
  const wf_weak *a = weak_map(F, w->a, m, res), *b = weak_map(F, w->b, m, res);
  wf_val c = wmerge_res(m, w->cond, res), d = wmerge_res(m, w->dyn, res);
  if (a == w->a && b == w->b && c == w->cond && d == w->dyn) return w;
  wf_weak *n = wf_lo_weak_new(F);
  *n = *w;
  n->a = a;
  n->b = b;
  n->cond = c;
  n->dyn = d;
  return n;
}

/* Lower one branch into a new block; returns the block, fills wf_lo_snap/value. */
static wf_block *lower_branch(wf_fstate *F, wf_lo_branch_fn fn, void *arg, wf_lo_snap s0,
                              wf_lo_snap *out, wf_rv *val) {
  wf_block *blk = wf_b_newblock(F->fn, 0, NULL);
  wf_block *saved = F->b.block;
  wf_loc loc = F->b.loc;
  F->b.block = blk;
  wf_rv r;
  memset(&r, 0, sizeof r);
  if (fn) r = fn(F, arg);
  if (val) *val = r;
  F->nvars = s0.n; /* drop the branch's locals */
  *out = wf_lo_take_snap(F);
  wf_lo_restore_snap(F, s0);
  F->b.block = saved;
  F->b.loc = loc;
  return blk;
}

wf_rv wf_lo_if(wf_fstate *F, wf_val cond, wf_lo_branch_fn thenf, void *targ, wf_lo_branch_fn elsef,
               void *earg, int want_value, wf_expr *at) {
  /* statements pass no expression: errors point at the statement */
  wf_expr here;
  if (!at) {
    memset(&here, 0, sizeof here);
    here.line = F->b.loc.line;
    here.col = F->b.loc.col;
    at = &here;
  }
  wf_lo_snap s0 = wf_lo_take_snap(F);
  wf_lo_snap st, se;
  wf_rv tv, ev;
  wf_val mark = (wf_val)F->fn->nvals; /* values from here on are the branches' */
  wf_block *bt = lower_branch(F, thenf, targ, s0, &st, want_value ? &tv : NULL);
  wf_block *be = lower_branch(F, elsef, earg, s0, &se, want_value ? &ev : NULL);
  /* result type of the value */
  const wf_type *vt = NULL;
  int weak = 0;
  if (want_value) {
    if (tv.kind == RV_VAL) vt = tv.t;
    if (ev.kind == RV_VAL) {
      if (vt && vt != ev.t)
        ERR(at, "the two branches give different types: %s and %s", TN(vt), TN(ev.t));
      vt = ev.t;
    }
    if (!vt && wf_lo_isnum(&tv) && wf_lo_isnum(&ev)) {
      if (want_value == 2) {
        /* a weak value (see wf_weak): two literals need no result; else
        ** the branches yield the number as float64, exact for literals */
        weak = tv.kind == RV_LIT && ev.kind == RV_LIT ? 1 : 2;
        vt = weak == 2 ? wf_t_float(F->C->T, 64) : NULL;
      } else {
        vt = (tv.isint && ev.isint) ? t_i32(F) : t_f32(F);
      }
    }
    if (!vt && !weak) {
      wf_rv *bad = (tv.kind != RV_VAL && !wf_lo_isnum(&tv)) ? &tv : &ev;
      wf_lo_value(F, bad, NULL, at);
    }
    if (weak == 1) want_value = 0;
  }
  /* bindings changed in either branch */
  int nm = 0;
  int *idx = wf_front_alloc(F->C, sizeof(int) * (size_t)(s0.n + 1));
  const wf_type **types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(s0.n + 2));
  if (want_value) types[nm] = vt;
  int off = want_value ? 1 : 0;
  /* untyped in both branches: a weak conditional (wmerge), or a float64
  ** dyn leaf when that would grow too big (isdyn) */
  wmerge wm;
  memset(&wm, 0, sizeof wm);
  wm.mark = mark;
  char *isdyn = wf_front_alloc(F->C, (size_t)(s0.n + 1));
  for (int i = 0; i < s0.n; i++) {
    if (!binding_changed(&s0.v[i], &st.v[i]) && !binding_changed(&s0.v[i], &se.v[i])) continue;
    if (st.v[i].islit && se.v[i].islit) {
      const wf_weak *wt = var_weak(F, &st.v[i]), *we = var_weak(F, &se.v[i]);
      if (weak_size(wt, WEAK_MAXNODES) + weak_size(we, WEAK_MAXNODES) < WEAK_MAXNODES) {
        wmerge_add(F, &wm, i, wt, we);
        continue;
      }
      isdyn[nm] = 1;
      idx[nm] = i;
      types[off + nm] = wf_t_float(F->C->T, 64);
      nm++;
      continue;
    }
    const wf_type *t = st.v[i].t ? st.v[i].t : se.v[i].t;
    if (st.v[i].t && se.v[i].t && st.v[i].t != se.v[i].t)
      ERR(at, "local '%s' gets different types in the two branches: %s and %s", s0.v[i].name,
          TN(st.v[i].t), TN(se.v[i].t));
    idx[nm] = i;
    types[off + nm] = t;
    nm++;
  }
  /* the branches' values the merged weak conditionals use: more results */
  int nr = off + nm + wm.nv;
  if (wm.nv) {
    const wf_type **nt = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(nr + 1));
    memcpy(nt, types, sizeof(wf_type *) * (size_t)(off + nm));
    for (int k = 0; k < wm.nv; k++)
      nt[off + nm + k] = wf_vtype(F->fn, wm.v[k]);
    types = nt;
  }
  /* yields */
  wf_block *blocks[2] = {bt, be};
  wf_lo_snap *snaps[2] = {&st, &se};
  wf_rv *vals[2] = {&tv, &ev};
  wf_block *saved = F->b.block;
  for (int k = 0; k < 2; k++) {
    F->b.block = blocks[k];
    wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(nr + 1));
    if (want_value) ys[0] = wf_lo_value(F, vals[k], vt, at);
    for (int j = 0; j < nm; j++) {
      wf_var *x = &snaps[k]->v[idx[j]];
      ys[off + j] = wf_lo_var_value(F, x, types[off + j]);
    }
    /* a value of one branch; the other yields a zero, never selected */
    for (int j = 0; j < wm.nv; j++)
      ys[off + nm + j] = wm.side[j] == k ? wm.v[j] : wf_lo_const(F, types[off + nm + j], 0);
    wf_b_inst(&F->b, WF_OP_YIELD, nr, ys, 0, NULL, 0);
  }
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_IF, 1, &cond, nr, types, 2);
  in->blocks[0] = bt;
  in->blocks[1] = be;
  bt->parent = in;
  be->parent = in;
  for (int j = 0; j < nm; j++) {
    wf_var *x = &F->vars[idx[j]];
    if (isdyn[j]) {
      const wf_var *a = &st.v[idx[j]], *b = &se.v[idx[j]];
      const wf_weak *w =
          wf_lo_weak_dyn(F, in->res[off + j], var_weak(F, a)->isint && var_weak(F, b)->isint,
                         var_weak(F, a)->integral && var_weak(F, b)->integral);
      set_weak(x, w);
      continue;
    }
    x->v = in->res[off + j];
    x->t = types[off + j];
    x->islit = 0;
    x->weak = NULL;
  }
  for (int j = 0; j < wm.nvar; j++) {
    const wf_weak *a = weak_map(F, wm.wt[j], &wm, in->res + off + nm);
    const wf_weak *b = weak_map(F, wm.we[j], &wm, in->res + off + nm);
    set_weak(&F->vars[wm.var[j]], wf_lo_weak_node(F, cond, a, b));
  }
  wf_rv r;
  memset(&r, 0, sizeof r);
  if (weak) F->b.loc = (wf_loc){at->line, at->col};
  if (weak == 1)
    return wf_lo_weak_rv(wf_lo_weak_node(F, cond, wf_lo_weak_of(F, &tv), wf_lo_weak_of(F, &ev)));
  if (weak == 2)
    return wf_lo_weak_rv(wf_lo_weak_dyn(F, in->res[0], tv.isint && ev.isint,
                                        wf_lo_num_integral(&tv) && wf_lo_num_integral(&ev)));
  if (want_value) r = wf_lo_mkval(in->res[0], vt);
  return r;
}

static wf_rv br_expr(wf_fstate *F, void *arg) {
  return wf_lo_expr(F, (wf_expr *)arg);
}
static wf_rv br_true(wf_fstate *F, void *arg) {
  (void)arg;
  return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), 1), t_bool(F));
}
static wf_rv br_false(wf_fstate *F, void *arg) {
  (void)arg;
  return wf_lo_mkval(wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
}

static wf_rv br_boolexpr_while(wf_fstate *F, void *arg) {
  wf_expr *e = (wf_expr *)arg;
  wf_rv r = wf_lo_expr(F, e);
  return wf_lo_mkval(wf_lo_as_bool(F, r, e, "while condition"), t_bool(F));
}

static wf_rv br_boolexpr(wf_fstate *F, void *arg) {
  wf_expr *e = (wf_expr *)arg;
  wf_rv r = wf_lo_expr(F, e);
  return wf_lo_mkval(wf_lo_as_bool(F, r, e, "operand of 'and'/'or'"), t_bool(F));
}

/* Does evaluating e have no side effects and no memory reads? Then a
** short-circuit can evaluate it eagerly. */
static int simple_expr(wf_expr *e) {
  switch (e->kind) {
  case E_NUM:
  case E_TRUE:
  case E_FALSE:
  case E_NAME: return 1;
  case E_PAREN:
  case E_UN: return simple_expr(e->a);
  case E_BIN: /* '/' and '%' may trap on integer zero */
    return e->op != '/' && e->op != '%' && simple_expr(e->a) && simple_expr(e->b);
  case E_AND:
  case E_OR: return simple_expr(e->a) && simple_expr(e->b);
  case E_FIELD: return simple_expr(e->a);
  default: return 0;
  }
}

/* A value Lua counts as true whatever it is: every number (and every
** vector, matrix, ...); only false (and nil, which kernels lack) is not. */
static int always_true(const wf_rv *r) {
  return wf_lo_isnum(r) || (r->kind == RV_VAL && r->t->kind != WF_T_BOOL);
}

/* `a and b` (e->kind E_AND) or `a or b` whose left operand a is lowered:
** with an always-true a, `a and b` is b and `a or b` is a (b is not
** evaluated), as in Lua; else both are bools. */
static wf_rv andor_rest(wf_fstate *F, wf_expr *e, wf_rv a) {
  int isand = e->kind == E_AND;
  if (always_true(&a)) return isand ? wf_lo_expr(F, e->b) : a;
  wf_val av = wf_lo_as_bool(F, a, e->a, isand ? "operand of 'and'" : "operand of 'or'");
  if (simple_expr(e->b)) {
    wf_rv b = wf_lo_expr(F, e->b);
    wf_val bv = wf_lo_as_bool(F, b, e->b, isand ? "operand of 'and'" : "operand of 'or'");
    return wf_lo_mkval(wf_b_op2(&F->b, isand ? WF_OP_BAND : WF_OP_BOR, t_bool(F), av, bv),
                       t_bool(F));
  }
  if (isand) return wf_lo_if(F, av, br_boolexpr, e->b, br_false, NULL, 1, e);
  return wf_lo_if(F, av, br_true, NULL, br_boolexpr, e->b, 1, e);
}

wf_rv wf_lo_andor(wf_fstate *F, wf_expr *e) {
  /* `c and x or y` with a non-bool x: a conditional value */
  if (e->kind == E_OR && e->a->kind == E_AND) {
    wf_rv c = wf_lo_expr(F, e->a->a);
    /* a number c is true: `c and x` is x, then `x or y` */
    if (always_true(&c)) return andor_rest(F, e, wf_lo_expr(F, e->a->b));
    wf_val cv = wf_lo_as_bool(F, c, e->a->a, "condition of 'c and x or y'");
    if (simple_expr(e->a->b) && simple_expr(e->b)) {
      /* both sides cheap and safe: a select when x is not a bool */
      wf_lo_snap s0 = wf_lo_take_snap(F);
      wf_inst *mark = F->b.block->last;
      wf_rv x = wf_lo_expr(F, e->a->b);
      if (!(x.kind == RV_VAL && x.t->kind == WF_T_BOOL)) {
        wf_rv y = wf_lo_expr(F, e->b);
        /* two untyped numbers: a weak number that takes its type from
        ** where it is used, as a literal does */
        if (wf_lo_isnum(&x) && wf_lo_isnum(&y)) {
          F->b.loc = (wf_loc){e->line, e->col};
          return wf_lo_weak_select(F, cv, &x, &y);
        }
        const wf_type *t = x.kind == RV_VAL ? x.t : y.kind == RV_VAL ? y.t : NULL;
        if (x.kind == RV_VAL && y.kind == RV_VAL && x.t != y.t)
          ERR(e, "'c and x or y' gives different types: %s and %s", TN(x.t), TN(y.t));
        if (!t) t = (x.isint && y.isint) ? t_i32(F) : t_f32(F);
        wf_val xv = wf_lo_value(F, &x, t, e->a->b), yv = wf_lo_value(F, &y, t, e->b);
        return wf_lo_mkval(wf_b_op3(&F->b, WF_OP_SELECT, t, cv, xv, yv), t);
      }
      (void)mark;
      wf_lo_restore_snap(F, s0);
      /* x is a bool: plain and/or below (the lowered x stays unused) */
      wf_val a = cv;
      wf_val xa = x.v;
      wf_val ab = wf_b_op2(&F->b, WF_OP_BAND, t_bool(F), a, xa);
      wf_rv rb = wf_lo_expr(F, e->b);
      wf_val yb = wf_lo_as_bool(F, rb, e->b, "operand of 'or'");
      return wf_lo_mkval(wf_b_op2(&F->b, WF_OP_BOR, t_bool(F), ab, yb), t_bool(F));
    }
    /* general case: lazily evaluated branches */
    wf_rv probe;
    {
      /* type of x decides between select semantics and boolean logic */
      wf_lo_snap s0 = wf_lo_take_snap(F);
      wf_block *scratch = wf_b_newblock(F->fn, 0, NULL);
      wf_block *saved = F->b.block;
      F->b.block = scratch;
      probe = wf_lo_expr(F, e->a->b);
      F->b.block = saved;
      wf_lo_restore_snap(F, s0);
    }
    if (!(probe.kind == RV_VAL && probe.t->kind == WF_T_BOOL))
      return wf_lo_if(F, cv, br_expr, e->a->b, br_expr, e->b, 2, e);
    wf_rv ab = wf_lo_if(F, cv, br_boolexpr, e->a->b, br_false, NULL, 1, e->a);
    return wf_lo_if(F, ab.v, br_true, NULL, br_boolexpr, e->b, 1, e);
  }
  return andor_rest(F, e, wf_lo_expr(F, e->a));
}

/* ---- loops ---- */

/* What a loop body does to the bindings visible before it: the vars it
** changes (idx[], their types after the body in types[]), whether it may
** break or return, and how many return statements it lowers (nreturns
** grows by that much whenever the loop is lowered). idx and types have
** room for every var visible at the loop (cap). */
typedef struct loopinfo {
  int n, cap;
  int *idx;
  const wf_type **types;
  int exits, dret;
} loopinfo;

/* What a probe depends on, per visible var: its type, its literal state
** and which earlier var holds the same SSA value (a body "changes" a var
** when its value differs afterwards), but not the values themselves. So
** the probe of an inner loop made while probing the enclosing one also
** serves the enclosing loop's real lowering, where the carried vars are
** block parameters of the same types: each body of a nest is lowered a
** bounded number of times instead of twice per nesting level. */
typedef struct sigvar {
  const wf_type *t;
  const wf_weak *weak;
  double num;
  int flags; /* 1 literal, 2 integer literal, 4 no value, 8 parameter */
  int alias; /* the first var holding the same value, or -1 */
} sigvar;

struct wf_loopmemo {
  wf_fstate *F;
  int nsig;
  sigvar *sig;
  loopinfo li;
  struct wf_loopmemo *next;
};

static sigvar *loop_sig(wf_fstate *F) {
  int n = F->nvars;
  sigvar *sg = wf_front_alloc(F->C, sizeof(sigvar) * (size_t)(n ? n : 1));
  /* first var holding each value: an open-addressing table of var indices */
  int hn = 16;
  while (hn < 2 * n)
    hn *= 2;
  int *h = wf_front_alloc(F->C, sizeof(int) * (size_t)hn);
  for (int k = 0; k < hn; k++)
    h[k] = -1;
  for (int i = 0; i < n; i++) {
    wf_var *x = &F->vars[i];
    sg[i].t = x->t;
    sg[i].weak = x->islit ? x->weak : NULL;
    sg[i].num = x->islit ? x->num : 0;
    sg[i].flags = (x->islit ? 1 : 0) | (x->islit && x->litint ? 2 : 0) |
                  (x->v == WF_NOVAL ? 4 : 0) | (x->is_param ? 8 : 0);
    sg[i].alias = -1;
    if (x->v == WF_NOVAL) continue;
    unsigned k = ((unsigned)x->v * 2654435761u) & (unsigned)(hn - 1);
    while (h[k] >= 0 && F->vars[h[k]].v != x->v)
      k = (k + 1) & (unsigned)(hn - 1);
    if (h[k] >= 0)
      sg[i].alias = h[k];
    else
      h[k] = i;
  }
  return sg;
}

/* Same shape and leaves (the conditions' values do not matter). */
static int weak_same(const wf_weak *a, const wf_weak *b) {
  if (!a || !b) return a == b;
  if ((a->cond == WF_NOVAL) != (b->cond == WF_NOVAL)) return 0;
  if (a->op != b->op) return 0;
  if (a->cond == WF_NOVAL && !a->op)
    return (a->dyn == WF_NOVAL) == (b->dyn == WF_NOVAL) && a->isint == b->isint &&
           a->integral == b->integral && !memcmp(&a->num, &b->num, sizeof a->num);
  return weak_same(a->a, b->a) && weak_same(a->b, b->b);
}

static int sig_same(const sigvar *a, int na, const sigvar *b, int nb) {
  if (na != nb) return 0;
  for (int i = 0; i < na; i++)
    if (a[i].t != b[i].t || a[i].flags != b[i].flags || a[i].alias != b[i].alias ||
        memcmp(&a[i].num, &b[i].num, sizeof a[i].num) || !weak_same(a[i].weak, b[i].weak))
      return 0;
  return 1;
}

typedef void (*loop_body_fn)(wf_fstate *F, void *arg, wf_val iv);

/* Lower body() into a scratch block with the current bindings and fill li
** with what it changed. Restores all state. Loops met inside are not
** lowered for real (F->probing): only their effect is applied. */
static void probe_loop(wf_fstate *F, loop_body_fn body, void *arg, const wf_type *ivt,
                       loopinfo *li) {
  wf_lo_snap s0 = wf_lo_take_snap(F);
  int nb = F->nbreaks, nr = F->nreturns;
  wf_block *scratch = wf_b_newblock(F->fn, ivt ? 1 : 0, ivt ? &ivt : NULL);
  wf_block *saved = F->b.block;
  wf_loc loc = F->b.loc;
  F->b.block = scratch;
  F->probing++;
  body(F, arg, ivt ? scratch->params[0] : WF_NOVAL);
  F->probing--;
  F->nvars = s0.n;
  li->cap = s0.n + 1;
  li->idx = wf_front_alloc(F->C, sizeof(int) * (size_t)li->cap);
  li->types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)li->cap);
  li->n = 0;
  for (int i = 0; i < s0.n; i++)
    if (F->vars[i].v != s0.v[i].v) {
      li->idx[li->n] = i;
      li->types[li->n] = F->vars[i].t;
      li->n++;
    }
  li->exits = F->nbreaks != nb || F->nreturns != nr;
  li->dret = F->nreturns - nr;
  wf_lo_restore_snap(F, s0);
  F->nbreaks = nb;
  F->nreturns = nr;
  F->b.block = saved;
  F->b.loc = loc;
}

/* What loop statement s changes from the current bindings: remembered
** from an earlier probe with the same signature, else probed now. li gets
** its own arrays (the real lowering may add to them). */
static void loop_info(wf_fstate *F, wf_stmt *s, loop_body_fn body, void *arg, const wf_type *ivt,
                      loopinfo *li) {
  sigvar *sg = loop_sig(F);
  struct wf_loopmemo *m;
  for (m = s->memo; m; m = m->next)
    if (m->F == F && sig_same(m->sig, m->nsig, sg, F->nvars)) break;
  if (!m) {
    m = wf_front_alloc(F->C, sizeof *m);
    m->F = F;
    m->nsig = F->nvars;
    m->sig = sg;
    probe_loop(F, body, arg, ivt, &m->li);
    m->next = s->memo;
    s->memo = m;
  }
  *li = m->li;
  li->cap = F->nvars + 1;
  li->idx = wf_front_alloc(F->C, sizeof(int) * (size_t)li->cap);
  li->types = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)li->cap);
  memcpy(li->idx, m->li.idx, sizeof(int) * (size_t)m->li.n);
  memcpy(li->types, m->li.types, sizeof(wf_type *) * (size_t)m->li.n);
}

/* While an enclosing loop is probed, a loop only needs its effect: the
** vars it changes hold values of their new types after it. */
static void loop_effect(wf_fstate *F, const loopinfo *li) {
  for (int j = 0; j < li->n; j++) {
    wf_var *x = &F->vars[li->idx[j]];
    x->v = undef_of(F, li->types[j]);
    x->t = li->types[j];
    if (x->islit) loop_typed(F, x);
    x->islit = 0;
    x->weak = NULL;
  }
  F->nreturns += li->dret;
}

/* Index of a var in idx[], or -1. */
static int find_idx(int n, const int *idx, int vi) {
  for (int j = 0; j < n; j++)
    if (idx[j] == vi) return j;
  return -1;
}

/* Check a real lowering against its probe: vars the body changed that are
** not carried (a probe sees two vars holding one value where the real
** bindings are two block parameters, and `a = b` then changes a only for
** real) are added to li. Returns how many; the caller lowers again. */
static int extra_changes(wf_fstate *F, wf_lo_snap entry, loopinfo *li) {
  int added = 0;
  for (int i = 0; i < entry.n; i++) {
    if (F->vars[i].v == entry.v[i].v || find_idx(li->n, li->idx, i) >= 0) continue;
    if (li->n >= li->cap) break; /* cannot happen: cap > entry.n */
    li->idx[li->n] = i;
    li->types[li->n] = F->vars[i].t;
    li->n++;
    added++;
  }
  return added;
}

/* After lowering a loop region: extra_changes, and when it added locals,
** back to the block outside (the caller then lowers the loop again). */
static int region_changed(wf_fstate *F, wf_lo_snap entry, loopinfo *li, wf_block *saved) {
  int extra = extra_changes(F, entry, li);
  if (extra) F->b.block = saved;
  return extra;
}

typedef struct forarg {
  wf_stmt *s;
  int weak;     /* the counter is an untyped number (a dyn leaf: int, or float64) */
  int integral; /* ... whose values are integers (start and step are) */
} forarg;

void wf_lo_loop_body(wf_fstate *F, wf_stmt *s) {
  int scope = F->nvars, saved = F->cont, nc = F->nconts;
  F->cont = -1;
  if (s->contlabel)
    F->cont = wf_lo_addvar(F, "(cont)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  wf_lo_stmts(F, &s->body, 0);
  F->cont = saved;
  F->nconts = nc; /* a continue does not leave the loop */
  F->nvars = scope;
}

static void for_body(wf_fstate *F, void *arg, wf_val iv) {
  forarg *fa = arg;
  wf_stmt *s = fa->s;
  int scope = F->nvars;
  int vi = wf_lo_addvar(F, s->names[0], iv, wf_vtype(F->fn, iv));
  if (fa->weak) {
    int isint = wf_vtype(F->fn, iv)->kind == WF_T_INT;
    set_weak(&F->vars[vi], wf_lo_weak_dyn(F, iv, isint, isint || fa->integral));
  }
  wf_lo_loop_body(F, s);
  F->nvars = scope;
}

typedef struct whilearg {
  wf_stmt *s;
} whilearg;

static void while_probe_body(wf_fstate *F, void *arg, wf_val iv) {
  (void)iv;
  wf_stmt *s = ((whilearg *)arg)->s;
  wf_rv c = wf_lo_expr(F, s->conds[0]);
  wf_lo_as_bool(F, c, s->conds[0], "while condition");
  wf_lo_loop_body(F, s);
}

/* Lower the statements of a repeat body from `from` on, then its until
** condition, which sees the body's locals. When a statement may exit
** (break or return), the rest of the body and the condition go into the
** `if not exiting` branch, whose value is the condition (true when
** exiting: the loop stops through its flags anyway). Returns the bool. */
typedef struct repeatarg {
  wf_stmt *s;
  int from;
} repeatarg;

static wf_val repeat_until(wf_fstate *F, wf_stmt *s, int from);

static wf_rv br_repeat_rest(wf_fstate *F, void *arg) {
  repeatarg *ra = arg;
  return wf_lo_mkval(repeat_until(F, ra->s, ra->from), t_bool(F));
}

static wf_rv br_until(wf_fstate *F, void *arg) {
  wf_stmt *s = arg;
  wf_rv c = wf_lo_expr(F, s->conds[0]);
  return wf_lo_mkval(wf_lo_as_bool(F, c, s->conds[0], "until condition"), t_bool(F));
}

static wf_val repeat_until(wf_fstate *F, wf_stmt *s, int from) {
  wf_block_ast *b = &s->body;
  for (int i = from; i < b->n; i++) {
    int b0 = F->nbreaks, r0 = F->nreturns, c0 = F->nconts;
    wf_lo_stmt(F, b->s[i]);
    if (b->s[i]->kind == S_BREAK || b->s[i]->kind == S_RETURN || b->s[i]->kind == S_GOTO) break;
    if (F->nconts != c0 && i + 1 < b->n) {
      /* a `goto continue` skips the rest of the body, not the condition
      ** (LuaJIT has checked that no local the condition reads is skipped) */
      F->b.loc = (wf_loc){b->s[i + 1]->line, b->s[i + 1]->col};
      wf_lo_rest sa = {b, i + 1};
      wf_lo_if(F, wf_lo_continuing(F), wf_lo_br_rest, &sa, NULL, NULL, 0, NULL);
      if (F->nbreaks == b0 && F->nreturns == r0) return br_until(F, s).v;
      /* not when leaving the loop (break or return) */
      wf_val ex = F->vars[F->retflag].v;
      if (F->brk >= 0) ex = wf_b_op2(&F->b, WF_OP_BOR, t_bool(F), ex, F->vars[F->brk].v);
      return wf_lo_if(F, wf_b_op1(&F->b, WF_OP_NOT, t_bool(F), ex), br_until, s, br_true, NULL, 1,
                      s->conds[0])
          .v;
    }
    if ((F->nbreaks != b0 || F->nreturns != r0) && i + 1 < b->n) {
      F->b.loc = (wf_loc){b->s[i + 1]->line, b->s[i + 1]->col};
      repeatarg ra = {s, i + 1};
      return wf_lo_if(F, wf_lo_continuing(F), br_repeat_rest, &ra, br_true, NULL, 1, s->conds[0]).v;
    }
  }
  wf_rv c = wf_lo_expr(F, s->conds[0]);
  return wf_lo_as_bool(F, c, s->conds[0], "until condition");
}

/* repeat_until with the loop's "(cont)" flag (see wf_lo_loop_body). */
static wf_val repeat_pass(wf_fstate *F, wf_stmt *s) {
  int saved = F->cont, nc = F->nconts;
  F->cont = -1;
  if (s->contlabel)
    F->cont = wf_lo_addvar(F, "(cont)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  wf_val until = repeat_until(F, s, 0);
  F->cont = saved;
  F->nconts = nc;
  return until;
}

static void repeat_body(wf_fstate *F, void *arg, wf_val iv) {
  (void)iv;
  int scope = F->nvars;
  repeat_pass(F, ((whilearg *)arg)->s);
  F->nvars = scope;
}

/* The values of the carried vars (initial values before the loop, yielded
** values at the end of a block). */
static void current_vals(wf_fstate *F, const loopinfo *li, wf_val *out) {
  for (int j = 0; j < li->n; j++)
    out[j] = wf_lo_var_value(F, &F->vars[li->idx[j]], li->types[j]);
}

/* The carried vars take the values vals[0..n) (typed values, no longer
** literals). */
static void bind_vals(wf_fstate *F, const wf_val *vals, const loopinfo *li) {
  for (int j = 0; j < li->n; j++) {
    wf_var *x = &F->vars[li->idx[j]];
    x->v = vals[j];
    x->t = li->types[j];
    if (x->islit) loop_typed(F, x);
    x->islit = 0;
    x->weak = NULL;
  }
}

/* In a loop block: the carried vars are its parameters from off on. */
static void bind_params(wf_fstate *F, wf_block *blk, int off, const loopinfo *li) {
  bind_vals(F, blk->params + off, li);
}

/* After the loop: the carried vars hold its results from res[off] on. */
static void bind_results(wf_fstate *F, wf_inst *in, int off, const loopinfo *li) {
  bind_vals(F, in->res + off, li);
}

/* exit test: brk or ret, from the carried flags */
static wf_val exit_flag(wf_fstate *F, const loopinfo *li) {
  const wf_type *bt = t_bool(F);
  wf_val c = WF_NOVAL;
  if (find_idx(li->n, li->idx, F->brk) >= 0) c = F->vars[F->brk].v;
  if (find_idx(li->n, li->idx, F->retflag) >= 0) {
    wf_val r = F->vars[F->retflag].v;
    c = c == WF_NOVAL ? r : wf_b_op2(&F->b, WF_OP_BOR, bt, c, r);
  }
  return c;
}

/* if (cond) trap msg: an error at the current position when cond holds. */
static void trap_when(wf_fstate *F, wf_val cond, const char *msg) {
  wf_block *saved = F->b.block;
  wf_block *yes = wf_b_newblock(F->fn, 0, NULL), *no = wf_b_newblock(F->fn, 0, NULL);
  F->b.block = yes;
  wf_inst *tr = wf_b_inst(&F->b, WF_OP_TRAP, 0, NULL, 0, NULL, 0);
  tr->str = wf_ir_strdup(F->C->mod, msg); /* the module's arena outlives the front end's */
  wf_b_inst(&F->b, WF_OP_YIELD, 0, NULL, 0, NULL, 0);
  F->b.block = no;
  wf_b_inst(&F->b, WF_OP_YIELD, 0, NULL, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_IF, 1, &cond, 0, NULL, 2);
  in->blocks[0] = yes;
  in->blocks[1] = no;
  yes->parent = in;
  no->parent = in;
}

/* The while form's step at the end of an iteration at iv: iv + step. An
** integer counter that would pass its type's limit (the add wraps) ends
** the loop through the break flag, so `for j = 2147483646, 2147483647`
** runs twice; a float counter that stops changing (iv + step == iv) is
** an error instead of a hang. The backends do the same for FOR. */
static wf_val for_next(wf_fstate *F, const wf_type *t, wf_val iv, wf_val step, int stepsign) {
  const wf_type *bt = t_bool(F);
  wf_val next = wf_b_op2(&F->b, WF_OP_ADD, t, iv, step);
  if (t->kind == WF_T_FLOAT) {
    char msg[128];
    snprintf(msg, sizeof msg,
             "for loop counter stops changing: float%d counter + step == counter (use an integer "
             "loop)",
             t->bits);
    trap_when(F, wf_b_op2(&F->b, WF_OP_EQ, bt, next, iv), msg);
    return next;
  }
  wf_val up = wf_b_op2(&F->b, WF_OP_LT, bt, next, iv), wrapped = up;
  if (t->is_signed && stepsign <= 0) {
    wf_val down = wf_b_op2(&F->b, WF_OP_GT, bt, next, iv);
    wf_val pos = wf_b_op2(&F->b, WF_OP_GT, bt, step, wf_lo_const(F, t, 0));
    wrapped = stepsign < 0 ? down : wf_b_op3(&F->b, WF_OP_SELECT, bt, pos, up, down);
  }
  wf_var *brk = &F->vars[F->brk];
  brk->v = wf_b_op2(&F->b, WF_OP_BOR, bt, brk->v, wrapped);
  return next;
}

/* The real lowering of a numeric for: a FOR op, or a WHILE carrying the
** induction variable when the body may exit. Returns 0 when done, else
** the number of vars added to li (nothing was linked; lower again). */
static int for_real(wf_fstate *F, forarg *fa, const wf_type *t, const wf_val *bv, int stepsign,
                    loopinfo *li, wf_lo_snap entry) {
  wf_stmt *s = fa->s;
  int n = li->n;
  wf_val *inits = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 4));
  const wf_type **ptypes = wf_front_alloc(F->C, sizeof(wf_type *) * (size_t)(n + 1));
  ptypes[0] = t;
  for (int j = 0; j < n; j++)
    ptypes[1 + j] = li->types[j];
  wf_block *saved = F->b.block;
  if (!li->exits) {
    inits[0] = bv[0];
    inits[1] = bv[1];
    inits[2] = bv[2];
    current_vals(F, li, inits + 3);
    wf_block *body = wf_b_newblock(F->fn, n + 1, ptypes);
    F->b.block = body;
    bind_params(F, body, 1, li);
    for_body(F, fa, body->params[0]);
    int extra = region_changed(F, entry, li, saved);
    if (extra) return extra;
    wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
    current_vals(F, li, ys);
    F->b.loc = (wf_loc){s->line, s->col};
    wf_b_inst(&F->b, WF_OP_YIELD, n, ys, 0, NULL, 0);
    F->b.block = saved;
    wf_inst *in = wf_b_inst(&F->b, WF_OP_FOR, n + 3, inits, n, li->types, 1);
    in->blocks[0] = body;
    body->parent = in;
    bind_results(F, in, 0, li);
    return 0;
  }
  /* while form: carried (i, vars...) */
  inits[0] = bv[0];
  current_vals(F, li, inits + 1);
  const wf_type *bt = t_bool(F);
  /* before: condition */
  wf_block *before = wf_b_newblock(F->fn, n + 1, ptypes);
  F->b.block = before;
  bind_params(F, before, 1, li);
  wf_val iv = before->params[0];
  wf_val inrange;
  if (stepsign > 0)
    inrange = wf_b_op2(&F->b, WF_OP_LE, bt, iv, bv[1]);
  else if (stepsign < 0)
    inrange = wf_b_op2(&F->b, WF_OP_GE, bt, iv, bv[1]);
  else {
    wf_val pos = wf_b_op2(&F->b, WF_OP_GT, bt, bv[2], wf_lo_const(F, t, 0));
    inrange = wf_b_op3(&F->b, WF_OP_SELECT, bt, pos, wf_b_op2(&F->b, WF_OP_LE, bt, iv, bv[1]),
                       wf_b_op2(&F->b, WF_OP_GE, bt, iv, bv[1]));
  }
  wf_val ex = exit_flag(F, li);
  if (ex != WF_NOVAL)
    inrange = wf_b_op2(&F->b, WF_OP_BAND, bt, inrange, wf_b_op1(&F->b, WF_OP_NOT, bt, ex));
  wf_val *cargs = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 2));
  cargs[0] = inrange;
  cargs[1] = iv;
  current_vals(F, li, cargs + 2);
  wf_b_inst(&F->b, WF_OP_COND, n + 2, cargs, 0, NULL, 0);
  /* after: body, then i + step */
  wf_block *after = wf_b_newblock(F->fn, n + 1, ptypes);
  F->b.block = after;
  bind_params(F, after, 1, li);
  for_body(F, fa, after->params[0]);
  F->b.loc = (wf_loc){s->line, s->col};
  wf_val next = for_next(F, t, after->params[0], bv[2], stepsign);
  int extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  ys[0] = next;
  current_vals(F, li, ys + 1);
  wf_b_inst(&F->b, WF_OP_YIELD, n + 1, ys, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_WHILE, n + 1, inits, n + 1, ptypes, 2);
  in->blocks[0] = before;
  in->blocks[1] = after;
  before->parent = in;
  after->parent = in;
  bind_results(F, in, 1, li);
  return 0;
}

/* A typed int, or an untyped number written as an integer (Lua 5.3's
** integer subtype: 3 but not 3.0 or 3e9), or (for the limit) any number
** with an integer value. */
static int int_bound(const wf_rv *r, int by_value) {
  if (r->kind == RV_VAL) return r->t->kind == WF_T_INT;
  return by_value ? wf_lo_num_integral(r) : r->isint && wf_lo_num_integral(r);
}

/* The type of a numeric for's counter, as Lua 5.3 decides: an integer loop
** when start and step are integers (a fractional limit is floored, or
** ceiled for a negative step, which gives the same values), else a float
** loop. A typed bound gives its type (and a typed counter). Untyped bounds
** make an untyped counter (*weak: it takes the type its uses ask for, as a
** literal does, and holds LuaJIT's values exactly): a float64 loop when
** the start or step is a float (0.5, 1.0, 3e9; typed int bounds are then
** converted), else an int32 loop, or int64 when a literal does not fit
** int32 (so it runs as Lua's, not from a wrapped bound). */
static const wf_type *for_type(wf_fstate *F, wf_rv *lo, wf_rv *hi, wf_rv *st, int *weak) {
  const wf_type *t = lo->kind == RV_VAL   ? lo->t
                     : hi->kind == RV_VAL ? hi->t
                     : st->kind == RV_VAL ? st->t
                                          : NULL;
  const wf_type *f64 = wf_t_float(F->C->T, 64);
  if (t && t->kind != WF_T_INT) return t;
  int stepsign = st->kind == RV_LIT ? (st->num > 0) - (st->num < 0) : 0;
  int hiint = int_bound(hi, 1);
  if (!hiint && hi->kind == RV_LIT && isfinite(hi->num) && stepsign && int_bound(lo, 0) &&
      int_bound(st, 0)) {
    /* `for k = 1, 2.5`: the same values as `for k = 1, 2` */
    hi->num = stepsign > 0 ? floor(hi->num) : ceil(hi->num);
    hiint = 1;
  }
  if (int_bound(lo, 0) && int_bound(st, 0) && hiint) {
    if (t) return t;
    *weak = 1; /* an untyped integer counter */
    return t_i32(F);
  }
  /* typed bounds of different types: the caller's error */
  const wf_rv *b3[3] = {lo, hi, st};
  for (int k = 0; k < 3; k++)
    if (b3[k]->kind == RV_VAL && b3[k]->t != t) return t;
  *weak = 1;
  return f64;
}

void wf_lo_for(wf_fstate *F, wf_stmt *s) {
  wf_rv lo = wf_lo_expr(F, s->exprs[0]);
  wf_rv hi = wf_lo_expr(F, s->exprs[1]);
  wf_rv st = s->nexprs > 2 ? wf_lo_expr(F, s->exprs[2]) : wf_lo_mklit(1, 1);
  F->b.loc = (wf_loc){s->line, s->col};
  forarg fa = {s, 0, 0};
  const wf_type *t = for_type(F, &lo, &hi, &st, &fa.weak);
  fa.integral = int_bound(&lo, 1) && int_bound(&st, 1);
  if (t == t_i32(F) && lo.kind != RV_VAL && hi.kind != RV_VAL && st.kind != RV_VAL) {
    wf_rv *b3[3] = {&lo, &hi, &st};
    for (int k = 0; k < 3; k++)
      if (b3[k]->kind == RV_LIT && !(b3[k]->num >= -0x1p31 && b3[k]->num < 0x1p31))
        t = wf_t_int(F->C->T, 64, 1);
  }
  if (t->kind != WF_T_INT && t->kind != WF_T_FLOAT)
    wf_lo_err(F, s->line, s->col, "for loop bounds must be numbers, got %s", TN(t));
  wf_expr *es[3] = {s->exprs[0], s->exprs[1], s->nexprs > 2 ? s->exprs[2] : s->exprs[1]};
  wf_rv *rs[3] = {&lo, &hi, &st};
  wf_val bv[3];
  for (int k = 0; k < 3; k++) {
    if (rs[k]->kind == RV_VAL && rs[k]->t != t && !(fa.weak && rs[k]->t->kind == WF_T_INT))
      wf_lo_err(F, es[k]->line, es[k]->col, "for loop bounds have different types: %s and %s",
                TN(t), TN(rs[k]->t));
    /* an int bound of a float64 loop that a fractional number made */
    if (fa.weak && rs[k]->kind == RV_VAL && rs[k]->t != t)
      bv[k] = wf_b_op1(&F->b, WF_OP_CAST, t, rs[k]->v);
    else
      bv[k] = wf_lo_value(F, rs[k], t, es[k]);
  }
  int stepsign = 0; /* known sign of a literal step */
  if (st.kind == RV_LIT) {
    if (st.num == 0) wf_lo_err(F, s->line, s->col, "for loop step is zero");
    stepsign = st.num > 0 ? 1 : -1;
  }
  /* break flag for this loop */
  int saved_brk = F->brk;
  int scope = F->nvars;
  int saved_base = F->loopbase, saved_line = F->loopline;
  F->loopbase = scope;
  F->loopline = s->line;
  F->brk = wf_lo_addvar(F, "(break)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  loopinfo li;
  loop_info(F, s, for_body, &fa, t, &li);
  int nb0 = F->nbreaks;
  if (F->probing) {
    loop_effect(F, &li);
  } else {
    /* a step known at run time only: zero is an error (the FOR op's
    ** backends check it themselves) */
    if (li.exits && stepsign == 0)
      trap_when(F, wf_b_op2(&F->b, WF_OP_EQ, t_bool(F), bv[2], wf_lo_const(F, t, 0)),
                "for loop step is zero");
    wf_lo_snap entry = wf_lo_take_snap(F);
    int nr0 = F->nreturns;
    while (for_real(F, &fa, t, bv, stepsign, &li, entry)) {
      wf_lo_restore_snap(F, entry);
      F->nbreaks = nb0;
      F->nreturns = nr0;
    }
  }
  F->nbreaks = nb0;
  F->brk = saved_brk;
  F->loopbase = saved_base;
  F->loopline = saved_line;
  F->nvars = scope;
}

/* The real lowering of a while or repeat loop (the WHILE form; `before`
** holds the condition, and for repeat the body too). Returns as for_real. */
static int while_real(wf_fstate *F, wf_stmt *s, int is_repeat, loopinfo *li, wf_lo_snap entry) {
  int n = li->n;
  wf_val *inits = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  current_vals(F, li, inits);
  const wf_type *bt = t_bool(F);
  wf_block *before = wf_b_newblock(F->fn, n, li->types);
  wf_block *saved = F->b.block;
  F->b.block = before;
  bind_params(F, before, 0, li);
  wf_val cont;
  if (!is_repeat) {
    wf_val ex = exit_flag(F, li);
    if (ex == WF_NOVAL) {
      wf_rv c = wf_lo_expr(F, s->conds[0]);
      cont = wf_lo_as_bool(F, c, s->conds[0], "while condition");
    } else {
      wf_val notex = wf_b_op1(&F->b, WF_OP_NOT, bt, ex);
      wf_rv r = wf_lo_if(F, notex, br_boolexpr_while, s->conds[0], br_false, NULL, 1, s->conds[0]);
      cont = r.v;
    }
  } else {
    int inner = F->nvars;
    wf_val until = repeat_pass(F, s);
    wf_val ex = exit_flag(F, li);
    cont = wf_b_op1(&F->b, WF_OP_NOT, bt, until);
    if (ex != WF_NOVAL)
      cont = wf_b_op2(&F->b, WF_OP_BAND, bt, cont, wf_b_op1(&F->b, WF_OP_NOT, bt, ex));
    F->nvars = inner;
  }
  int extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  F->b.loc = (wf_loc){s->line, s->col};
  wf_val *cargs = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  cargs[0] = cont;
  current_vals(F, li, cargs + 1);
  wf_b_inst(&F->b, WF_OP_COND, n + 1, cargs, 0, NULL, 0);
  wf_block *after = wf_b_newblock(F->fn, n, li->types);
  F->b.block = after;
  bind_params(F, after, 0, li);
  if (!is_repeat) wf_lo_loop_body(F, s);
  extra = region_changed(F, entry, li, saved);
  if (extra) return extra;
  wf_val *ys = wf_front_alloc(F->C, sizeof(wf_val) * (size_t)(n + 1));
  current_vals(F, li, ys);
  F->b.loc = (wf_loc){s->line, s->col};
  wf_b_inst(&F->b, WF_OP_YIELD, n, ys, 0, NULL, 0);
  F->b.block = saved;
  wf_inst *in = wf_b_inst(&F->b, WF_OP_WHILE, n, inits, n, li->types, 2);
  in->blocks[0] = before;
  in->blocks[1] = after;
  before->parent = in;
  after->parent = in;
  bind_results(F, in, 0, li);
  return 0;
}

void wf_lo_while(wf_fstate *F, wf_stmt *s, int is_repeat) {
  int saved_brk = F->brk;
  int scope = F->nvars;
  int saved_base = F->loopbase, saved_line = F->loopline;
  F->loopbase = scope;
  F->loopline = s->line;
  F->b.loc = (wf_loc){s->line, s->col};
  F->brk = wf_lo_addvar(F, "(break)", wf_b_consti(&F->b, t_bool(F), 0), t_bool(F));
  whilearg wa = {s};
  int nb0 = F->nbreaks;
  loopinfo li;
  loop_info(F, s, is_repeat ? repeat_body : while_probe_body, &wa, NULL, &li);
  if (F->probing) {
    loop_effect(F, &li);
  } else {
    wf_lo_snap entry = wf_lo_take_snap(F);
    int nr0 = F->nreturns;
    while (while_real(F, s, is_repeat, &li, entry)) {
      wf_lo_restore_snap(F, entry);
      F->nbreaks = nb0;
      F->nreturns = nr0;
    }
  }
  F->nbreaks = nb0;
  F->brk = saved_brk;
  F->loopbase = saved_base;
  F->loopline = saved_line;
  F->nvars = scope;
}
