/*
** capi.c -- the host-facing C API on arrays (include/weft.h): weft_wrap,
** DLPack in and out, getting and setting Lua values, calling Lua functions
** and launching kernels with tagged arguments (weft_Arg).
**
** Each entry point runs one protected Lua C function (wf_state_pcall), so
** any Lua error -- from the API here or from the weft Lua layer it calls --
** becomes a status plus message on W. The Lua side of the work is in
** lua/weft/interop.lua (the table weft._interop).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "interop/interop.h"
#include "interop/state.h"

#define KEEP_KEY "weft.interop.keep" /* registry: strings of the last results */

/* ---- Lua helpers (run inside the protected call) ------------------------ */

/* Push weft._interop, loading lua/weft/interop.lua into the module if the
** module's part list did not. */
static void push_interop(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "weft.interop");
  if (lua_istable(L, -1)) return;
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushstring(L, "weft");
  lua_call(L, 1, 1); /* weft */
  lua_getfield(L, -1, "_interop");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushstring(L, "weft.interop");
    lua_call(L, 1, 1); /* the part: function(weft, P) */
    lua_pushvalue(L, -2);
    lua_getglobal(L, "require");
    lua_pushstring(L, "weft.internal"); /* P, set by init.lua */
    lua_call(L, 1, 1);
    lua_call(L, 2, 0);
    lua_getfield(L, -1, "_interop");
    if (!lua_istable(L, -1)) luaL_error(L, "weft: lua/weft/interop.lua did not set weft._interop");
  }
  lua_remove(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "weft.interop");
}

/* Push interop[name] (a function). */
static void push_helper(lua_State *L, const char *name) {
  push_interop(L);
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
}

void wf_interop_push_helper(lua_State *L, const char *name) {
  push_helper(L, name);
}

/* Push the value at a dotted global path ("sim.step"); an intermediate
** that is not a table is an error naming the path. */
static void get_path(lua_State *L, const char *path) {
  const char *dot = strchr(path, '.');
  if (!dot) {
    lua_getglobal(L, path);
    return;
  }
  lua_getglobal(L, "_G");
  for (const char *p = path;;) {
    dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (!lua_istable(L, -1)) {
      lua_pushlstring(L, path, (size_t)(p - path - 1)); /* the prefix before p */
      luaL_error(L, "weft: '%s' is not a table", lua_tostring(L, -1));
    }
    lua_pushlstring(L, p, n);
    lua_gettable(L, -2);
    lua_remove(L, -2);
    if (!dot) return;
    p = dot + 1;
  }
}

void wf_interop_get_path(lua_State *L, const char *path) {
  get_path(L, path);
}

/* Assign the value on top to the dotted global path (pops it). */
static void set_path(lua_State *L, const char *path) {
  const char *last = strrchr(path, '.');
  if (!last) {
    lua_setglobal(L, path);
    return;
  }
  lua_pushlstring(L, path, (size_t)(last - path));
  get_path(L, lua_tostring(L, -1));
  if (!lua_istable(L, -1)) luaL_error(L, "weft: '%s' is not a table", lua_tostring(L, -2));
  lua_pushstring(L, last + 1);
  lua_pushvalue(L, -4);
  lua_settable(L, -3);
  lua_pop(L, 3);
}

/* "cpu" or "cuda:N" for a device ordinal. */
static void push_device(lua_State *L, int32_t dev) {
  if (dev < 0)
    lua_pushliteral(L, "cpu");
  else
    lua_pushfstring(L, "cuda:%d", (int)dev);
}

/* Push a table {d1, ..., dn}. */
static void push_dims(lua_State *L, int n, const int64_t *d) {
  lua_createtable(L, n, 0);
  for (int k = 0; k < n; k++) {
    lua_pushnumber(L, (lua_Number)d[k]);
    lua_rawseti(L, -2, k + 1);
  }
}

/* Push the Lua value of argument k. A DLPack argument is handed to the
** Lua import, which owns it from then on: *mark = k + 1 is set just before,
** so the caller deletes only tensors Lua never saw. */
static void push_arg(lua_State *L, const weft_Arg *a, int k, int *mark) {
  switch (a->type) {
  case WEFT_ARG_NIL: lua_pushnil(L); return;
  case WEFT_ARG_BOOL: lua_pushboolean(L, a->i != 0); return;
  case WEFT_ARG_INT: lua_pushnumber(L, (lua_Number)a->i); return;
  case WEFT_ARG_FLOAT: lua_pushnumber(L, (lua_Number)(float)a->d); return;
  case WEFT_ARG_DOUBLE: lua_pushnumber(L, a->d); return;
  case WEFT_ARG_STRING: lua_pushstring(L, a->s ? a->s : ""); return;
  case WEFT_ARG_GLOBAL:
    if (!a->s) luaL_error(L, "weft: a WEFT_ARG_GLOBAL argument has no name");
    get_path(L, a->s);
    return;
  case WEFT_ARG_REF:
  case WEFT_ARG_ARRAY: lua_rawgeti(L, LUA_REGISTRYINDEX, (int)a->i); return;
  case WEFT_ARG_DATA: {
    if (a->ndim < 1 || a->ndim > 4)
      luaL_error(L, "weft: a WEFT_ARG_DATA argument has %d dimensions (expected 1 to 4)",
                 (int)a->ndim);
    push_helper(L, "wrap");
    lua_pushlightuserdata(L, a->p);
    lua_pushstring(L, a->s ? a->s : "float32");
    push_dims(L, a->ndim, a->shape);
    push_device(L, a->device);
    int strided = 0;
    for (int k = 0; k < a->ndim; k++)
      strided |= a->strides[k] != 0;
    if (strided)
      push_dims(L, a->ndim, a->strides);
    else
      lua_pushnil(L);
    lua_call(L, 5, 1);
    return;
  }
  case WEFT_ARG_DLPACK:
  case WEFT_ARG_DLPACK_VERSIONED:
    push_helper(L, "import");
    lua_pushlightuserdata(L, a->p);
    lua_pushboolean(L, a->type == WEFT_ARG_DLPACK_VERSIONED);
    if (a->s)
      lua_pushstring(L, a->s);
    else
      lua_pushnil(L);
    *mark = k + 1;
    lua_call(L, 3, 1);
    return;
  default: luaL_error(L, "weft: unknown weft_Arg type %d", (int)a->type);
  }
}

/* The table that keeps result strings alive until the next call. */
static int push_keep(lua_State *L) {
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, KEEP_KEY);
  return lua_gettop(L);
}

/* A string result, kept alive in the keep table. */
static const char *keep_string(lua_State *L, int keep, int idx) {
  lua_pushvalue(L, idx);
  const char *s = lua_tostring(L, -1);
  lua_rawseti(L, keep, (int)lua_objlen(L, keep) + 1);
  return s;
}

/* Fill r with the value at idx (arrays and other objects get a registry
** reference the caller drops with weft_unref). */
static void to_result(lua_State *L, int idx, weft_Arg *r, int keep) {
  memset(r, 0, sizeof *r);
  switch (lua_type(L, idx)) {
  case LUA_TNIL: r->type = WEFT_ARG_NIL; return;
  case LUA_TBOOLEAN: r->type = WEFT_ARG_BOOL, r->i = lua_toboolean(L, idx); return;
  case LUA_TNUMBER: r->type = WEFT_ARG_DOUBLE, r->d = lua_tonumber(L, idx); return;
  case LUA_TSTRING: r->type = WEFT_ARG_STRING, r->s = keep_string(L, keep, idx); return;
  default: break;
  }
  /* interop.describe(v) -> kind, name, number */
  push_helper(L, "describe");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 3);
  const char *kind = lua_tostring(L, -3);
  if (kind && strcmp(kind, "int") == 0) {
    r->type = WEFT_ARG_INT;
    r->i = (int64_t)lua_tonumber(L, -1);
    r->d = lua_tonumber(L, -1);
  } else {
    r->s = keep_string(L, keep, -2);
    lua_pushvalue(L, idx);
    r->i = luaL_ref(L, LUA_REGISTRYINDEX);
    r->type = WEFT_ARG_REF;
    if (kind && strcmp(kind, "array") == 0) {
      /* A weft_Array cdata's payload is its wf_array header. */
      const wf_array *h = (const wf_array *)lua_topointer(L, idx);
      r->type = WEFT_ARG_ARRAY;
      r->p = h->data;
      r->ndim = h->ndim;
      r->flags = h->flags;
      r->device = h->device;
      for (int k = 0; k < WF_MAXDIM; k++)
        r->shape[k] = h->shape[k], r->strides[k] = h->strides[k];
      r->d = (double)h->elsize;
      r->handle = (void *)h;
    }
  }
  lua_pop(L, 3);
}

/* ---- protected operations -------------------------------------------- */

typedef struct op {
  weft_State *W;
  const char *path; /* global path */
  int nargs, nin;   /* arguments; the first nin are launch inputs */
  const weft_Arg *args;
  int nres;
  weft_Arg *res;
  int ndim; /* launch grid */
  const int64_t *dims;
  int versioned, copy; /* export */
  void *managed;       /* export result / import argument */
  int nconsumed;       /* args[0 .. nconsumed-1] have been handed to Lua */
  const char *device;  /* weft_compile */
} op;

static op *op_of(lua_State *L) {
  return (op *)lua_touserdata(L, 1);
}

/* Run f(o) protected; the message of a failure goes to W. */
static int run(op *o, lua_CFunction f) {
  lua_State *L = o->W->L;
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, o);
  return wf_state_pcall(o->W, 1, 0);
}

/* Delete the DLPack arguments that were never handed to Lua. */
static void drop_unconsumed(const weft_Arg *args, int from, int n) {
  for (int k = from; k < n; k++)
    if (args[k].type == WEFT_ARG_DLPACK || args[k].type == WEFT_ARG_DLPACK_VERSIONED)
      wf_dlpack_delete(args[k].p, args[k].type == WEFT_ARG_DLPACK_VERSIONED);
}

static int check_state(weft_State *W, const char *fn, const char *name) {
  if (!W || !W->L) return WEFT_ERRARG;
  if (!name) return wf_state_seterr(W, WEFT_ERRARG, "weft: %s: NULL name", fn);
  return WEFT_OK;
}

/* Push every argument (consuming DLPack ones in order). */
static void push_args(lua_State *L, op *o) {
  luaL_checkstack(L, o->nargs + 8, "weft: too many arguments");
  for (int k = 0; k < o->nargs; k++) {
    push_arg(L, &o->args[k], k, &o->nconsumed);
    o->nconsumed = k + 1;
  }
}

/* ---- weft_wrap ---------------------------------------------------------- */

static int do_set(lua_State *L) {
  op *o = op_of(L);
  push_args(L, o); /* exactly one */
  set_path(L, o->path);
  return 0;
}

int weft_wrap(weft_State *W, const char *global, void *data, const char *dtype, int ndim,
              const int64_t *shape, const char *device) {
  int st = check_state(W, "weft_wrap", global);
  if (st) return st;
  if (ndim < 1 || ndim > 4 || !shape)
    return wf_state_seterr(W, WEFT_ERRARG, "weft_wrap: ndim must be 1 to 4, got %d", ndim);
  if (!dtype) return wf_state_seterr(W, WEFT_ERRARG, "weft_wrap: NULL dtype");
  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = WEFT_ARG_DATA;
  a.p = data;
  a.s = dtype;
  a.ndim = ndim;
  for (int k = 0; k < ndim; k++)
    a.shape[k] = shape[k];
  a.device = -1;
  if (device && strcmp(device, "cpu") != 0) {
    int n = 0;
    if (strcmp(device, "cuda") == 0)
      n = 0;
    else if (sscanf(device, "cuda:%d", &n) != 1 || n < 0)
      return wf_state_seterr(W, WEFT_ERRARG, "weft_wrap: unknown device '%s'", device);
    a.device = n;
  }
  op o = {.W = W, .path = global, .nargs = 1, .args = &a};
  return run(&o, do_set);
}

int weft_set(weft_State *W, const char *global, const weft_Arg *value) {
  int st = check_state(W, "weft_set", global);
  if (st == WEFT_OK && !value) st = wf_state_seterr(W, WEFT_ERRARG, "weft_set: NULL value");
  if (st != WEFT_OK) {
    if (value) drop_unconsumed(value, 0, 1);
    return st;
  }
  op o = {.W = W, .path = global, .nargs = 1, .args = value};
  st = run(&o, do_set);
  if (st != WEFT_OK) drop_unconsumed(value, o.nconsumed, 1);
  return st;
}

/* ---- weft_get / weft_unref --------------------------------------------- */

static int do_get(lua_State *L) {
  op *o = op_of(L);
  int keep = push_keep(L);
  get_path(L, o->path);
  to_result(L, lua_gettop(L), o->res, keep);
  return 0;
}

int weft_get(weft_State *W, const char *global, weft_Arg *out) {
  if (out) memset(out, 0, sizeof *out);
  int st = check_state(W, "weft_get", global);
  if (st) return st;
  if (!out) return wf_state_seterr(W, WEFT_ERRARG, "weft_get: NULL out");
  op o = {.W = W, .path = global, .nres = 1, .res = out};
  return run(&o, do_get);
}

void weft_unref(weft_State *W, int64_t ref) {
  if (!W || !W->L || ref <= 0) return;
  luaL_unref(W->L, LUA_REGISTRYINDEX, (int)ref);
}

/* ---- weft_call --------------------------------------------------------- */

static int do_call(lua_State *L) {
  op *o = op_of(L);
  push_interop(L); /* makes weft._interop.* reachable even if init.lua lacks it */
  lua_pop(L, 1);
  get_path(L, o->path);
  if (lua_isnil(L, -1)) luaL_error(L, "weft_call: no function named '%s'", o->path);
  if (!lua_isfunction(L, -1)) { /* tables and cdata may be callable */
    if (!luaL_getmetafield(L, -1, "__call"))
      luaL_error(L, "weft_call: '%s' is a %s, not a function", o->path, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  int base = lua_gettop(L);
  push_args(L, o);
  lua_call(L, o->nargs, LUA_MULTRET);
  int got = lua_gettop(L) - base + 1;
  int keep = push_keep(L);
  for (int k = 0; k < o->nres; k++) {
    if (k < got)
      to_result(L, base + k, &o->res[k], keep);
    else
      memset(&o->res[k], 0, sizeof o->res[k]);
  }
  return 0;
}

int weft_call(weft_State *W, const char *func, int nargs, const weft_Arg *args, int nres,
              weft_Arg *res) {
  int st = check_state(W, "weft_call", func);
  if (st == WEFT_OK && (nargs < 0 || (nargs > 0 && !args) || nres < 0 || (nres > 0 && !res)))
    st = wf_state_seterr(W, WEFT_ERRARG, "weft_call: bad argument or result count");
  if (st != WEFT_OK) {
    if (args && nargs > 0) drop_unconsumed(args, 0, nargs);
    return st;
  }
  for (int k = 0; k < nres; k++)
    memset(&res[k], 0, sizeof res[k]);
  op o = {.W = W, .path = func, .nargs = nargs, .args = args, .nres = nres, .res = res};
  st = run(&o, do_call);
  if (st != WEFT_OK) drop_unconsumed(args, o.nconsumed, nargs);
  return st;
}

/* ---- weft_launch -------------------------------------------------------- */

static int do_launch(lua_State *L) {
  op *o = op_of(L);
  push_helper(L, "launch");
  get_path(L, o->path);
  if (lua_isnil(L, -1)) luaL_error(L, "weft_launch: no kernel named '%s'", o->path);
  push_dims(L, o->ndim, o->dims);
  lua_pushinteger(L, o->nin);
  push_args(L, o);
  lua_call(L, 3 + o->nargs, 0);
  return 0;
}

int weft_launch_io(weft_State *W, const char *kernel, int ndim, const int64_t *dims, int nin,
                   const weft_Arg *inputs, int nout, const weft_Arg *outputs) {
  int st = check_state(W, "weft_launch", kernel);
  int n = nin + nout;
  if (st == WEFT_OK && (ndim < 1 || ndim > 4 || !dims))
    st = wf_state_seterr(W, WEFT_ERRARG, "weft_launch: the grid must have 1 to 4 dimensions");
  if (st == WEFT_OK && (nin < 0 || nout < 0 || (nin && !inputs) || (nout && !outputs)))
    st = wf_state_seterr(W, WEFT_ERRARG, "weft_launch: bad argument counts");
  weft_Arg stack[16];
  weft_Arg *all = n <= 16 ? stack : malloc(sizeof(weft_Arg) * (size_t)(n > 0 ? n : 1));
  if (st == WEFT_OK && !all) st = wf_state_seterr(W, WEFT_ERRMEM, "weft_launch: out of memory");
  if (st != WEFT_OK) {
    if (inputs && nin > 0) drop_unconsumed(inputs, 0, nin);
    if (outputs && nout > 0) drop_unconsumed(outputs, 0, nout);
    if (all != stack) free(all);
    return st;
  }
  if (nin) memcpy(all, inputs, sizeof(weft_Arg) * (size_t)nin);
  if (nout) memcpy(all + nin, outputs, sizeof(weft_Arg) * (size_t)nout);
  op o = {.W = W, .path = kernel, .nargs = n, .nin = nin, .args = all, .ndim = ndim, .dims = dims};
  st = run(&o, do_launch);
  if (st != WEFT_OK) drop_unconsumed(all, o.nconsumed, n);
  if (all != stack) free(all);
  return st;
}

int weft_launch(weft_State *W, const char *kernel, int ndim, const int64_t *dims, int nargs,
                const weft_Arg *args) {
  return weft_launch_io(W, kernel, ndim, dims, nargs, args, 0, NULL);
}

/* ---- DLPack ------------------------------------------------------------- */

static int do_export(lua_State *L) {
  op *o = op_of(L);
  push_helper(L, "export");
  push_args(L, o); /* the one value */
  lua_pushboolean(L, o->versioned);
  lua_pushboolean(L, o->copy);
  lua_pushlightuserdata(L, &o->managed);
  lua_call(L, 4, 0);
  return 0;
}

void *weft_export_value(weft_State *W, const weft_Arg *value, int versioned, int copy) {
  if (!W || !W->L) return NULL;
  if (!value) {
    wf_state_seterr(W, WEFT_ERRARG, "weft_export_value: NULL value");
    return NULL;
  }
  if (value->type == WEFT_ARG_DLPACK || value->type == WEFT_ARG_DLPACK_VERSIONED) {
    wf_state_seterr(W, WEFT_ERRARG, "weft_export_value: cannot export a DLPack argument");
    return NULL;
  }
  op o = {.W = W, .nargs = 1, .args = value, .versioned = versioned != 0, .copy = copy != 0};
  if (run(&o, do_export) != WEFT_OK) return NULL;
  return o.managed;
}

void *weft_export_dlpack(weft_State *W, const char *global, int versioned) {
  if (check_state(W, "weft_export_dlpack", global) != WEFT_OK) return NULL;
  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = WEFT_ARG_GLOBAL;
  a.s = global;
  return weft_export_value(W, &a, versioned, 0);
}

int weft_import_dlpack(weft_State *W, const char *global, void *managed, int versioned) {
  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = versioned ? WEFT_ARG_DLPACK_VERSIONED : WEFT_ARG_DLPACK;
  a.p = managed;
  if (!managed) {
    if (W) wf_state_seterr(W, WEFT_ERRARG, "weft_import_dlpack: NULL tensor");
    return WEFT_ERRARG;
  }
  return weft_set(W, global, &a);
}

/* ---- weft_compile ------------------------------------------------------- */

/* kernel:compile{ ndim = o->ndim, device = o->path2 } */
static int do_compile(lua_State *L) {
  op *o = op_of(L);
  get_path(L, o->path);
  if (lua_isnil(L, -1)) luaL_error(L, "weft_compile: no kernel named '%s'", o->path);
  lua_getfield(L, -1, "compile");
  if (!lua_isfunction(L, -1)) luaL_error(L, "weft_compile: '%s' is not a kernel", o->path);
  lua_insert(L, -2);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, o->ndim);
  lua_setfield(L, -2, "ndim");
  lua_pushstring(L, o->device ? o->device : "cpu");
  lua_setfield(L, -2, "device");
  lua_call(L, 2, 0);
  return 0;
}

int weft_compile(weft_State *W, const char *kernel, int ndim, const char *device) {
  int st = check_state(W, "weft_compile", kernel);
  if (st) return st;
  if (ndim < 1 || ndim > 4)
    return wf_state_seterr(W, WEFT_ERRARG, "weft_compile: ndim must be 1 to 4, got %d", ndim);
  op o = {.W = W, .path = kernel, .ndim = ndim, .device = device};
  return run(&o, do_compile);
}
