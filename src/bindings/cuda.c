/*
** cuda.c -- the CUDA functions of the core table (wf_bind_cuda):
**
**   core.cuda_source(mod [, opts])     -> CUDA C text, {entry names}
**   core.cuda_ptx(mod [, arch [, opts]]) -> PTX text (arch "sm_80", "compute_80"
**                                         or "80"; default sm_80), {entries},
**                                         from_cache (core.ptx is the same)
**   core.cuda_cubin(mod, arch [, opts]) -> CUBIN bytes, {entries}
**   core.cuda_compile(src, arch [, fast]) -> image, from_cache
**                                      (raw CUDA C; fast as fast_compile)
**   core.cuda_assemble(ptx, arch)      -> CUBIN size (nvJitLink check)
**   core.cuda_nvrtc_version()          -> e.g. 13000, or nil, message
**
** opts: { debug = bool, checks = bool, names = { parameter names },
**   fast_compile = level } -- debug adds every bounds check, the division
** checks and the error slot parameter; checks (release mode) the bounds
** checks wf_pass_bounds did not cover and the error slot
** (wf_cuda.h); fast_compile is NVRTC's --Ofast-compile level: "min" (the
** default), "mid", "max", or "0"/false for full optimization.
**
** The NVRTC loader lives in a userdata shared as an upvalue by these
** functions (no global state): it is loaded on first use and closed when
** the core table is collected.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/wf_cuda.h"
#include "bindings/bindings.h"
#include "util/dump.h"

#pragma weak wf_ir_optimize

#define NVRTC_MT "weft.cuda.nvrtc"

typedef struct nvud {
  wf_nvrtc *nv;
  int tried;
  char err[512];
} nvud;

static int nvud_gc(lua_State *L) {
  nvud *u = luaL_checkudata(L, 1, NVRTC_MT);
  wf_nvrtc_close(u->nv);
  u->nv = NULL;
  return 0;
}

/* The loader from upvalue 1, opened on first use; raises without NVRTC. */
static wf_nvrtc *get_nvrtc(lua_State *L, int raise) {
  nvud *u = lua_touserdata(L, lua_upvalueindex(1));
  if (!u->tried) {
    u->tried = 1;
    u->nv = wf_nvrtc_open(u->err, sizeof u->err);
  }
  if (!u->nv && raise) luaL_error(L, "%s", u->err);
  return u->nv;
}

/* A fast-compile level at index i: absent/nil -> "min", false -> "0". */
static const char *fast_level(lua_State *L, int i) {
  if (lua_isnoneornil(L, i)) return "min";
  if (lua_isboolean(L, i)) return lua_toboolean(L, i) ? "min" : "0";
  if (lua_isnumber(L, i) && lua_tonumber(L, i) == 0) return "0";
  if (lua_type(L, i) != LUA_TSTRING)
    luaL_error(L, "weft: fast_compile must be \"min\", \"mid\", \"max\" or \"0\", got a %s",
               luaL_typename(L, i));
  return lua_tostring(L, i);
}

/* Options table at index oi (may be absent) into o; the names stay
** referenced by the table, which is on the stack for the whole call.
** *fast (may be NULL) receives the fast-compile level. */
static void read_opts(lua_State *L, int oi, wf_cuda_opts *o, const char **names, int max,
                      const char **fast) {
  memset(o, 0, sizeof *o);
  if (fast) *fast = "min";
  if (!lua_istable(L, oi)) return;
  if (fast) {
    lua_getfield(L, oi, "fast_compile");
    *fast = fast_level(L, -1);
    lua_pop(L, 1); /* the string stays alive in the table */
  }
  lua_getfield(L, oi, "debug");
  o->debug = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, oi, "checks");
  o->checks = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, oi, "names");
  if (lua_istable(L, -1)) {
    int n = (int)lua_objlen(L, -1);
    if (n > max) n = max;
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      names[i] = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
      lua_pop(L, 1);
    }
    o->nnames = n;
    o->names = names;
  }
  lua_pop(L, 1);
}

/* Optimize (inline calls) when the pass pipeline is linked in, then emit
** with the options at index oi. Raises with the emitter's message; nothing
** is left allocated then. */
static void emit_module(lua_State *L, int idx, int oi, wf_cuda_src *src, const char **fast) {
  wf_module *m = wf_bind_checkmodule(L, idx);
  char err[1024];
  const char *names[64];
  wf_cuda_opts o;
  read_opts(L, oi, &o, names, 64, fast);
  if (wf_ir_optimize && wf_ir_optimize(m, err, sizeof err) != 0) luaL_error(L, "%s", err);
  if (wf_cuda_emit_opts(m, &o, src, err, sizeof err) != 0) luaL_error(L, "%s", err);
  /* WEFT_DUMP=cuda: the emitted CUDA C on stderr, like the other stages */
  if (wf_dump_wanted("cuda")) fprintf(stderr, "; ---- cuda ----\n%s\n", src->text);
}

static void push_entries(lua_State *L, const wf_cuda_src *s) {
  lua_createtable(L, s->nentries, 0);
  for (int i = 0; i < s->nentries; i++) {
    lua_pushstring(L, s->entries[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static int l_cuda_source(lua_State *L) {
  wf_cuda_src s;
  emit_module(L, 1, 2, &s, NULL);
  lua_pushlstring(L, s.text, s.len);
  push_entries(L, &s);
  wf_cuda_src_free(&s);
  return 2;
}

/* Compile a module for arch; want_cubin picks sm_ (CUBIN) over PTX. */
static int compile_module(lua_State *L, int want_cubin) {
  const char *arch = luaL_optstring(L, 2, "sm_80");
  const char *digits = arch;
  if (strncmp(arch, "sm_", 3) == 0)
    digits = arch + 3;
  else if (strncmp(arch, "compute_", 8) == 0)
    digits = arch + 8;
  char target[40];
  snprintf(target, sizeof target, "%s_%s", want_cubin ? "sm" : "compute", digits);
  wf_nvrtc *nv = get_nvrtc(L, 1);
  wf_cuda_src s;
  const char *fast;
  emit_module(L, 1, 3, &s, &fast);
  wf_cuda_image img;
  char err[4096];
  int rc = wf_nvrtc_compile(nv, s.text, "weft.cu", target, fast, &img, err, sizeof err);
  if (rc != 0) {
    wf_cuda_src_free(&s);
    return luaL_error(L, "%s", err);
  }
  lua_pushlstring(L, img.data, img.size);
  push_entries(L, &s);
  lua_pushboolean(L, img.from_cache);
  wf_cuda_image_free(&img);
  wf_cuda_src_free(&s);
  return 3;
}

static int l_cuda_ptx(lua_State *L) {
  return compile_module(L, 0);
}
static int l_cuda_cubin(lua_State *L) {
  return compile_module(L, 1);
}

static int l_cuda_compile(lua_State *L) {
  const char *src = luaL_checkstring(L, 1);
  const char *arch = luaL_optstring(L, 2, "compute_80");
  const char *fast = fast_level(L, 3);
  wf_nvrtc *nv = get_nvrtc(L, 1);
  wf_cuda_image img;
  char err[4096];
  if (wf_nvrtc_compile(nv, src, "weft.cu", arch, fast, &img, err, sizeof err) != 0)
    return luaL_error(L, "%s", err);
  lua_pushlstring(L, img.data, img.size);
  lua_pushboolean(L, img.from_cache);
  wf_cuda_image_free(&img);
  return 2;
}

static int l_cuda_assemble(lua_State *L) {
  const char *ptx = luaL_checkstring(L, 1);
  const char *arch = luaL_optstring(L, 2, "sm_80");
  wf_nvrtc *nv = get_nvrtc(L, 1);
  char err[4096];
  size_t size = 0;
  if (wf_nvrtc_assemble(nv, ptx, arch, &size, err, sizeof err) != 0)
    return luaL_error(L, "%s", err);
  lua_pushinteger(L, (lua_Integer)size);
  return 1;
}

static int l_nvrtc_version(lua_State *L) {
  wf_nvrtc *nv = get_nvrtc(L, 0);
  if (!nv) {
    nvud *u = lua_touserdata(L, lua_upvalueindex(1));
    lua_pushnil(L);
    lua_pushstring(L, u->err);
    return 2;
  }
  lua_pushinteger(L, wf_nvrtc_version(nv));
  return 1;
}

void wf_bind_cuda(lua_State *L, int t) {
  static const luaL_Reg fns[] = {{"cuda_source", l_cuda_source},
                                 {"cuda_ptx", l_cuda_ptx},
                                 {"ptx", l_cuda_ptx},
                                 {"cuda_cubin", l_cuda_cubin},
                                 {"cuda_compile", l_cuda_compile},
                                 {"cuda_assemble", l_cuda_assemble},
                                 {"cuda_nvrtc_version", l_nvrtc_version},
                                 {NULL, NULL}};
  for (int i = 0; fns[i].name; i++) {
    nvud *u = NULL;
    if (i == 0) {
      u = lua_newuserdata(L, sizeof *u);
      memset(u, 0, sizeof *u);
      if (luaL_newmetatable(L, NVRTC_MT)) {
        lua_pushcfunction(L, nvud_gc);
        lua_setfield(L, -2, "__gc");
      }
      lua_setmetatable(L, -2);
      lua_setfield(L, t, "_cuda_nvrtc"); /* keeps it alive with the table */
    }
    lua_getfield(L, t, "_cuda_nvrtc");
    lua_pushcclosure(L, fns[i].func, 1);
    lua_setfield(L, t, fns[i].name);
  }
}
