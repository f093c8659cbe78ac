/*
** core.c -- luaopen_weft_core: the table of Lua C functions ("weft.core").
** Each part registers its functions. The calls are strong references on
** purpose: a host linking the static library gets every part pulled in.
*/
#include "runtime/core.h"

int luaopen_weft_core(lua_State *L) {
  lua_newtable(L);
  int t = lua_gettop(L);
  wf_front_register(L, t);
  wf_cpu_register(L, t);
  wf_cuda_register(L, t);
  wf_ad_register(L, t);
  wf_info_register(L, t);
  lua_pushinteger(L, WEFT_ABI_VERSION);
  lua_setfield(L, t, "abi");
  return 1;
}

wf_module *wf_core_checkmodule(lua_State *L, int idx) {
  wf_modud *u = (wf_modud *)luaL_checkudata(L, idx, WF_MODULE_MT);
  if (!u->mod) luaL_argerror(L, idx, "module already freed");
  return u->mod;
}
