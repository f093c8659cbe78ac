/*
** pyapi.c -- one-call fast paths for the Python package (ctypes, with the
** GIL held through a PyDLL handle): DLPack capsule out of an array header,
** and capsule in to an array result. They spare the per-call cost of going
** through several ctypes calls and the Lua helpers.
*/
#include <dlfcn.h>
#include <string.h>

#include "interop/interop.h"
#include "runtime/state.h"

typedef void *(*capsule_new_fn)(void *ptr, const char *name, void (*destructor)(void *));

/* A DLPack capsule (a new reference, or NULL) viewing array header h, with
** the element layout the caller knows (see wf_dlpack_export). The capsule
** destructor is wf_dlpack_capsule_destructor. */
WF_FFI void *wf_py_export(const wf_array *h, int versioned, int code, int bits, int ntrail,
                          int64_t t0, int64_t t1, uint64_t flags) {
  capsule_new_fn capsule_new = (capsule_new_fn)dlsym(RTLD_DEFAULT, "PyCapsule_New");
  if (!capsule_new || !h) return NULL;
  wf_rt *rt = wf_rt_new(); /* only for a message nobody reads: keep it local */
  if (!rt) return NULL;
  int64_t trail[2] = {t0, t1};
  void *m = NULL;
  int st = wf_dlpack_export(rt, h, versioned, code, bits, ntrail, trail, flags, &m);
  wf_rt_free(rt);
  if (st != WEFT_OK) return NULL;
  void *cap = capsule_new(m, wf_dlpack_capsule_name(versioned ? 1 : 0),
                          wf_dlpack_capsule_destructor);
  if (!cap) wf_dlpack_delete(m, versioned);
  return cap;
}

/* Import a DLPack capsule into W as an array result in *res (see
** weft_call). Returns a WEFT_* status; -1 when the capsule was already
** consumed, -2 when it is not a DLPack capsule. */
WF_FFI int wf_py_import(weft_State *W, void *capsule, const char *dtype, weft_Arg *res) {
  int kind = -2;
  void *managed = wf_dlpack_capsule_take(capsule, &kind);
  if (!managed) return kind < 0 ? kind : WEFT_ERRARG;
  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = kind == 1 ? WEFT_ARG_DLPACK_VERSIONED : WEFT_ARG_DLPACK;
  a.p = managed;
  a.s = dtype;
  return weft_call(W, "weft._interop.id", 1, &a, 1, res);
}
