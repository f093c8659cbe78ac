/*
** api.c -- the front end's Lua C functions in the core table:
**
**   core.front_setup(env)        env = { builtins=, type_mt=, func_mt=,
**                                        const_mt=, kernel_mt= } (kernel.lua)
**   core.compile(decl, argtypes) -> "weft.module" userdata (optimized IR),
**                                   deps (free names resolved: resolve.c)
**   core.ir(module)              -> IR text
**   core.writes(module [, name]) -> per parameter: does it write the array?
**
** compile runs the whole front end inside a protected call; every error
** (ours, positioned, or one raised by Lua itself) unwinds to it, the
** arena and the module are freed, and only then is the error re-raised.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"
#include "runtime/core.h"
#include "util/dump.h"

void *wf_front_alloc(wf_fctx *C, size_t n) {
  void *p = wf_arena_alloc(C->A, n ? n : 1);
  if (!p) {
    lua_pushstring(C->L, "weft: out of memory in the kernel compiler");
    lua_error(C->L);
  }
  return p;
}

char *wf_front_strdup(wf_fctx *C, const char *s, size_t n) {
  char *p = wf_front_alloc(C, n + 1);
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

/* ======================================================================
** positioned errors
** ====================================================================== */
void wf_front_error(wf_fctx *C, const wf_src *src, int line, int col, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* the source line, and a caret under col (tabs kept so it lines up) */
  const char *t = src->text ? src->text : "";
  size_t i = 0, len = src->len;
  int l = 1;
  while (l < line && i < len) {
    if (t[i] == '\n') l++;
    i++;
  }
  size_t e = i;
  while (e < len && t[e] != '\n' && t[e] != '\r') e++;
  /* at most 400 characters of a long line: a window around col, marked
  ** with "..." when it does not start the line */
  size_t c0 = col > 1 ? (size_t)(col - 1) : 0, ws = 0;
  if (c0 > 300 && e - i > 400) ws = c0 - 200 < e - i ? c0 - 200 : e - i;
  const char *more = ws ? "..." : "";
  size_t ll = e - i - ws;
  if (ll > 400) ll = 400;
  char caret[420];
  int k = 0;
  if (ws) k = 3, memset(caret, ' ', 3);
  for (size_t c = ws; c < c0 && k < 410; c++, k++)
    caret[k] = (i + c < e && t[i + c] == '\t') ? '\t' : ' ';
  caret[k++] = '^';
  caret[k] = 0;
  lua_pushfstring(C->L, "%s:%d: %s\n%s%s\n%s", src->chunk ? src->chunk : "?", line, msg, more,
                  wf_front_strdup(C, t + i + ws, ll), caret);
  lua_error(C->L);
  for (;;) {
  }
}

/* ======================================================================
** compile
** ====================================================================== */
static int get_env(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, WF_FRONT_ENV_KEY);
  if (!lua_istable(L, -1)) {
    lua_pushstring(L, "weft: the kernel compiler is not set up (core.front_setup)");
    lua_error(L);
  }
  return lua_gettop(L);
}

void wf_front_compile_kernel(wf_fctx *C, int declidx, int argidx) {
  lua_State *L = C->L;
  lua_getfield(L, declidx, "fn");
  int fi = lua_gettop(L);
  if (!lua_isfunction(L, fi)) {
    lua_pushstring(L, "weft: kernel declaration without a function");
    lua_error(L);
  }
  lua_getfield(L, declidx, "kind");
  int is_kernel = !(lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), "func"));
  lua_pop(L, 1);
  wf_src src;
  wf_front_getsrc(C, fi, &src);
  /* parameter names, types from decl.types or the launch arguments */
  const char *names[64];
  const wf_type *ptypes[64];
  int n = 0;
  lua_pushvalue(L, fi);
  for (; n < 64; n++) {
    const char *nm = lua_getlocal(L, NULL, n + 1);
    if (!nm) break;
    names[n] = wf_front_strdup(C, nm, strlen(nm));
  }
  lua_pop(L, 1);
  lua_getfield(L, declidx, "types");
  int ti = lua_gettop(L);
  for (int i = 0; i < n; i++) {
    ptypes[i] = NULL;
    if (lua_istable(L, ti)) {
      lua_getfield(L, ti, names[i]);
      if (!lua_isnil(L, -1)) {
        ptypes[i] = wf_front_totype(C, -1);
        if (!ptypes[i]) {
          lua_pushfstring(L, "%s:%d: the type given for parameter '%s' is not a weft type",
                          src.chunk, src.linedefined, names[i]);
          lua_error(L);
        }
      }
      lua_pop(L, 1);
    }
    if (!ptypes[i] && argidx && lua_istable(L, argidx)) {
      lua_rawgeti(L, argidx, i + 1);
      if (!lua_isnil(L, -1)) {
        ptypes[i] = wf_front_totype(C, -1);
        if (!ptypes[i]) {
          lua_pushfstring(L, "%s:%d: the argument type for parameter '%s' is not a weft type",
                          src.chunk, src.linedefined, names[i]);
          lua_error(L);
        }
      }
      lua_pop(L, 1);
    }
    if (!ptypes[i]) {
      lua_pushfstring(L,
                      "%s:%d: parameter '%s' is generic (no type in the declaration); its type "
                      "comes from a launch argument",
                      src.chunk, src.linedefined, names[i]);
      lua_error(L);
    }
  }
  lua_pop(L, 1);
  /* name */
  char name[128];
  lua_getfield(L, declidx, "name");
  if (lua_isstring(L, -1)) snprintf(name, sizeof name, "%s", lua_tostring(L, -1));
  else snprintf(name, sizeof name, "%s_%d", is_kernel ? "kernel" : "func", src.linedefined);
  lua_pop(L, 1);
  lua_pushvalue(L, fi);
  int ref = wf_res_keep(C);
  wf_lo_function(C, ref, name, is_kernel, n, ptypes, names, &src);
}

/* Protected part of compile: (ctx, decl, argtypes) -> the list of free
** names resolved (resolve.c: record_dep). */
static int compile_protected(lua_State *L) {
  wf_fctx *C = lua_touserdata(L, 1);
  C->envidx = get_env(L);
  lua_newtable(L);
  C->keepidx = lua_gettop(L);
  lua_newtable(L);
  C->depsidx = lua_gettop(L);
  wf_front_compile_kernel(C, 2, lua_istable(L, 3) ? 3 : 0);
  lua_pushvalue(L, C->depsidx);
  return 1;
}

static int module_gc(lua_State *L) {
  wf_modud *u = luaL_checkudata(L, 1, WF_MODULE_MT);
  if (u->mod) wf_module_free(u->mod);
  u->mod = NULL;
  return 0;
}

static int module_tostring(lua_State *L) {
  wf_modud *u = luaL_checkudata(L, 1, WF_MODULE_MT);
  lua_pushfstring(L, "weft.module: %p", (void *)u->mod);
  return 1;
}


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
  wf_fctx C;
  memset(&C, 0, sizeof C);
  C.L = L;
  C.A = wf_arena_new();
  C.mod = wf_module_new(NULL);
  if (!C.A || !C.mod) {
    wf_arena_free(C.A);
    if (C.mod) wf_module_free(C.mod);
    return luaL_error(L, "weft: out of memory");
  }
  C.T = C.mod->types;
  lua_pushcfunction(L, compile_protected);
  lua_pushlightuserdata(L, &C);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  int st = lua_pcall(L, 3, 1, 0);
  wf_arena_free(C.A);
  if (st) {
    wf_module_free(C.mod);
    return lua_error(L);
  }
  int depsidx = lua_gettop(L);
  char err[512];
  if (optimize && wf_ir_optimize(C.mod, err, sizeof err)) {
    char *text = wf_ir_to_string(C.mod);
    if (text && getenv("WEFT_DEBUG_IR")) fprintf(stderr, "%s\n", text);
    free(text);
    wf_module_free(C.mod);
    return luaL_error(L, "weft: internal compiler error: %s", err);
  }
  if (wf_dump_wanted("ir")) {
    fprintf(stderr, "-- weft IR\n");
    wf_ir_print(C.mod, stderr);
  }
  wf_modud *u = lua_newuserdata(L, sizeof *u);
  u->mod = C.mod;
  luaL_getmetatable(L, WF_MODULE_MT);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, depsidx);
  return 2;
}

static int l_ir(lua_State *L) {
  wf_module *m = wf_core_checkmodule(L, 1);
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
    default:
      break;
    }
    for (int b = 0; b < in->nblocks; b++)
      writes_block(fn, in->blocks[b], w, depth);
  }
}

/* core.writes(module [, name]) -> { [i] = true/false per parameter }: the
** array parameters function `name` (default: the module's first kernel)
** stores to or updates atomically, anywhere in its body. */
static int l_writes(lua_State *L) {
  wf_module *m = wf_core_checkmodule(L, 1);
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

static int l_front_setup(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_pushvalue(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, WF_FRONT_ENV_KEY);
  return 0;
}

void wf_front_register(lua_State *L, int t) {
  if (luaL_newmetatable(L, WF_MODULE_MT)) {
    lua_pushcfunction(L, module_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, module_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, l_compile);
  lua_setfield(L, t, "compile");
  lua_pushcfunction(L, l_ir);
  lua_setfield(L, t, "ir");
  lua_pushcfunction(L, l_writes);
  lua_setfield(L, t, "writes");
  lua_pushcfunction(L, l_front_setup);
  lua_setfield(L, t, "front_setup");
  lua_pushcfunction(L, wf_bi_names);
  lua_setfield(L, t, "builtin_ops");
  lua_pushboolean(L, 1); /* f:grad / f:replay are compiled (lua/weft/tape.lua) */
  lua_setfield(L, t, "front_custom_grad");
}
