/*
** core.c -- luaopen_weft_core: the table of Lua C functions ("weft.core"),
** and the "weft.module" userdata every part passes around.
** Each part registers its functions. The calls are strong references on
** purpose: a host linking the static library gets every part pulled in.
*/
#include "bindings/bindings.h"

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

wf_modud *wf_bind_newmodule(lua_State *L) {
  wf_modud *u = (wf_modud *)lua_newuserdata(L, sizeof *u);
  u->mod = NULL;
  luaL_getmetatable(L, WF_MODULE_MT);
  lua_setmetatable(L, -2);
  return u;
}

wf_module *wf_bind_checkmodule(lua_State *L, int idx) {
  wf_modud *u = (wf_modud *)luaL_checkudata(L, idx, WF_MODULE_MT);
  if (!u->mod) luaL_argerror(L, idx, "module already freed");
  return u->mod;
}

/* core.ir_parse(text) -> module: IR text (as core.ir prints it) parsed back
** into a module with its own types and verified. Raises "ir_parse: ..."
** with the parser's line:col or the verifier's message. Tools check with
** it that every module the front end makes survives the text round trip. */
static int l_ir_parse(lua_State *L) {
  const char *text = luaL_checkstring(L, 1);
  char err[1024];
  /* the userdata first: its __gc frees the module if an error follows */
  wf_modud *u = wf_bind_newmodule(L);
  u->mod = wf_ir_parse(text, NULL, err, sizeof err);
  if (!u->mod) return luaL_error(L, "ir_parse: %s", err);
  if (wf_ir_verify(u->mod, err, sizeof err) != 0) return luaL_error(L, "ir_parse: verify: %s", err);
  return 1;
}

int luaopen_weft_core(lua_State *L) {
  if (luaL_newmetatable(L, WF_MODULE_MT)) {
    lua_pushcfunction(L, module_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, module_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  int t = lua_gettop(L);
  wf_bind_front(L, t);
  wf_bind_cpu(L, t);
  wf_bind_cuda(L, t);
  wf_bind_ad(L, t);
  wf_bind_info(L, t);
  lua_pushcfunction(L, l_ir_parse);
  lua_setfield(L, t, "ir_parse");
  lua_pushinteger(L, WEFT_ABI_VERSION);
  lua_setfield(L, t, "abi");
  return 1;
}
