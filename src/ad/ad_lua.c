/*
** ad_lua.c -- core.adjoint: the Lua entry to wf_ad_kernel.
**
**   name = core.adjoint(module [, kernel])
**
** kernel is a function index (0-based, as in the module) or a name; it
** defaults to the module's first kernel. Appends "adj_<name>" to the module
** in place (once; later calls return the same name), optimizes the module,
** and returns the adjoint's name. Errors are Lua errors "chunk:line:
** autodiff: ...". WEFT_DUMP containing "ad" prints the adjoint IR.
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
    if (m->funcs[k]->is_kernel && strncmp(m->funcs[k]->name, "adj_", 4) != 0) return k;
  return luaL_error(L, "autodiff: the module holds no kernel");
}

static int l_adjoint(lua_State *L) {
  wf_module *m = wf_core_checkmodule(L, 1);
  int k = kernel_arg(L, m, 2);
  char err[1024];
  if (wf_ad_kernel(m, k, err, sizeof err) != 0) return luaL_error(L, "%s", err);
  if (wf_ir_optimize(m, err, sizeof err) != 0) return luaL_error(L, "autodiff: %s", err);
  lua_pushfstring(L, "adj_%s", m->funcs[k]->name);
  int a = wf_module_find(m, lua_tostring(L, -1));
  const char *dump = getenv("WEFT_DUMP");
  if (dump && strstr(dump, "ad") && a >= 0) wf_ir_print_func(m->funcs[a], stderr);
  return 1;
}

void wf_ad_register(lua_State *L, int t) {
  lua_pushcfunction(L, l_adjoint);
  lua_setfield(L, t, "adjoint");
}
