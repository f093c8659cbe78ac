/*
** pyapi.c -- one-call fast paths for the Python package (ctypes, with the
** GIL held through a PyDLL handle): DLPack capsule out of an array header,
** and capsule in to an array result. They spare the per-call cost of going
** through several ctypes calls and the Lua helpers.
*/
#include <dlfcn.h>
#include <string.h>

#include <lauxlib.h>

#include "interop/interop.h"
#include "runtime/rt.h"
#include "runtime/state.h"

typedef void *(*capsule_new_fn)(void *ptr, const char *name, void (*destructor)(void *));

/* A DLPack capsule (a new reference, or NULL) viewing array header h, with
** the element layout the caller knows (see wf_dlpack_export). The capsule
** destructor is wf_dlpack_capsule_destructor. */
WF_FFI void *wf_py_export(const wf_array *h, int versioned, int code, int bits, int ntrail,
                          int64_t t0, int64_t t1, uint64_t flags) {
  capsule_new_fn capsule_new = (capsule_new_fn)dlsym(RTLD_DEFAULT, "PyCapsule_New");
  if (!capsule_new || !h) return NULL;
  wf_rt rt; /* only for a message nobody reads */
  memset(&rt, 0, sizeof rt);
  int64_t trail[2] = {t0, t1};
  void *m = NULL;
  int st = wf_dlpack_export(&rt, h, versioned, code, bits, ntrail, trail, flags, &m);
  if (st != WEFT_OK) return NULL;
  void *cap = capsule_new(m, wf_dlpack_capsule_name(versioned ? 1 : 0),
                          wf_dlpack_capsule_destructor);
  if (!cap) wf_dlpack_delete(m, versioned);
  return cap;
}

typedef struct pyimport {
  void *managed;
  int versioned;
  const char *dtype;
  weft_Arg *res;
} pyimport;

/* Protected: interop.import(managed, versioned, dtype) -> array, type name,
** and the array result filled straight from its header. */
static int do_import(lua_State *L) {
  pyimport *o = (pyimport *)lua_touserdata(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "weft.interop");
  if (!lua_istable(L, -1)) luaL_error(L, "weft: the interop layer is not loaded");
  lua_getfield(L, -1, "import");
  lua_pushlightuserdata(L, o->managed);
  lua_pushboolean(L, o->versioned);
  if (o->dtype) lua_pushstring(L, o->dtype);
  else lua_pushnil(L);
  o->managed = NULL; /* Lua owns it now */
  lua_call(L, 3, 2);
  const wf_array *h = (const wf_array *)lua_topointer(L, -2);
  weft_Arg *r = o->res;
  memset(r, 0, sizeof *r);
  r->type = WEFT_ARG_ARRAY;
  r->s = lua_tostring(L, -1); /* a type's name: the type table keeps it */
  r->p = h->data;
  r->ndim = h->ndim;
  r->flags = h->flags;
  r->device = h->device;
  for (int k = 0; k < WF_MAXDIM; k++) r->shape[k] = h->shape[k], r->strides[k] = h->strides[k];
  r->d = (double)h->elsize;
  r->handle = (void *)h;
  lua_pop(L, 1);
  r->i = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* Import a DLPack capsule into W as an array result in *res (as weft_call
** returns arrays). Returns a WEFT_* status; -1 when the capsule was
** already consumed, -2 when it is not a DLPack capsule. */
WF_FFI int wf_py_import(weft_State *W, void *capsule, const char *dtype, weft_Arg *res) {
  int kind = -2;
  void *managed = wf_dlpack_capsule_take(capsule, &kind);
  if (!managed) return kind < 0 ? kind : WEFT_ERRARG;
  lua_getfield(W->L, LUA_REGISTRYINDEX, "weft.interop");
  int loaded = lua_istable(W->L, -1);
  lua_pop(W->L, 1);
  if (!loaded) { /* first use: the general path loads the interop layer */
    weft_Arg a;
    memset(&a, 0, sizeof a);
    a.type = kind == 1 ? WEFT_ARG_DLPACK_VERSIONED : WEFT_ARG_DLPACK;
    a.p = managed;
    a.s = dtype;
    return weft_call(W, "weft._interop.id", 1, &a, 1, res);
  }
  pyimport o = {managed, kind, dtype, res};
  lua_pushcfunction(W->L, do_import);
  lua_pushlightuserdata(W->L, &o);
  int st = wf_state_pcall(W, 1, 0);
  if (st != WEFT_OK && o.managed) wf_dlpack_delete(o.managed, kind);
  return st;
}
