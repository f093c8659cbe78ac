/*
** cpu.c -- the CPU backend's Lua C functions in the core table (wf_bind_cpu):
**
**   core.cpu_compile(module, opts) -> { fn, size, offsets, cost, key,
**                                       from_disk, code }
**   core.llvm_ir(module [, opts])  -> LLVM IR text
**   core.cpu_stats()               -> the JIT's counters
**
** The JIT (src/cpu/jit.c) of a Lua state lives in a registry userdata
** ("weft.cpujit"), made on a background thread when weft.core loads. A
** compile result is remembered in a weak registry table under its key, so
** the same kernel compiled again costs a table lookup.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bindings/bindings.h"
#include "cpu/cpu.h"

#define JIT_MT "weft.cpujit"
#define JIT_KERNELS "weft.cpujit.kernels"

/* The Lua state's JIT. Creating an LLJIT costs about a millisecond, so
** wf_bind_cpu starts it on a background thread when the library loads;
** the first compile (or cache load) joins that thread. */
typedef struct jit_ud {
  wf_jit *j;
  pthread_t th;
  int started; /* the background thread is running or not yet joined */
  char err[512];
} jit_ud;

static void *jit_thread(void *arg) {
  jit_ud *u = arg;
  u->j = wf_jit_new(u->err, sizeof u->err);
  return NULL;
}

static void jit_join(jit_ud *u) {
  if (u->started) {
    pthread_join(u->th, NULL);
    u->started = 0;
  }
}

static int jit_gc(lua_State *L) {
  jit_ud *u = luaL_checkudata(L, 1, JIT_MT);
  jit_join(u);
  wf_jit_release(u->j);
  u->j = NULL;
  return 0;
}

/* Makes the registry's JIT holder (and starts the background creation). */
static jit_ud *jit_holder(lua_State *L, int start) {
  jit_ud *u = lua_newuserdata(L, sizeof *u);
  memset(u, 0, sizeof *u);
  if (luaL_newmetatable(L, JIT_MT)) {
    lua_pushcfunction(L, jit_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, JIT_MT ".instance");
  if (start && pthread_create(&u->th, NULL, jit_thread, u) == 0) u->started = 1;
  return u;
}

/* The state's JIT; raises a Lua error when it cannot be made. */
static wf_jit *get_jit(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, JIT_MT ".instance");
  jit_ud *u = luaL_testudata(L, -1, JIT_MT);
  lua_pop(L, 1);
  if (!u) u = jit_holder(L, 0);
  jit_join(u);
  if (!u->j) u->j = wf_jit_new(u->err, sizeof u->err);
  if (!u->j) luaL_error(L, "%s", u->err);
  return u->j;
}

/* The kernel to compile: opts.name, else the module's first kernel. */
static wf_func *pick_kernel(lua_State *L, wf_module *m, int opts) {
  const char *name = NULL;
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "name");
    name = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  for (int i = 0; i < m->nfuncs; i++) {
    wf_func *f = m->funcs[i];
    if (name ? (f->name && !strcmp(f->name, name)) : f->is_kernel) return f;
  }
  if (name) luaL_error(L, "weft: module has no function '%s'", name);
  luaL_error(L, "weft: module has no kernel");
  return NULL;
}

/* Reads opts {debug, checks, ndim, names}; the name strings stay on the stack
** (referenced by the opts table) while the caller uses them. */
static void read_opts(lua_State *L, int opts, wf_cpu_opts *o, const char **names, int maxn) {
  memset(o, 0, sizeof *o);
  o->ndim = 1;
  o->names = names;
  if (!lua_istable(L, opts)) return;
  lua_getfield(L, opts, "debug");
  o->debug = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, opts, "checks"); /* release mode's bounds checks */
  o->checks = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, opts, "ndim");
  if (lua_isnumber(L, -1)) o->ndim = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (o->ndim < 1 || o->ndim > 4) luaL_error(L, "weft: ndim must be 1 to 4, got %d", o->ndim);
  lua_getfield(L, opts, "names");
  if (lua_istable(L, -1)) {
    int n = (int)lua_objlen(L, -1);
    if (n > maxn) n = maxn;
    for (int i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      names[i] = lua_tostring(L, -1); /* kept alive by the names table */
      lua_pop(L, 1);
    }
    o->nnames = n;
  }
  lua_pop(L, 1);
}

#define MAXNAMES 256
#define CODE_MT "weft.cpucode"

/* A code handle: keeps one kernel's code in the JIT while Lua holds it
** (the result of core.cpu_compile has it as field "code"). */
typedef struct code_ud {
  wf_jit *j;
  wf_jit_code *c;
} code_ud;

static int code_gc(lua_State *L) {
  code_ud *u = luaL_checkudata(L, 1, CODE_MT);
  wf_jit_code_release(u->j, u->c);
  u->c = NULL;
  u->j = NULL;
  return 0;
}

/* Pushes an empty handle; code_adopt fills it without allocating. */
static code_ud *code_new(lua_State *L) {
  code_ud *u = lua_newuserdata(L, sizeof *u);
  u->j = NULL;
  u->c = NULL;
  if (luaL_newmetatable(L, CODE_MT)) {
    lua_pushcfunction(L, code_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return u;
}

/* The registry table key -> compile result. Its values are weak: a result
** lives while some launcher holds it or its code handle. */
static int kernels_table(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, JIT_KERNELS);
  if (lua_istable(L, -1)) return lua_gettop(L);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, JIT_KERNELS);
  return lua_gettop(L);
}

/* core.cpu_compile(module, opts) -> { fn = lightuserdata, size = bytes,
**   offsets = {byte offset of each parameter}, cost = work per thread,
**   key = hex, from_disk = bool, code = handle }
** fn stays valid while the handle `code` is reachable: its __gc removes
** the kernel's code from the JIT when no other handle shares it.
** opts: debug (bool: every check), checks (bool: release mode's bounds
**   checks), ndim (1-4, default 1), names (parameter names),
**   name (function to compile; default the first kernel). */
static int l_cpu_compile(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  wf_func *fn = pick_kernel(L, m, 2);
  const char *names[MAXNAMES];
  wf_cpu_opts o;
  read_opts(L, 2, &o, names, MAXNAMES);
  wf_jit *j = get_jit(L);
  char *irtext = wf_ir_to_string(m);
  if (!irtext) return luaL_error(L, "weft: out of memory");
  /* in-memory cache: same key -> same code */
  char key[33];
  wf_jit_key(j, fn, &o, irtext, key);
  int kt = kernels_table(L);
  lua_getfield(L, kt, key);
  if (!lua_isnil(L, -1)) {
    free(irtext);
    wf_jit_mem_hit(j);
    return 1;
  }
  lua_pop(L, 1);
  code_ud *u = code_new(L);
  int ui = lua_gettop(L);
  wf_jit_kernel res;
  char err[1024];
  int st = wf_jit_kernel_get(j, fn, &o, irtext, &res, err, sizeof err);
  free(irtext);
  if (st != 0) return luaL_error(L, "%s", err);
  u->j = j; /* the handle owns the code from here on, even on errors */
  u->c = res.code;
  lua_createtable(L, 0, 8);
  lua_pushvalue(L, ui);
  lua_setfield(L, -2, "code");
  int64_t offs_buf[64],
      *offs = fn->nparams <= 64 ? offs_buf : malloc(sizeof(int64_t) * (size_t)fn->nparams);
  if (!offs) return luaL_error(L, "weft: out of memory");
  int64_t size = wf_cpu_arg_layout(fn, offs);
  lua_pushlightuserdata(L, res.fn);
  lua_setfield(L, -2, "fn");
  lua_pushnumber(L, (lua_Number)size);
  lua_setfield(L, -2, "size");
  lua_createtable(L, fn->nparams, 0);
  for (int i = 0; i < fn->nparams; i++) {
    lua_pushnumber(L, (lua_Number)offs[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "offsets");
  if (offs != offs_buf) free(offs);
  lua_pushnumber(L, (lua_Number)wf_cpu_cost(fn));
  lua_setfield(L, -2, "cost");
  lua_pushstring(L, res.key);
  lua_setfield(L, -2, "key");
  lua_pushboolean(L, res.from_disk);
  lua_setfield(L, -2, "from_disk");
  lua_pushvalue(L, -1);
  lua_setfield(L, kt, key);
  return 1;
}

/* core.llvm_ir(module [, opts]) -> LLVM IR text (opts.optimize = false for
** the IR before O3). */
static int l_llvm_ir(lua_State *L) {
  wf_module *m = wf_bind_checkmodule(L, 1);
  wf_func *fn = pick_kernel(L, m, 2);
  const char *names[MAXNAMES];
  wf_cpu_opts o;
  read_opts(L, 2, &o, names, MAXNAMES);
  int optimize = 1;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "optimize");
    if (!lua_isnil(L, -1)) optimize = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  wf_jit *j = get_jit(L);
  char err[1024];
  char *s = wf_jit_llvm_ir(j, fn, &o, optimize, err, sizeof err);
  if (!s) return luaL_error(L, "%s", err);
  lua_pushstring(L, s);
  free(s);
  return 1;
}

/* core.cpu_stats() -> { compiles, disk_hits, disk_writes, memory_hits,
**   code_live (kernels in the JIT), code_freed (removed from it),
**   cache_dir (or false), cpu, features, triple } */
static int l_cpu_stats(lua_State *L) {
  wf_jit_info j;
  wf_jit_info_get(get_jit(L), &j);
  lua_createtable(L, 0, 8);
  lua_pushnumber(L, (lua_Number)j.compiles);
  lua_setfield(L, -2, "compiles");
  lua_pushnumber(L, (lua_Number)j.disk_hits);
  lua_setfield(L, -2, "disk_hits");
  lua_pushnumber(L, (lua_Number)j.disk_writes);
  lua_setfield(L, -2, "disk_writes");
  lua_pushnumber(L, (lua_Number)j.mem_hits);
  lua_setfield(L, -2, "memory_hits");
  lua_pushnumber(L, (lua_Number)j.code_live);
  lua_setfield(L, -2, "code_live");
  lua_pushnumber(L, (lua_Number)j.code_freed);
  lua_setfield(L, -2, "code_freed");
  if (j.cache_dir)
    lua_pushstring(L, j.cache_dir);
  else
    lua_pushboolean(L, 0);
  lua_setfield(L, -2, "cache_dir");
  lua_pushstring(L, j.cpu);
  lua_setfield(L, -2, "cpu");
  lua_pushstring(L, j.triple);
  lua_setfield(L, -2, "triple");
  return 1;
}

void wf_bind_cpu(lua_State *L, int t) {
  lua_getfield(L, LUA_REGISTRYINDEX, JIT_MT ".instance");
  int have = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (!have) jit_holder(L, 1);
  lua_pushcfunction(L, l_cpu_compile);
  lua_setfield(L, t, "cpu_compile");
  lua_pushcfunction(L, l_llvm_ir);
  lua_setfield(L, t, "llvm_ir");
  lua_pushcfunction(L, l_cpu_stats);
  lua_setfield(L, t, "cpu_stats");
}
