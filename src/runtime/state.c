/*
** state.c -- weft_State: a LuaJIT state with the weft module loaded, and
** the functions that run Lua code in it (include/weft.h).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "runtime/core.h"
#include "runtime/state.h"

const char *weft_version(void) { return WEFT_VERSION; }

int wf_state_seterr(weft_State *W, int status, const char *fmt, ...) {
  char buf[WF_MSGSIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  free(W->msg);
  W->msg = strdup(buf);
  return status;
}

int wf_state_takeerr(weft_State *W, int status) {
  const char *s = lua_tostring(W->L, -1);
  wf_state_seterr(W, status, "%s", s ? s : "(error object is not a string)");
  lua_pop(W->L, 1);
  return status;
}

/* Message handler: append a traceback to string errors. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  lua_getglobal(L, "debug");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushstring(L, msg);
    return 1;
  }
  lua_getfield(L, -1, "traceback");
  lua_pushstring(L, msg);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

static int status_of(int lua_status) {
  switch (lua_status) {
  case 0: return WEFT_OK;
  case LUA_ERRSYNTAX: return WEFT_ERRSYNTAX;
  case LUA_ERRMEM: return WEFT_ERRMEM;
  case LUA_ERRFILE: return WEFT_ERRFILE;
  default: return WEFT_ERRRUN;
  }
}

int wf_state_pcall(weft_State *W, int nargs, int nres) {
  lua_State *L = W->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  int st = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (st != 0) return wf_state_takeerr(W, status_of(st));
  return WEFT_OK;
}

/* Where the Lua layer lives: $WEFT_LUA_DIR, else the source tree this
** library was built from, else the install prefix. */
static void set_lua_path(lua_State *L) {
  const char *dir = getenv("WEFT_LUA_DIR");
#ifdef WEFT_SOURCE_LUA_DIR
  if (!dir || !*dir) {
    if (access(WEFT_SOURCE_LUA_DIR "/weft/init.lua", R_OK) == 0) dir = WEFT_SOURCE_LUA_DIR;
  }
#endif
  if (!dir || !*dir) return;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

static int open_weft(lua_State *L) {
  set_lua_path(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_weft_core);
  lua_setfield(L, -2, "weft.core");
  lua_pop(L, 2);
  lua_getglobal(L, "require");
  lua_pushstring(L, "weft");
  lua_call(L, 1, 1);
  lua_setglobal(L, "weft");
  return 0;
}

weft_State *weft_open(void) {
  weft_State *W = calloc(1, sizeof *W);
  if (!W) return NULL;
  W->L = luaL_newstate();
  if (!W->L) {
    free(W);
    return NULL;
  }
  luaL_openlibs(W->L);
  lua_pushcfunction(W->L, open_weft);
  if (wf_state_pcall(W, 0, 0) != WEFT_OK) {
    fprintf(stderr, "weft_open: %s\n", W->msg);
    weft_close(W);
    return NULL;
  }
  return W;
}

void weft_close(weft_State *W) {
  if (!W) return;
  if (W->L) lua_close(W->L);
  free(W->msg);
  free(W);
}

lua_State *weft_lua(weft_State *W) { return W ? W->L : NULL; }

const char *weft_errmsg(weft_State *W) { return (W && W->msg) ? W->msg : ""; }

int weft_dostring(weft_State *W, const char *code) {
  if (!W || !code) return WEFT_ERRARG;
  /* The code is its own chunk name (as luaL_loadstring does), so kernels
  ** defined in it can find their source text through debug.getinfo. */
  if (luaL_loadbuffer(W->L, code, strlen(code), code) != 0)
    return wf_state_takeerr(W, WEFT_ERRSYNTAX);
  return wf_state_pcall(W, 0, 0);
}

int weft_dofile(weft_State *W, const char *path) {
  if (!W || !path) return WEFT_ERRARG;
  int st = luaL_loadfile(W->L, path);
  if (st != 0) return wf_state_takeerr(W, status_of(st));
  return wf_state_pcall(W, 0, 0);
}
