/*
** capsule.c -- the DLPack capsule names and the C capsule destructor of the
** Python package. The destructor is C so that it can run at interpreter
** shutdown, when a Python-level callback would crash; it reaches Python's C
** API through the weak symbols of pyc.h (libweft does not link Python).
*/
#include <string.h>

#include "interop/interop.h"
#include "interop/pyc.h"

static const char *const capsule_names[] = {"dltensor", "dltensor_versioned", "used_dltensor",
                                            "used_dltensor_versioned"};

const char *wf_dlpack_capsule_name(int which) {
  return (which >= 0 && which < 4) ? capsule_names[which] : NULL;
}

/* Runs when a capsule made by weft dies: the tensor is deleted only if no
** consumer took it (a consumer renames the capsule "used_..."). */
void wf_dlpack_capsule_destructor(void *capsule) {
  if (!WF_PY_READY()) return;
  pyobj *c = capsule;
  for (int kind = 0; kind < 2; kind++) {
    if (PyCapsule_IsValid(c, capsule_names[kind])) {
      wf_dlpack_delete(PyCapsule_GetPointer(c, capsule_names[kind]), kind);
      return;
    }
  }
}
