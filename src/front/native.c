/*
** native.c -- lowering of the native builtins (src/geom/native.h: the
** geometry queries written in C) and of the generic for over a query.
**
** A call becomes one WF_OP_NATIVE instruction whose imm is the table row;
** argument types come from the row's type specs, trailing optional
** arguments from its defaults, and a struct result (mesh_query_point_t)
** is interned from its spec. A generic for
**
**   for f in weft.mesh_query_aabb(id, lo, hi) do body end
**
** is rewritten into kernel syntax the rest of the front end lowers:
**
**   do
**     local (query) = <begin row>(id, lo, hi)     -- the state's handle
**     while <_next row>((query)) do
**       local f = <_get row>((query))
**       body
**     end
**   end
**
** with E_NATIVE nodes for the three calls; `(query)` cannot clash with a
** user's name. break and return inside the body work as in any while. A
** hash grid loop whose body always runs to its end takes a nested form
** instead, a counted loop over each run of candidates (hash_grid_nested).
*/
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"
#include "geom/native.h"

#define ERR(e, ...) wf_lo_err(F, (e)->line, (e)->col, __VA_ARGS__)
#define TN(t) wf_lo_tname(F->C, (t))

int wf_nat_find(const char *name) {
  for (int r = 0; r < WF_NAT__COUNT; r++)
    if (!(wf_native_tab[r].flags & WF_NATF_INTERNAL) && !strcmp(name, wf_native_tab[r].name))
      return r;
  return -1;
}

static const wf_type *letter_type(wf_fstate *F, char c) {
  wf_types *T = F->C->T;
  switch (c) {
  case 'b': return wf_t_bool(T);
  case 'i': return wf_t_int(T, 32, 1);
  case 'u': return wf_t_int(T, 64, 0);
  case 'f': return wf_t_float(T, 32);
  case 'v': return wf_t_vec(T, 3, wf_t_float(T, 32));
  default: return NULL;
  }
}

/* The type of a result spec: a letter, or "{name:letter,...}" laid out as
** C would (Warp's struct names for the two query results). */
static const wf_type *spec_type(wf_fstate *F, const char *spec, const char *row) {
  if (spec[0] != '{') return letter_type(F, spec[0]);
  wf_field fields[16];
  char names[16][16];
  int n = 0;
  uint32_t off = 0;
  for (const char *p = spec + 1; *p && *p != '}' && n < 16;) {
    size_t len = strcspn(p, ":");
    if (len >= sizeof names[0] || !p[len]) break;
    memcpy(names[n], p, len);
    names[n][len] = 0;
    const wf_type *t = letter_type(F, p[len + 1]);
    if (!t) return NULL;
    off = (off + t->align - 1) / t->align * t->align;
    fields[n] = (wf_field){names[n], t, off};
    off += t->size;
    n++;
    p += len + 2;
    if (*p == ',') p++;
  }
  char sname[80];
  if (!strcmp(spec, WF_QP_T))
    snprintf(sname, sizeof sname, "mesh_query_point_t");
  else if (!strcmp(spec, WF_QR_T))
    snprintf(sname, sizeof sname, "mesh_query_ray_t");
  else
    snprintf(sname, sizeof sname, "%s_t", row);
  return wf_t_struct(F->C->T, sname, n, fields);
}

/* Number of optional trailing arguments (values in the defaults column). */
static int nopt(const wf_nativeinfo *ni, double *vals) {
  int n = 0;
  for (const char *p = ni->defaults; *p && n < 8;) {
    char *end;
    vals[n++] = strtod(p, &end);
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return n;
}

/* A query's gradient (lua/weft/geom.lua, P.native_diff): the float fields
** of its result recomputed in kernel code from the arguments, the result
** and the mesh's points. Compiled beside the kernel as "<row>$diff"
** (params: the row's arguments, then its result); autodiff reverses it in
** place of the native (src/ad/rules.c), so the forward runs the native
** alone and the gradient has one definition on both backends. */
static void diff_func(wf_fstate *F, int row, int na, const wf_val *vals, const wf_type *rt,
                      wf_expr *at) {
  lua_State *L = F->C->L;
  int top = lua_gettop(L);
  lua_getfield(L, F->C->envidx, "native_diff");
  if (lua_istable(L, -1)) lua_getfield(L, -1, wf_native_tab[row].name);
  if (lua_isfunction(L, -1)) {
    const wf_type *pt[17];
    for (int i = 0; i < na && i < 16; i++)
      pt[i] = wf_vtype(F->fn, vals[i]);
    pt[na] = rt;
    char name[96], path[96];
    snprintf(name, sizeof name, "%s" WF_NAT_DIFF_SUFFIX, wf_native_tab[row].name);
    snprintf(path, sizeof path, "weft.%s", wf_native_tab[row].name);
    if (na > 16 || wf_res_auxfunc(F, lua_gettop(L), name, na + 1, pt, path, at) != 0)
      ERR(at, "weft.%s: internal error: its gradient function must take %d parameters",
          wf_native_tab[row].name, na + 1);
  }
  lua_settop(L, top);
}

/* Emit row `row` on the arguments args[0..nargs) (expressions); at is the
** call for positions; name is the builtin's name as the user wrote it. */
static int emit_row(wf_fstate *F, int row, const char *name, wf_expr **args, int nargs, wf_expr *at,
                    wf_rv *out) {
  const wf_nativeinfo *ni = &wf_native_tab[row];
  int na = wf_native_nargs(ni);
  double defs[8];
  int no = nopt(ni, defs);
  if (nargs < na - no || nargs > na) {
    if (no) ERR(at, "weft.%s expects %d to %d arguments, got %d", name, na - no, na, nargs);
    ERR(at, "weft.%s expects %d argument%s, got %d", name, na, na == 1 ? "" : "s", nargs);
  }
  wf_val vals[16];
  for (int i = 0; i < na; i++) {
    const wf_type *t = letter_type(F, ni->args[i]);
    if (i >= nargs) {
      vals[i] = wf_lo_const(F, t, defs[i - (na - no)]);
      continue;
    }
    wf_rv r = wf_lo_expr(F, args[i]);
    if (r.kind == RV_VAL && r.t != t) {
      const char *hint = ni->args[i] == 'u' && i == 0 ? " (an object's id, e.g. mesh.id)" : "";
      ERR(args[i], "weft.%s: argument %d must be %s%s, got %s", name, i + 1, TN(t), hint, TN(r.t));
    }
    if (r.kind != RV_VAL && !wf_lo_isnum(&r))
      ERR(args[i], "weft.%s: argument %d must be %s", name, i + 1, TN(t));
    vals[i] = wf_lo_value(F, &r, t, args[i]);
  }
  F->b.loc = (wf_loc){at->line, at->col};
  const wf_type *rt = ni->res[0] ? spec_type(F, ni->res, ni->name) : NULL;
  if (ni->res[0] && !rt) ERR(at, "weft.%s: internal error: bad result spec", name);
  wf_inst *in = wf_b_inst(&F->b, WF_OP_NATIVE, na, vals, rt ? 1 : 0, rt ? &rt : NULL, 0);
  in->imm = row;
  if (!rt) {
    memset(out, 0, sizeof *out);
    out->kind = RV_NONE;
    return 0;
  }
  out[0] = wf_lo_mkval(in->res[0], rt);
  diff_func(F, row, na, vals, rt, at);
  return 1;
}

int wf_nat_call(wf_fstate *F, int row, const char *name, wf_expr *call, wf_rv *out) {
  if (wf_native_tab[row].flags & WF_NATF_ITER)
    ERR(call,
        "weft.%s is an iterating query: use it in a generic for, "
        "for i in weft.%s(...) do ... end",
        name, name);
  return emit_row(F, row, name, call->args, call->nargs, call, out);
}

wf_rv wf_lo_native(wf_fstate *F, wf_expr *e) {
  wf_rv out[1];
  if (emit_row(F, e->op, wf_native_tab[e->op].name, e->args, e->nargs, e, out) == 0)
    ERR(e, "weft.%s gives no value", wf_native_tab[e->op].name);
  return out[0];
}

/* ---- the generic for ---- */
static void *mk(wf_fstate *F, size_t n) {
  return wf_front_alloc(F->C, n);
}

static wf_expr *native_expr(wf_fstate *F, int row, wf_expr **args, int nargs, int line, int col) {
  wf_expr *e = mk(F, sizeof *e);
  e->kind = E_NATIVE;
  e->op = row;
  e->args = args;
  e->nargs = nargs;
  e->line = line;
  e->col = col;
  return e;
}

static wf_stmt *local1(wf_fstate *F, const char *name, int namecol, wf_expr *value) {
  wf_stmt *s = mk(F, sizeof *s);
  s->kind = S_LOCAL;
  s->line = value->line;
  s->col = value->col;
  s->nnames = 1;
  s->names = mk(F, sizeof(char *));
  s->names[0] = name;
  s->namecols = mk(F, sizeof(int));
  s->namecols[0] = namecol;
  s->nexprs = 1;
  s->exprs = mk(F, sizeof(wf_expr *));
  s->exprs[0] = value;
  return s;
}

static const char *const QUERIES =
    "weft.mesh_query_aabb(id, lo, hi), weft.bvh_query_aabb(id, lo, hi), "
    "weft.bvh_query_ray(id, start, dir)";

/* The iterating query named like the callee as written (weft.q or q), or
** -1: only then is the callee resolved, so `for k, v in pairs(t)` gets the
** generic-for message rather than one about calling a Lua function. */
static int written_query(wf_expr *call, const char **name) {
  *name = NULL;
  if (call->kind != E_CALL) return -1;
  wf_expr *c = call->a;
  if (c->kind == E_NAME || c->kind == E_FIELD) *name = c->name;
  if (!*name) return -1;
  for (int r = 0; r < WF_NAT__COUNT; r++)
    if ((wf_native_tab[r].flags & WF_NATF_ITER) && !strcmp(*name, wf_native_tab[r].name)) return r;
  return -1;
}

static wf_expr *name_expr(wf_fstate *F, const char *name, int line, int col) {
  wf_expr *e = mk(F, sizeof *e);
  e->kind = E_NAME;
  e->name = name;
  e->line = line;
  e->col = col;
  return e;
}

static wf_stmt *stmt(wf_fstate *F, wf_sk kind, const wf_stmt *at, int n) {
  wf_stmt *s = mk(F, sizeof *s);
  s->kind = kind;
  s->line = at->line;
  s->col = at->col;
  s->body.n = n;
  s->body.s = mk(F, sizeof(wf_stmt *) * (size_t)n);
  return s;
}

/* A loop of kind `kind` at s whose body is `first`, then s's statements. */
static wf_stmt *loop_over(wf_fstate *F, wf_stmt *s, wf_sk kind, wf_stmt *first) {
  wf_stmt *loop = stmt(F, kind, s, s->body.n + 1);
  loop->body.s[0] = first;
  for (int i = 0; i < s->body.n; i++)
    loop->body.s[i + 1] = s->body.s[i];
  return loop;
}

static void while_cond(wf_fstate *F, wf_stmt *loop, wf_expr *cond) {
  loop->nconds = 1;
  loop->conds = mk(F, sizeof(wf_expr *));
  loop->conds[0] = cond;
}

/* do begin; loop end, lowered */
static void lower_do(wf_fstate *F, wf_stmt *s, wf_stmt *begin, wf_stmt *loop) {
  wf_stmt *blk = stmt(F, S_DO, s, 2);
  blk->body.s[0] = begin;
  blk->body.s[1] = loop;
  wf_lo_stmt(F, blk);
}

/* Can the statements of b leave the loop they are the body of, other than
** by its end: a break or goto of that loop (depth 0), or a return? */
static int leaves(const wf_block_ast *b, int depth) {
  for (int i = 0; i < b->n; i++) {
    const wf_stmt *s = b->s[i];
    switch (s->kind) {
    case S_RETURN: return 1;
    case S_BREAK:
    case S_GOTO:
      if (depth == 0) return 1;
      break;
    case S_IF:
      for (int k = 0; k < s->nconds + (s->has_else ? 1 : 0); k++)
        if (leaves(&s->blocks[k], depth)) return 1;
      break;
    case S_DO:
      if (leaves(&s->body, depth)) return 1;
      break;
    case S_FORNUM:
    case S_WHILE:
    case S_REPEAT:
    case S_FORIN:
      if (leaves(&s->body, depth + 1)) return 1;
      break;
    default: break;
    }
  }
  return 0;
}

/* The nested form of `for j in weft.hash_grid_query(id, p, r) do body end`
** for a body that runs to its end every time:
**
**   do
**     local (query) = hash_grid_query(id, p, r)
**     while hash_grid_query_slice((query)) do
**       for (k) = hash_grid_query_first((query)), hash_grid_query_last((query)) do
**         local j = hash_grid_query_id((query), (k))
**         body
**       end
**     end
**   end
**
** The slices are runs of point_ids (a cell, or the cells of a row that does
** not wrap): the body runs in a counted loop over each, with none of the
** state machine's branches per candidate. The same candidates in the same
** order as the while form, which the rest keep (a break would leave only
** the inner loop). */
static void hash_grid_nested(wf_fstate *F, wf_stmt *s, wf_stmt *begin, wf_expr *h) {
  int line = s->exprs[0]->line, col = s->exprs[0]->col;
  wf_expr **hargs = mk(F, sizeof(wf_expr *));
  hargs[0] = h;
  wf_expr **idargs = mk(F, sizeof(wf_expr *) * 2);
  idargs[0] = h;
  idargs[1] = name_expr(F, "(k)", line, col);
  wf_stmt *inner =
      loop_over(F, s, S_FORNUM,
                local1(F, s->names[0], s->namecols[0],
                       native_expr(F, WF_NAT_hash_grid_query_id, idargs, 2, line, col)));
  inner->nnames = 1;
  inner->names = mk(F, sizeof(char *));
  inner->names[0] = "(k)";
  inner->namecols = mk(F, sizeof(int));
  inner->namecols[0] = s->namecols[0];
  inner->nexprs = 2;
  inner->exprs = mk(F, sizeof(wf_expr *) * 2);
  inner->exprs[0] = native_expr(F, WF_NAT_hash_grid_query_first, hargs, 1, line, col);
  inner->exprs[1] = native_expr(F, WF_NAT_hash_grid_query_last, hargs, 1, line, col);
  wf_stmt *outer = stmt(F, S_WHILE, s, 1);
  while_cond(F, outer, native_expr(F, WF_NAT_hash_grid_query_slice, hargs, 1, line, col));
  outer->body.s[0] = inner;
  lower_do(F, s, begin, outer);
}

void wf_lo_forin(wf_fstate *F, wf_stmt *s) {
  wf_expr *call = s->exprs[0];
  const char *name;
  int row = s->nexprs == 1 ? written_query(call, &name) : -1;
  if (row >= 0) {
    wf_rv callee = wf_lo_expr(F, call->a);
    if (callee.kind != RV_LUA || callee.lk != LV_BUILTIN || wf_nat_find(callee.str) != row)
      row = -1;
  }
  if (row < 0) {
    if (s->nexprs == 1 && name)
      wf_lo_err(F, s->line, s->col,
                "generic for ('for ... in') over %s: kernels only iterate over the geometry "
                "queries (%s)",
                name, QUERIES);
    wf_lo_err(F, s->line, s->col,
              "generic for ('for ... in') in kernels only iterates over a geometry query (%s); "
              "use a numeric for otherwise",
              QUERIES);
  }
  name = wf_native_tab[row].name;
  if (s->nnames != 1)
    wf_lo_err(F, s->line, s->namecols[1],
              "weft.%s gives one value per iteration: write `for %s in ...`", name, s->names[0]);
  int line = call->line, col = call->col;
  const char *hv = "(query)";
  wf_expr *h = name_expr(F, hv, line, col);
  wf_stmt *begin = local1(F, hv, col, native_expr(F, row, call->args, call->nargs, line, col));
  if (row == WF_NAT_hash_grid_query && !s->contlabel && !leaves(&s->body, 0)) {
    hash_grid_nested(F, s, begin, h);
    return;
  }
  wf_expr **hargs = mk(F, sizeof(wf_expr *));
  hargs[0] = h;
  /* do local h = begin(args); while next(h) do local f = get(h); body end end */
  wf_stmt *loop = loop_over(
      F, s, S_WHILE,
      local1(F, s->names[0], s->namecols[0], native_expr(F, row + 2, hargs, 1, line, col)));
  while_cond(F, loop, native_expr(F, row + 1, hargs, 1, line, col));
  loop->contlabel = s->contlabel; /* `goto continue`: the next element */
  lower_do(F, s, begin, loop);
}
