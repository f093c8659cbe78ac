/*
** pyc.h -- the few functions of the Python C API that libweft calls from
** its Python fast paths (pyapi.c) and capsule destructor (capsule.c).
**
** libweft does not link Python and does not need Python.h to build. The
** functions are declared here as weak symbols: inside a Python process the
** dynamic linker binds them to the interpreter's own (exported by the python
** executable or libpython); anywhere else they stay NULL, and WF_PY_READY
** says so before anything calls them. Only the stable, exported C API is
** used (no struct layouts of Python objects are read).
*/
#ifndef WF_PYC_H
#define WF_PYC_H

#include <stddef.h>
#include <stdint.h>

typedef struct wf_pyobj pyobj; /* opaque: only pointers cross */
typedef ptrdiff_t pyssize;
typedef void (*pycapsule_dtor)(pyobj *capsule);

/* PyMethodDef: the layout every CPython 3 uses. */
typedef struct wf_pymethod {
  const char *name;
  void *meth;
  int flags;
  const char *doc;
} wf_pymethod;
#define WF_METH_FASTCALL 0x0080

struct wf_pytype; /* PyTypeObject, only its address is used */

#define WF_WEAK __attribute__((weak))

/* clang-format off */
extern pyobj *PyCapsule_New(void *ptr, const char *name, pycapsule_dtor d) WF_WEAK;
extern void *PyCapsule_GetPointer(pyobj *c, const char *name) WF_WEAK;
extern const char *PyCapsule_GetName(pyobj *c) WF_WEAK;
extern int PyCapsule_SetName(pyobj *c, const char *name) WF_WEAK;
extern int PyCapsule_IsValid(pyobj *c, const char *name) WF_WEAK;
extern pyobj *PyCFunction_NewEx(wf_pymethod *def, pyobj *self, pyobj *mod) WF_WEAK;
extern pyobj *PyLong_FromVoidPtr(void *p) WF_WEAK;
extern void *PyLong_AsVoidPtr(pyobj *o) WF_WEAK;
extern pyobj *PyLong_FromLongLong(long long v) WF_WEAK;
extern long long PyLong_AsLongLong(pyobj *o) WF_WEAK;
extern double PyFloat_AsDouble(pyobj *o) WF_WEAK;
extern pyobj *PyTuple_New(pyssize n) WF_WEAK;
extern int PyTuple_SetItem(pyobj *t, pyssize i, pyobj *v) WF_WEAK; /* steals v */
extern pyobj *PyTuple_GetItem(pyobj *t, pyssize i) WF_WEAK;      /* borrowed */
extern pyssize PyTuple_Size(pyobj *t) WF_WEAK;
extern pyssize PySequence_Size(pyobj *o) WF_WEAK;
extern pyobj *PySequence_GetItem(pyobj *o, pyssize i) WF_WEAK; /* new */
extern pyobj *PyObject_Type(pyobj *o) WF_WEAK;                 /* new */
extern pyobj *PyObject_GetAttr(pyobj *o, pyobj *name) WF_WEAK;
extern pyobj *PyObject_CallFunctionObjArgs(pyobj *f, ...) WF_WEAK;
extern pyobj *PyDict_GetItem(pyobj *d, pyobj *key) WF_WEAK; /* borrowed */
extern const char *PyUnicode_AsUTF8(pyobj *o) WF_WEAK;
extern pyobj *PyUnicode_InternFromString(const char *s) WF_WEAK;
extern pyobj *PyUnicode_FromString(const char *s) WF_WEAK;
extern void PyErr_SetString(pyobj *type, const char *msg) WF_WEAK;
extern pyobj *PyErr_Occurred(void) WF_WEAK;
extern void PyErr_Clear(void) WF_WEAK;
extern pyobj *PyErr_NoMemory(void) WF_WEAK;
extern void Py_IncRef(pyobj *o) WF_WEAK;
extern void Py_DecRef(pyobj *o) WF_WEAK;
typedef struct wf_pythreadstate wf_pythreadstate; /* PyThreadState, opaque */
extern int PyGILState_Check(void) WF_WEAK;
extern wf_pythreadstate *PyEval_SaveThread(void) WF_WEAK;
extern void PyEval_RestoreThread(wf_pythreadstate *t) WF_WEAK;
/* the XLA FFI frames and callbacks of src/interop/xla_ffi.c */
extern pyobj *PyList_New(pyssize n) WF_WEAK;
extern int PyList_SetItem(pyobj *l, pyssize i, pyobj *v) WF_WEAK; /* steals v */
extern pyobj *PyDict_New(void) WF_WEAK;
extern int PyDict_SetItem(pyobj *d, pyobj *key, pyobj *v) WF_WEAK;
extern pyobj *PyFloat_FromDouble(double v) WF_WEAK;
extern pyobj *PyUnicode_FromStringAndSize(const char *s, pyssize n) WF_WEAK;
extern pyobj *PyLong_FromUnsignedLongLong(unsigned long long v) WF_WEAK;

extern struct wf_pytype PyFloat_Type WF_WEAK;
extern struct wf_pytype PyLong_Type WF_WEAK;
extern struct wf_pytype PyCapsule_Type WF_WEAK;
extern struct wf_pytype PyTuple_Type WF_WEAK;
extern struct wf_pyobj _Py_NoneStruct WF_WEAK;
extern struct wf_pyobj _Py_TrueStruct WF_WEAK;
extern struct wf_pyobj _Py_FalseStruct WF_WEAK;
extern pyobj *PyExc_TypeError WF_WEAK;
extern pyobj *PyExc_ValueError WF_WEAK;
extern pyobj *PyExc_BufferError WF_WEAK;
extern pyobj *PyExc_RuntimeError WF_WEAK;
/* clang-format on */

/* Is the Python C API bound (are we inside a Python process)? One probe
** stands for all: they come from the same interpreter. */
#define WF_PY_READY() (&PyCapsule_IsValid != NULL && &Py_DecRef != NULL)

/* A tuple of builtin functions (a new reference) for the n method records
** m, which must live forever (CPython keeps pointers to them); NULL when
** Python is not in the process or on failure. In pyapi.c. */
__attribute__((visibility("hidden"))) void *wf_py_method_tuple(wf_pymethod *m, int n);

#endif
