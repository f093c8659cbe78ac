/*
** ad_lua.c -- core.adjoint and core.jvp: the Lua entries to src/ad.
**
**   name = core.adjoint(module [, kernel [, opts]])
**
** opts.debug: first run the overwrite check (check.c) and raise its error;
** opts.names: the kernel's parameter names, for that message.
**
** kernel is a function index (0-based, as in the module) or a name; it
** defaults to the module's first kernel. Appends "adj_<name>" to the module
** in place (once; later calls return the same name), optimizes the module,
** and returns the adjoint's name.
**
**   name = core.jvp(module [, kernel [, opts]])
**
** the same for the forward-mode kernel "jvp_<name>" (see jvp.c). Errors are
** Lua errors "chunk:line: autodiff: ...". WEFT_DUMP containing "ad" prints
** the new kernel's IR.
*/
#include <stdlib.h>
#include <string.h>

#include "ad/ad.h"
#include "runtime/core.h"

/* The index of the kernel named by argument idx (or the first kernel). */
static int kernel_arg(lua_State *L, wf_module *m, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    int k = wf_module_find(m, lua_tostring(L, idx));
    if (k < 0) luaL_error(L, "autodiff: no function '%s' in the module", lua_tostring(L, idx));
    return k;
  }
  if (!lua_isnoneornil(L, idx)) {
    int k = (int)luaL_checkinteger(L, idx);
    if (k < 0 || k >= m->nfuncs) luaL_error(L, "autodiff: no function %d in the module", k);
    return k;
  }
  for (int k = 0; k < m->nfuncs; k++)
    if (m->funcs[k]->is_kernel && strncmp(m->funcs[k]->name, "adj_", 4) != 0 &&
        strncmp(m->funcs[k]->name, "jvp_", 4) != 0)
      return k;
  return luaL_error(L, "autodiff: the module holds no kernel");
}

/* opts.debug set: the overwrite check of kernel k (a Lua error if it fails). */
static void debug_check(lua_State *L, wf_module *m, int k, int opts) {
  if (!lua_istable(L, opts)) return;
  lua_getfield(L, opts, "debug");
  int dbg = lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!dbg) return;
  wf_func *fn = m->funcs[k];
  const char *names[64] = {0};
  lua_getfield(L, opts, "names");
  if (lua_istable(L, -1))
    for (int i = 0; i < fn->nparams && i < 64; i++) {
      lua_rawgeti(L, -1, i + 1);
      if (lua_type(L, -1) == LUA_TSTRING) names[i] = lua_tostring(L, -1); /* held by the table */
      lua_pop(L, 1);
    }
  char err[1024];
  int rc = wf_ad_check_overwrite(fn, fn->nparams <= 64 ? names : NULL, err, sizeof err);
  lua_pop(L, 1);
  if (rc) luaL_error(L, "%s", err);
}

typedef int (*transform_fn)(wf_module *m, int k, char *err, size_t n);

/* Appends prefix..name with fn, optimizes, dumps on WEFT_DUMP=ad. */
static int transform(lua_State *L, transform_fn fn, const char *prefix) {
  wf_module *m = wf_core_checkmodule(L, 1);
  int k = kernel_arg(L, m, 2);
  debug_check(L, m, k, 3);
  char err[1024];
  if (fn(m, k, err, sizeof err) != 0) return luaL_error(L, "%s", err);
  if (wf_ir_optimize(m, err, sizeof err) != 0) return luaL_error(L, "autodiff: %s", err);
  lua_pushfstring(L, "%s%s", prefix, m->funcs[k]->name);
  int a = wf_module_find(m, lua_tostring(L, -1));
  const char *dump = getenv("WEFT_DUMP");
  if (dump && strstr(dump, "ad") && a >= 0) wf_ir_print_func(m->funcs[a], stderr);
  return 1;
}

static int l_adjoint(lua_State *L) {
  return transform(L, wf_ad_kernel, "adj_");
}

static int l_jvp(lua_State *L) {
  return transform(L, wf_ad_jvp, "jvp_");
}

void wf_ad_register(lua_State *L, int t) {
  lua_pushcfunction(L, l_adjoint);
  lua_setfield(L, t, "adjoint");
  lua_pushcfunction(L, l_jvp);
  lua_setfield(L, t, "jvp");
}
