/*
** interop.h -- DLPack import/export and the helpers the Lua layer
** (lua/weft/interop.lua, through the FFI) and the Python package (through
** ctypes) call. The public C API built on them is in include/weft.h.
**
** Ownership across the DLPack boundary:
**
**   export  wf_array --retain--> wf_buffer <--- wf_export block (malloc'd)
**           the DLManagedTensor(Versioned) lives inside the block; its C
**           deleter releases the buffer and frees the block, so it works
**           after weft_close and on any thread.
**
**   import  DLManagedTensor(Versioned) <--ctx-- wf_buffer (wrapped, refcount)
**           arrays hold the buffer; the last release calls the producer's
**           deleter exactly once, on whichever thread drops it.
*/
#ifndef WF_INTEROP_H
#define WF_INTEROP_H

#include "interop/dlpack.h"
#include "runtime/wf_rt.h"

/* ---- DLPack (FFI) ----------------------------------------------------- */
/* Export array a as a DLManagedTensor* (versioned = 0) or a
** DLManagedTensorVersioned* (versioned = 1) in *out. The element type is
** the DLPack scalar (code, bits); ntrail trailing dimensions trail[] (0 to
** 2) spell out vector/matrix elements. flags: WF_DLPACK_FLAG_* (READ_ONLY is
** also set for read-only arrays; legacy tensors cannot carry flags). */
WF_FFI int wf_dlpack_export(wf_rt *rt, const wf_array *a, int versioned, int code, int bits,
                            int ntrail, const int64_t *trail, uint64_t flags, void **out);

/* Import `managed` into *out (out->dtype is left 0 for the caller to set;
** *scalar names the weft scalar type, e.g. "float32"). When ntrail > 0 the
** tensor's last ntrail dimensions must equal trail[] and be compact; they
** become one vector/matrix element. Takes ownership: on failure the
** producer's deleter has run when this returns. */
WF_FFI int wf_dlpack_import(wf_rt *rt, void *managed, int versioned, int ntrail,
                            const int64_t *trail, wf_array *out, const char **scalar);

/* Call a DLPack tensor's deleter (if any): for consumers that are done. */
WF_FFI void wf_dlpack_delete(void *managed, int versioned);

/* ---- Python capsules (FFI, used by python/weft through ctypes) --------- */
/* Static capsule names: 0 "dltensor", 1 "dltensor_versioned",
** 2 "used_dltensor", 3 "used_dltensor_versioned" (capsules keep the pointer,
** so names must live forever). */
WF_FFI const char *wf_dlpack_capsule_name(int which);
/* A PyCapsule destructor: calls the tensor's deleter only if the capsule
** still has its original name (nobody consumed it). Finds the Python C API
** with dlsym at call time: libweft does not link Python. */
WF_FFI void wf_dlpack_capsule_destructor(void *capsule);
/* Consume a DLPack capsule: return its tensor and rename it "used_...".
** *versioned is 0 or 1; NULL with *versioned = -1 when the capsule was
** already consumed, -2 when it is not a DLPack capsule, -3 when Python's C
** API cannot be found. Must be called with the GIL held. */
WF_FFI void *wf_dlpack_capsule_take(void *capsule, int *versioned);

/* ---- one-call fast paths for python/weft (pyapi.c; GIL held) ---------- */
/* A new PyCapsule reference viewing header h (NULL on failure). */
WF_FFI void *wf_py_export(const wf_array *h, int versioned, int code, int bits, int ntrail,
                          int64_t t0, int64_t t1, uint64_t flags);
/* Import a DLPack capsule into W as an array result (see weft_call);
** -1: capsule already consumed, -2: not a DLPack capsule. */
WF_FFI int wf_py_import(weft_State *W, void *capsule, const char *dtype, weft_Arg *res);

#endif
