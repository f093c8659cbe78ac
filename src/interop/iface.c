/*
** iface.c -- DLPack tensors for the array interfaces (FFI, used by
** python/weft/protocols.py through ctypes).
**
** __cuda_array_interface__ and __array_interface__ describe memory by a raw
** pointer; weft takes such memory the way it takes any other: as a versioned
** DLPack tensor, which Python wraps in a capsule (_lib.make_capsule). The
** tensor holds a reference to the Python object that owns the memory
** (manager_ctx) and drops it in its deleter, which is C because it may run
** on any thread or at interpreter shutdown (the GIL is taken for it; after
** finalization the reference is left alone).
**
**   DLManagedTensorVersioned (one malloc) | shape[ndim] | strides[ndim]
*/
#include <stdlib.h>
#include <string.h>

#include "interop/dlpack.h"
#include "interop/interop.h"
#include "interop/pyc.h"

extern int Py_IsInitialized(void) WF_WEAK;
extern int PyGILState_Ensure(void) WF_WEAK; /* PyGILState_STATE, an enum */
extern void PyGILState_Release(int state) WF_WEAK;

static void iface_deleter(DLManagedTensorVersioned *m) {
  pyobj *owner = m->manager_ctx;
  if (owner && WF_PY_READY() && &Py_IsInitialized && &PyGILState_Ensure && Py_IsInitialized()) {
    int g = PyGILState_Ensure();
    Py_DecRef(owner);
    PyGILState_Release(g);
  }
  free(m);
}

void *wf_iface_tensor(void *data, int32_t device_type, int32_t device_id, int32_t ndim,
                      const int64_t *shape, const int64_t *strides, int code, int bits,
                      uint64_t flags, void *owner) {
  if (ndim < 0 || ndim > 64) return NULL;
  size_t n = (size_t)ndim;
  DLManagedTensorVersioned *m = calloc(1, sizeof *m + 2 * n * sizeof(int64_t));
  if (!m) return NULL;
  int64_t *sh = (int64_t *)(m + 1), *st = sh + n;
  if (n) memcpy(sh, shape, n * sizeof *sh);
  m->version.major = WF_DLPACK_MAJOR;
  m->version.minor = WF_DLPACK_MINOR;
  m->deleter = iface_deleter;
  m->flags = flags;
  m->dl_tensor.data = data;
  m->dl_tensor.device.device_type = device_type;
  m->dl_tensor.device.device_id = device_id;
  m->dl_tensor.ndim = ndim;
  m->dl_tensor.dtype.code = (uint8_t)code;
  m->dl_tensor.dtype.bits = (uint8_t)bits;
  m->dl_tensor.dtype.lanes = 1;
  m->dl_tensor.shape = sh;
  if (strides) {
    if (n) memcpy(st, strides, n * sizeof *st);
    m->dl_tensor.strides = st;
  }
  if (owner && WF_PY_READY()) {
    Py_IncRef(owner);
    m->manager_ctx = owner;
  }
  return m;
}
