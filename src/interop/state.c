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

#include "bindings/bindings.h"
#include "interop/state.h"

const char *weft_version(void) {
  return WEFT_VERSION;
}

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

/* The registry key of "@<dir>/" where weft's Lua files are (set at open). */
#define LUADIR_KEY "weft.luadir"

/* Is frame ar in weft's own Lua layer (its files, or chunks it generates,
** named "=weft ...")? A host's messages leave those frames out. */
static int internal_frame(const lua_Debug *ar, const char *dir, size_t ndir) {
  if (ar->source[0] == '=' && strncmp(ar->source, "=weft", 5) == 0) return 1;
  return dir && strncmp(ar->source, dir, ndir) == 0;
}

/* One traceback line, as debug.traceback writes it. */
static void add_frame(lua_State *L, luaL_Buffer *b, lua_Debug *ar) {
  lua_pushfstring(L, "\n\t%s:", ar->short_src);
  luaL_addvalue(b);
  if (ar->currentline > 0) {
    lua_pushfstring(L, "%d:", ar->currentline);
    luaL_addvalue(b);
  }
  if (*ar->namewhat)
    lua_pushfstring(L, " in function '%s'", ar->name);
  else if (*ar->what == 'm')
    lua_pushliteral(L, " in main chunk");
  else if (*ar->what == 'C')
    lua_pushliteral(L, " ?");
  else
    lua_pushfstring(L, " in function <%s:%d>", ar->short_src, ar->linedefined);
  luaL_addvalue(b);
}

/* Message handler: append a traceback of the caller's frames to string
** errors. Frames in weft's Lua files are left out, and with them the C
** functions they call (error, pcall) and the C frames at the bottom. */
static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  lua_getfield(L, LUA_REGISTRYINDEX, LUADIR_KEY);
  size_t ndir = 0;
  const char *dir = lua_tolstring(L, -1, &ndir);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, msg);
  lua_Debug ar, next;
  int have = lua_getstack(L, 1, &ar), shown = 0, npend = 0, pend[8];
  if (have) lua_getinfo(L, "Snl", &ar);
  for (int level = 1; have; level++) {
    int more = lua_getstack(L, level + 1, &next);
    if (more) lua_getinfo(L, "Snl", &next);
    int is_c = strcmp(ar.what, "C") == 0;
    int skip = internal_frame(&ar, dir, ndir) || (is_c && more && internal_frame(&next, dir, ndir));
    if (!skip && is_c) {
      if (npend < 8) pend[npend++] = level; /* shown only if a Lua frame follows */
    } else if (!skip) {
      if (!shown) luaL_addstring(&b, "\nstack traceback:");
      for (int k = 0; k < npend; k++) {
        lua_Debug c;
        if (lua_getstack(L, pend[k], &c) && lua_getinfo(L, "Sn", &c)) add_frame(L, &b, &c);
      }
      npend = 0;
      add_frame(L, &b, &ar);
      shown++;
    }
    ar = next;
    have = more;
  }
  luaL_pushresult(&b);
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

/* A full collection (run under lua_cpcall: finalizers may fail). */
static int collect(lua_State *L) {
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}

/* LuaJIT does not collect before it reports a failed allocation: the
** garbage of the failed call would make the next call fail too. The limit
** is lifted meanwhile: lua_cpcall and the finalizers allocate. */
static void after_oom(weft_State *W) {
  size_t limit = W->mem_limit;
  W->mem_limit = 0;
  if (lua_cpcall(W->L, collect, NULL) != 0) lua_pop(W->L, 1);
  W->mem_limit = limit;
}

int wf_state_pcall(weft_State *W, int nargs, int nres) {
  lua_State *L = W->L;
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  uint32_t taken = __atomic_load_n(&W->intr.taken, __ATOMIC_ACQUIRE);
  int st = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  if (st == 0) return WEFT_OK;
  if (st == LUA_ERRMEM) after_oom(W);
  /* an interrupt taken during the call (by a launch or the hook) */
  if (__atomic_load_n(&W->intr.taken, __ATOMIC_ACQUIRE) != taken)
    return wf_state_takeerr(W, WEFT_ERRINTR);
  return wf_state_takeerr(W, status_of(st));
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
#ifdef WEFT_INSTALL_LUA_DIR
  if (!dir || !*dir) {
    if (access(WEFT_INSTALL_LUA_DIR "/weft/init.lua", R_OK) == 0) dir = WEFT_INSTALL_LUA_DIR;
  }
#endif
  if (!dir || !*dir) return;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

/* The registry key of the weft_State a LuaJIT state belongs to. */
#define STATE_KEY "weft.state"

/* os.exit of a sandboxed state (weft_Options.sandbox_exit). */
static int exit_disabled(lua_State *L) {
  return luaL_error(L, "os.exit is disabled by the host");
}

/* Run by Lua at its next instruction after weft_interrupt: stop with
** "interrupted" if the request is still pending (a launch may have taken
** it already; then this only removes itself). */
static void intr_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, STATE_KEY);
  weft_State *W = (weft_State *)lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (W && wf_intr_take(&W->intr)) {
    luaL_where(L, 0); /* the line the interpreter is at (the hook has no frame) */
    lua_pushliteral(L, "interrupted");
    lua_concat(L, 2);
    lua_error(L);
  }
}

void weft_interrupt(weft_State *W) {
  if (!W || !W->L) return;
  __atomic_store_n(&W->intr.pending, 1, __ATOMIC_RELEASE);
  lua_sethook(W->L, intr_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Remember "@<dir>/" of weft's Lua files (from the source of one of its
** parts), for the traceback handler. */
static void set_luadir(lua_State *L) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "loaded");
  lua_getfield(L, -1, "weft.types");
  lua_Debug ar;
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 3);
    return;
  }
  lua_getinfo(L, ">S", &ar); /* pops the function */
  const char *slash = ar.source[0] == '@' ? strrchr(ar.source, '/') : NULL;
  if (slash) {
    lua_pushlstring(L, ar.source, (size_t)(slash - ar.source + 1));
    lua_setfield(L, LUA_REGISTRYINDEX, LUADIR_KEY);
  }
  lua_pop(L, 2);
}

/* Protected start-up (a memory limit can make any step fail): the
** standard libraries, the weft module as global `weft`, and the runtime
** polling W's interrupt request. Argument 1: W (light userdata). */
static int open_weft(lua_State *L) {
  weft_State *W = (weft_State *)lua_touserdata(L, 1);
  luaL_openlibs(L);
  lua_pushlightuserdata(L, W);
  lua_setfield(L, LUA_REGISTRYINDEX, STATE_KEY);
  if (W->sandbox_exit) {
    lua_getglobal(L, "os");
    lua_pushcfunction(L, exit_disabled);
    lua_setfield(L, -2, "exit");
    lua_pop(L, 1);
  }
  set_lua_path(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_weft_core);
  lua_setfield(L, -2, "weft.core");
  lua_pop(L, 2);
  /* lua/weft/init.lua attaches its runtime to this interrupt request */
  lua_pushlightuserdata(L, &W->intr);
  lua_setfield(L, LUA_REGISTRYINDEX, "weft.intr");
  lua_getglobal(L, "require");
  lua_pushstring(L, "weft");
  lua_call(L, 1, 1);
  lua_setglobal(L, "weft");
  set_luadir(L);
  return 0;
}

/* The allocator of a state with a memory limit: it counts the heap and
** refuses to grow it past the limit (LuaJIT then raises "not enough
** memory"). Shrinking never fails. */
static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  weft_State *W = (weft_State *)ud;
  if (!ptr) osize = 0;
  if (nsize == 0) {
    free(ptr);
    W->mem_used -= osize;
    return NULL;
  }
  if (nsize > osize && W->mem_limit && nsize - osize > W->mem_limit - W->mem_used) return NULL;
  void *p = realloc(ptr, nsize);
  if (!p) return nsize <= osize ? ptr : NULL;
  W->mem_used = W->mem_used - osize + nsize;
  return p;
}

/* weft_open_ex's failure before a state exists. */
static weft_State *open_failed(const weft_Options *opts, const char *why) {
  if (opts && opts->errbuf && opts->errbuf_size)
    snprintf(opts->errbuf, opts->errbuf_size, "weft_open: %s", why);
  else
    fprintf(stderr, "weft_open: %s\n", why);
  return NULL;
}

weft_State *weft_open_ex(const weft_Options *opts) {
  weft_State *W = calloc(1, sizeof *W);
  if (!W) return open_failed(opts, "out of memory");
  if (opts) {
    W->sandbox_exit = opts->sandbox_exit != 0;
    W->mem_limit = opts->memory_limit;
  }
  W->L = W->mem_limit ? lua_newstate(limited_alloc, W) : luaL_newstate();
  if (!W->L) {
    free(W);
    return open_failed(opts, "cannot create a LuaJIT state (out of memory)");
  }
  lua_pushcfunction(W->L, open_weft);
  lua_pushlightuserdata(W->L, W);
  if (wf_state_pcall(W, 1, 0) != WEFT_OK) {
    if (opts && opts->errbuf && opts->errbuf_size)
      snprintf(opts->errbuf, opts->errbuf_size, "weft_open: %s", weft_errmsg(W));
    else
      fprintf(stderr, "weft_open: %s\n", weft_errmsg(W));
    weft_close(W);
    return NULL;
  }
  if (opts && opts->errbuf && opts->errbuf_size) opts->errbuf[0] = '\0';
  return W;
}

weft_State *weft_open(void) {
  return weft_open_ex(NULL);
}

void weft_close(weft_State *W) {
  if (!W) return;
  if (W->L) {
    lua_sethook(W->L, NULL, 0, 0);
    /* Finalizers must not fail for want of memory: lua_close rescans
    ** every pending finalizer after each failing one, which made closing
    ** a state with many live arrays quadratic after an out-of-memory
    ** error. */
    W->mem_limit = 0;
    lua_close(W->L);
  }
  free(W->msg);
  free(W);
}

lua_State *weft_lua(weft_State *W) {
  return W ? W->L : NULL;
}

const char *weft_errmsg(weft_State *W) {
  return (W && W->msg) ? W->msg : "";
}

int weft_dostring(weft_State *W, const char *code) {
  if (!W || !code) return WEFT_ERRARG;
  /* The code is its own chunk name (as luaL_loadstring does), so kernels
  ** defined in it can find their source text through debug.getinfo. */
  int st = luaL_loadbuffer(W->L, code, strlen(code), code);
  if (st == LUA_ERRMEM) after_oom(W);
  if (st != 0) return wf_state_takeerr(W, status_of(st));
  return wf_state_pcall(W, 0, 0);
}

int weft_dofile(weft_State *W, const char *path) {
  if (!W || !path) return WEFT_ERRARG;
  int st = luaL_loadfile(W->L, path);
  if (st == LUA_ERRMEM) after_oom(W);
  if (st != 0) return wf_state_takeerr(W, status_of(st));
  return wf_state_pcall(W, 0, 0);
}

/* Keep text under chunkname in registry["weft.sources"] (read by
** lua/weft/kernel.lua and the compiler). Protected: the table may need
** memory. Arguments: the name, the text. */
static int do_register(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "weft.sources");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "weft.sources");
  }
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_rawset(L, -3);
  return 0;
}

int weft_register_source(weft_State *W, const char *chunkname, const char *text, size_t len) {
  if (!W || !W->L) return WEFT_ERRARG;
  if (!chunkname || !text)
    return wf_state_seterr(W, WEFT_ERRARG, "weft_register_source: NULL %s",
                           chunkname ? "text" : "chunk name");
  lua_State *L = W->L;
  if (!lua_checkstack(L, 4)) return wf_state_seterr(W, WEFT_ERRMEM, "weft: out of memory");
  lua_pushcfunction(L, do_register);
  lua_pushstring(L, chunkname);
  lua_pushlstring(L, text, len);
  return wf_state_pcall(W, 2, 0);
}

int weft_dobuffer(weft_State *W, const char *buf, size_t len, const char *chunkname) {
  if (!W || !W->L || (!buf && len)) return WEFT_ERRARG;
  if (!buf) buf = "";
  if (!chunkname) chunkname = "=buffer";
  int st = weft_register_source(W, chunkname, buf, len);
  if (st != WEFT_OK) return st;
  st = luaL_loadbuffer(W->L, buf, len, chunkname);
  if (st == LUA_ERRMEM) after_oom(W);
  if (st != 0) return wf_state_takeerr(W, status_of(st));
  return wf_state_pcall(W, 0, 0);
}

int weft_pcall(weft_State *W, int nargs, int nres) {
  if (!W || !W->L) return WEFT_ERRARG;
  if (nargs < 0 || lua_gettop(W->L) < nargs + 1)
    return wf_state_seterr(W, WEFT_ERRARG, "weft_pcall: %d arguments, but %d values on the stack",
                           nargs, lua_gettop(W->L));
  return wf_state_pcall(W, nargs, nres);
}
