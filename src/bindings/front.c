/*
** front.c -- the front end's Lua C functions in the core table:
**
**   core.front_setup(env)        env = { builtins=, type_mt=, func_mt=,
**                                        const_mt=, kernel_mt= } (kernel.lua)
**   core.compile(decl, argtypes) -> "weft.module" userdata (optimized IR),
**                                   deps (free names resolved: resolve.c)
**   core.ir(module)              -> IR text
**   core.writes(module [, name]) -> per parameter: does it write the array?
**   core.geom_params(module)     -> the parameters passed as geometry ids,
**                                   and the queries whose ids come from
**                                   elsewhere (arrays, arithmetic)
**   core.builtin_ops()           -> the builtins the front end lowers
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings/bindings.h"
#include "front/lower.h"
#include "geom/native.h"
#include "util/dump.h"

static int l_compile(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 3);
  int optimize = 1; /* opts.optimize = false: the module as lowered, calls kept (autodiff) */
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "optimize");
    optimize = lua_isnil(L, -1) || lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  wf_module *m = wf_front_compile(L, 1, 2);
  int depsidx = lua_gettop(L);
  char err[512];
  if (optimize && wf_ir_optimize(m, err, sizeof err)) {
    char *text = wf_ir_to_string(m);
    if (text && getenv("WEFT_DEBUG_IR")) fprintf(stderr, "%s\n", text);
    free(text);
    wf_module_free(m);
    return luaL_error(L, "weft: internal compiler error: %s", err);
  }
  if (wf_dump_wanted("ir")) {
    fprintf(stderr, "-- weft IR\n");
    wf_ir_print(m, stderr);
  }
  wf_bind_newmodule(L)->mod = m;
  lua_pushvalue(L, depsidx);
  return 2;
}

static int l_ir(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  char *s = wf_ir_to_string(m);
  if (!s) return luaL_error(L, "weft: out of memory");
  lua_pushstring(L, s);
  free(s);
  return 1;
}

/* ---- which array parameters a function writes (core.writes) -----------
** A store or atomic goes to an array value; its root is found by peeling
** views (and both sides of a select). A root that is a parameter marks
** that parameter; any other root (an array carried through a loop or an
** if) marks every array parameter, which errs on the safe side. A call
** marks the arguments its callee writes. */
#define WRITES_DEPTH 16

static void writes_block(const wf_func *fn, const wf_block *bl, uint8_t *w, int depth);

static void writes_mark(const wf_func *fn, wf_val v, uint8_t *w, int depth) {
  for (int hops = 0; v >= 0 && v < fn->nvals && hops < 1000; hops++) {
    const wf_inst *d = fn->vals[v].def;
    if (!d && !fn->vals[v].block) { /* a function parameter */
      w[fn->vals[v].index] = 1;
      return;
    }
    if (d && d->op == WF_OP_VIEW && d->nargs >= 1) {
      v = d->args[0];
      continue;
    }
    if (d && d->op == WF_OP_SELECT && d->nargs == 3 && depth < WRITES_DEPTH) {
      writes_mark(fn, d->args[1], w, depth + 1);
      v = d->args[2];
      continue;
    }
    break;
  }
  for (int i = 0; i < fn->nparams; i++)
    if (fn->vals[fn->params[i]].type->kind == WF_T_ARRAY) w[i] = 1;
}

static void writes_func(const wf_func *fn, uint8_t *w, int depth) {
  if (fn->body && depth < WRITES_DEPTH) writes_block(fn, fn->body, w, depth);
}

static void writes_block(const wf_func *fn, const wf_block *bl, uint8_t *w, int depth) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    switch (in->op) {
    case WF_OP_STORE:
    case WF_OP_ATOMIC_ADD:
    case WF_OP_ATOMIC_MIN:
    case WF_OP_ATOMIC_MAX:
    case WF_OP_ATOMIC_EXCH:
    case WF_OP_ATOMIC_CAS:
    case WF_OP_ATOMIC_AND:
    case WF_OP_ATOMIC_OR:
    case WF_OP_ATOMIC_XOR:
      if (in->nargs > 0) writes_mark(fn, in->args[0], w, depth);
      break;
    case WF_OP_CALL: {
      const wf_module *m = fn->mod;
      const wf_func *callee = in->imm >= 0 && in->imm < m->nfuncs ? m->funcs[in->imm] : NULL;
      int n = callee ? callee->nparams : 0;
      uint8_t *cw = n > 0 ? calloc((size_t)n, 1) : NULL;
      if (cw) writes_func(callee, cw, depth + 1);
      for (int i = 0; i < in->nargs; i++)
        if (fn->vals[in->args[i]].type->kind == WF_T_ARRAY && (!cw || i >= n || cw[i]))
          writes_mark(fn, in->args[i], w, depth);
      free(cw);
      break;
    }
    default: break;
    }
    for (int b = 0; b < in->nblocks; b++)
      writes_block(fn, in->blocks[b], w, depth);
  }
}

/* core.writes(module [, name]) -> { [i] = true/false per parameter }: the
** array parameters function `name` (default: the module's first kernel)
** stores to or updates atomically, anywhere in its body. */
static int l_writes(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  const char *name = luaL_optstring(L, 2, NULL);
  const wf_func *fn = NULL;
  for (int i = 0; i < m->nfuncs && !fn; i++)
    if (name ? !strcmp(m->funcs[i]->name, name) : m->funcs[i]->is_kernel) fn = m->funcs[i];
  if (!fn) return luaL_error(L, "weft: the module has no function '%s'", name ? name : "(kernel)");
  uint8_t *w = calloc((size_t)fn->nparams + 1, 1);
  if (!w) return luaL_error(L, "weft: out of memory");
  writes_func(fn, w, 0);
  lua_createtable(L, fn->nparams, 0);
  for (int i = 0; i < fn->nparams; i++) {
    lua_pushboolean(L, w[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(w);
  return 1;
}

/* A kernel parameter used as a native builtin's id argument (directly or
** through the parameters of the functions it calls): the object kind the
** first such use takes, the builtin and where it is. */
typedef struct geom_use {
  int kind, row, line;
  const char *chunk;
} geom_use;

/* Where the uses of ids held by struct parameters go (the kernel's only):
** entries appended to the Lua list at stack index list (0: none, in a
** callee); the uses whose id is neither go to the list at `other`. */
typedef struct geom_out {
  lua_State *L;
  int list, other;
} geom_out;

/* The parameter index of v, -1 if v is not one of fn's parameters. */
static int param_of(const wf_func *fn, wf_val v) {
  if (v < 0 || v >= fn->nvals || fn->vals[v].def || fn->vals[v].block) return -1;
  return fn->vals[v].index;
}

/* Appends { param = p + 1 (none if p < 0), path = path or nil, kind, name,
** line, chunk }. */
static void push_use(lua_State *L, int list, int p, const char *path, const geom_use *u) {
  lua_createtable(L, 0, 6);
  if (p >= 0) {
    lua_pushinteger(L, p + 1);
    lua_setfield(L, -2, "param");
  }
  if (path) {
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
  }
  lua_pushinteger(L, u->kind);
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, wf_native_tab[u->row].name);
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, u->line);
  lua_setfield(L, -2, "line");
  lua_pushstring(L, u->chunk ? u->chunk : "?");
  lua_setfield(L, -2, "chunk");
  lua_rawseti(L, list, (int)lua_objlen(L, list) + 1);
}

/* The struct parameter whose field (path "a.b" into buf) v extracts, or -1. */
static int field_of(const wf_func *fn, wf_val v, char *buf, size_t size) {
  int comp[8], nc = 0;
  while (nc < 8 && v >= 0 && fn->vals[v].def && fn->vals[v].def->op == WF_OP_EXTRACT) {
    comp[nc++] = (int)fn->vals[v].def->imm;
    v = fn->vals[v].def->args[0];
  }
  int p = param_of(fn, v);
  if (!nc || p < 0) return -1;
  const wf_type *t = fn->vals[v].type;
  size_t len = 0;
  for (int k = nc - 1; k >= 0; k--) { /* comp[] runs from the field outwards */
    if (t->kind != WF_T_STRUCT || comp[k] < 0 || comp[k] >= t->nfields) return -1;
    int w = snprintf(buf + len, size - len, "%s%s", len ? "." : "", t->fields[comp[k]].name);
    if (w < 0 || (size_t)w >= size - len) return -1;
    len += (size_t)w;
    t = t->fields[comp[k]].type;
  }
  return p;
}

static void geom_block(const wf_func *fn, const wf_block *bl, geom_use *u, const geom_out *out,
                       int depth) {
  for (const wf_inst *in = bl->first; in; in = in->next) {
    if (in->op == WF_OP_NATIVE && in->nargs > 0 && in->imm >= 0 && in->imm < WF_NAT__COUNT &&
        wf_native_tab[in->imm].kind) {
      geom_use g = {wf_native_tab[in->imm].kind, (int)in->imm, in->loc.line, fn->chunk};
      char path[128];
      int p = param_of(fn, in->args[0]);
      if (p >= 0) {
        if (!u[p].kind) u[p] = g;
      } else if (out->list && (p = field_of(fn, in->args[0], path, sizeof path)) >= 0) {
        push_use(out->L, out->list, p, path, &g);
      } else {
        push_use(out->L, out->other, -1, NULL, &g); /* an id read or computed */
      }
    } else if (in->op == WF_OP_CALL && depth < WRITES_DEPTH) {
      const wf_module *m = fn->mod;
      const wf_func *callee = in->imm >= 0 && in->imm < m->nfuncs ? m->funcs[in->imm] : NULL;
      geom_use *cu = callee && callee->nparams > 0 && callee->body
                         ? calloc((size_t)callee->nparams, sizeof *cu)
                         : NULL;
      geom_out sub = {out->L, 0, out->other}; /* a callee's struct fields: ids from elsewhere */
      if (cu) geom_block(callee, callee->body, cu, &sub, depth + 1);
      for (int i = 0; cu && i < in->nargs && i < callee->nparams; i++) {
        if (!cu[i].kind) continue;
        int p = param_of(fn, in->args[i]);
        if (p < 0)
          push_use(out->L, out->other, -1, NULL, &cu[i]);
        else if (!u[p].kind)
          u[p] = cu[i];
      }
      free(cu);
    }
    for (int b = 0; b < in->nblocks; b++)
      geom_block(fn, in->blocks[b], u, out, depth);
  }
}

/* core.geom_params(module) -> a list of { param = i, path =, kind =,
** name =, line =, chunk = }: the parameters of the module's kernel that
** reach a native builtin's id argument unchanged, or (path "a.b") whose
** struct field does (the CUDA launch checks them: lua/weft/device.lua);
** then a list of the uses { kind =, name =, line =, chunk = } whose id
** comes from elsewhere (an array, a computation), whose object only the
** launch knows (the tape takes every live object of the kind:
** lua/weft/geom.lua). */
static int l_geom_params(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  const wf_func *fn = NULL;
  for (int i = 0; i < m->nfuncs && !fn; i++)
    if (m->funcs[i]->is_kernel) fn = m->funcs[i];
  lua_newtable(L);
  lua_newtable(L);
  if (!fn || !fn->body) return 2;
  geom_use *u = calloc((size_t)fn->nparams + 1, sizeof *u);
  if (!u) return luaL_error(L, "weft: out of memory");
  geom_out out = {L, lua_gettop(L) - 1, lua_gettop(L)};
  geom_block(fn, fn->body, u, &out, 0);
  for (int i = 0; i < fn->nparams; i++)
    if (u[i].kind) push_use(L, out.list, i, NULL, &u[i]);
  free(u);
  return 2;
}

static int l_front_setup(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_pushvalue(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, WF_FRONT_ENV_KEY);
  return 0;
}

void wf_bind_front(lua_State *L, int t) {
  lua_pushcfunction(L, l_compile);
  lua_setfield(L, t, "compile");
  lua_pushcfunction(L, l_ir);
  lua_setfield(L, t, "ir");
  lua_pushcfunction(L, l_writes);
  lua_setfield(L, t, "writes");
  lua_pushcfunction(L, l_geom_params);
  lua_setfield(L, t, "geom_params");
  lua_pushcfunction(L, l_front_setup);
  lua_setfield(L, t, "front_setup");
  lua_pushcfunction(L, wf_bi_names);
  lua_setfield(L, t, "builtin_ops");
  lua_pushboolean(L, 1); /* f:grad / f:replay are compiled (lua/weft/tape.lua) */
  lua_setfield(L, t, "front_custom_grad");
}
