/*
** interop.h -- DLPack import/export and the helpers the Lua layer
** (lua/weft/interop.lua, through the FFI) and the Python package (through
** ctypes) call. The public C API built on them is in include/weft.h.
**
** Takes: the runtime and the bindings (state.c opens a Lua state with
** weft.core preloaded). Gives: DLPack in and out, the C API for hosts
** (include/weft.h: capi.c, state.c), the Python fast paths (pyapi.c).
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

#include <lua.h>

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

/* Check everything a producer hands over in `managed` (version, ndim,
** shape pointer, dtype, device, sizes >= 0, strides and byte_offset with
** overflow-checked extents, data NULL only when empty, scalar alignment):
** WEFT_OK, or a status with a message naming the fault. Reads only the
** tensor's own fields and arrays; never deletes it (the import functions
** below call this first and then delete a rejected tensor). */
WF_INTERNAL int wf_dlpack_validate(wf_rt *rt, const void *managed, int versioned);

/* Call a DLPack tensor's deleter (if any): for consumers that are done. */
WF_FFI void wf_dlpack_delete(void *managed, int versioned);

/* ---- scalar types and header-only import (internal) ------------------ */
#define WF_NSCALARS 12
/* "bool", "int8" .. "int64", "uint8" .. "uint64", "float16" .. "float64":
** the index of a scalar type names it between C and the Lua layer. */
WF_INTERNAL extern const char *const wf_dlpack_scalars[WF_NSCALARS];
/* The scalar index of a DLPack (code, bits), or -1. */
WF_INTERNAL int wf_dlpack_scalar_index(int code, int bits);
/* Validate `managed` and fill *out like wf_dlpack_import, but make no
** buffer and keep no ownership (out->buf is NULL, out->dtype 0): for a
** caller that holds the tensor for as long as it uses the header. *scalar
** is the scalar index. The tensor is never deleted here. */
WF_INTERNAL int wf_dlpack_header(wf_rt *rt, void *managed, int versioned, int ntrail,
                                 const int64_t *trail, wf_array *out, int *scalar);
/* wf_dlpack_import with the scalar index in *scalar. */
WF_INTERNAL int wf_dlpack_import_k(wf_rt *rt, void *managed, int versioned, int ntrail,
                                   const int64_t *trail, wf_array *out, int *scalar);

/* ---- Python capsules (FFI, used by python/weft through ctypes) --------- */
/* Static capsule names: 0 "dltensor", 1 "dltensor_versioned",
** 2 "used_dltensor", 3 "used_dltensor_versioned" (capsules keep the pointer,
** so names must live forever). */
WF_FFI const char *wf_dlpack_capsule_name(int which);
/* A PyCapsule destructor: calls the tensor's deleter only if the capsule
** still has its original name (nobody consumed it). Uses the Python C API
** of the running process (src/interop/pyc.h): libweft does not link Python. */
WF_FFI void wf_dlpack_capsule_destructor(void *capsule);
/* A versioned DLPack tensor viewing data (iface.c, for the array
** interfaces): shape and strides (elements; NULL = compact) are copied;
** owner (a Python object, may be NULL) is kept alive until the deleter
** runs. NULL when out of memory. */
WF_FFI void *wf_iface_tensor(void *data, int32_t device_type, int32_t device_id, int32_t ndim,
                             const int64_t *shape, const int64_t *strides, int code, int bits,
                             uint64_t flags, void *owner);

/* ---- Python fast paths (pyapi.c) ---------------------------------------- */
/* A tuple of builtin functions (a new reference) implemented in C, called
** by python/weft without ctypes: see pyapi.c. NULL (with a Python
** exception set, or none when Python is not in the process) on failure. */
WF_FFI void *wf_py_functions(void);

/* ---- helpers shared by capi.c and pyapi.c (internal) ------------------- */
/* Push weft._interop[name] (loading the interop layer if needed). */
WF_INTERNAL void wf_interop_push_helper(lua_State *L, const char *name);
/* Push the value at a dotted global path ("sim.step"). */
WF_INTERNAL void wf_interop_get_path(lua_State *L, const char *path);

#endif
