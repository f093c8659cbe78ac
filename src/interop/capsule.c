/*
** capsule.c -- PyCapsule helpers for the Python package. libweft does not
** link Python: the few CPython functions needed are looked up with dlsym in
** the running process at call time (they exist whenever a capsule does).
** The destructor is C so that it can run at interpreter shutdown, when a
** Python-level callback would crash.
*/
#include <dlfcn.h>
#include <string.h>

#include "interop/interop.h"

static const char *const capsule_names[] = {"dltensor", "dltensor_versioned", "used_dltensor",
                                            "used_dltensor_versioned"};

const char *wf_dlpack_capsule_name(int which) {
  return (which >= 0 && which < 4) ? capsule_names[which] : NULL;
}

typedef const char *(*getname_fn)(void *capsule);
typedef void *(*getpointer_fn)(void *capsule, const char *name);
typedef int (*setname_fn)(void *capsule, const char *name);

/* The capsule's name and which DLPack kind it is: 0 legacy, 1 versioned,
** -1 consumed, -2 anything else. */
static int capsule_kind(void *capsule, getname_fn getname) {
  const char *name = getname(capsule);
  if (!name) return -2;
  for (int k = 0; k < 4; k++)
    if (strcmp(name, capsule_names[k]) == 0) return k < 2 ? k : -1;
  return -2;
}

void wf_dlpack_capsule_destructor(void *capsule) {
  getname_fn getname = (getname_fn)dlsym(RTLD_DEFAULT, "PyCapsule_GetName");
  getpointer_fn getpointer = (getpointer_fn)dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer");
  if (!getname || !getpointer) return;
  int kind = capsule_kind(capsule, getname);
  if (kind < 0) return; /* consumed (renamed): the consumer owns the tensor */
  void *managed = getpointer(capsule, capsule_names[kind]);
  wf_dlpack_delete(managed, kind);
}

void *wf_dlpack_capsule_take(void *capsule, int *versioned) {
  getname_fn getname = (getname_fn)dlsym(RTLD_DEFAULT, "PyCapsule_GetName");
  getpointer_fn getpointer = (getpointer_fn)dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer");
  setname_fn setname = (setname_fn)dlsym(RTLD_DEFAULT, "PyCapsule_SetName");
  if (!getname || !getpointer || !setname) {
    *versioned = -3;
    return NULL;
  }
  int kind = capsule_kind(capsule, getname);
  *versioned = kind;
  if (kind < 0) return NULL;
  void *managed = getpointer(capsule, capsule_names[kind]);
  if (!managed || setname(capsule, capsule_names[kind + 2]) != 0) {
    *versioned = -2;
    return NULL;
  }
  return managed;
}
