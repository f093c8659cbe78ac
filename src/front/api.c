/*
** api.c -- the front end's entry (wf_front_compile, front.h) and its
** shared services: arena allocation, positioned errors.
**
** A compile runs the whole front end inside a protected call; every error
** (ours, positioned, or one raised by Lua itself) unwinds to it, the
** arena and the module are freed, and only then is the error re-raised.
** The Lua C functions over it (core.compile, ...) are src/bindings/front.c.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/lower.h"

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
/* Push "chunk:line: msg", the source line and a caret under col. */
static void push_positioned(wf_fctx *C, const wf_src *src, int line, int col, const char *msg) {
  /* the source line, and a caret under col (tabs kept so it lines up) */
  const char *t = src->text ? src->text : "";
  size_t i = 0, len = src->len;
  int l = 1;
  while (l < line && i < len) {
    if (t[i] == '\n') l++;
    i++;
  }
  size_t e = i;
  while (e < len && t[e] != '\n' && t[e] != '\r')
    e++;
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
}

/* The calls listed after an error (deeper nests end with a count). */
#define WF_MAX_CALLED_FROM 8

void wf_front_error(wf_fctx *C, const wf_src *src, int line, int col, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  lua_State *L = C->L;
  const wf_callsite *s = C->site;
  if (s && s->builtin) {
    /* In a builtin's body the user can only change the call: report it
    ** there, at the outermost builtin call (one builtin may call another),
    ** which user code made. */
    while (s->up && s->up->builtin)
      s = s->up;
    char full[1200];
    snprintf(full, sizeof full, "%s: %s", s->path, msg);
    push_positioned(C, s->src, s->line, s->col, full);
    s = s->up;
  } else {
    push_positioned(C, src, line, col, msg);
  }
  for (int k = 0; s; s = s->up, k++) {
    if (k == WF_MAX_CALLED_FROM) {
      int rest = 0;
      for (; s; s = s->up)
        rest++;
      lua_pushfstring(L, "\n(%d more calls)", rest);
      lua_concat(L, 2);
      break;
    }
    lua_pushfstring(L, "\ncalled from %s:%d", s->src->chunk ? s->src->chunk : "?", s->line);
    lua_concat(L, 2);
  }
  lua_error(L);
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
  if (lua_isstring(L, -1))
    snprintf(name, sizeof name, "%s", lua_tostring(L, -1));
  else
    snprintf(name, sizeof name, "%s_%d", is_kernel ? "kernel" : "func", src.linedefined);
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

wf_module *wf_front_compile(lua_State *L, int decl, int args) {
  wf_fctx C;
  memset(&C, 0, sizeof C);
  C.L = L;
  C.A = wf_arena_new();
  C.mod = wf_module_new(NULL);
  if (!C.A || !C.mod) {
    wf_arena_free(C.A);
    if (C.mod) wf_module_free(C.mod);
    luaL_error(L, "weft: out of memory");
  }
  C.T = C.mod->types;
  lua_pushcfunction(L, compile_protected);
  lua_pushlightuserdata(L, &C);
  lua_pushvalue(L, decl);
  if (args)
    lua_pushvalue(L, args);
  else
    lua_pushnil(L);
  int st = lua_pcall(L, 3, 1, 0);
  wf_arena_free(C.A);
  if (st) {
    wf_module_free(C.mod);
    lua_error(L);
  }
  return C.mod;
}
