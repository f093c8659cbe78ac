/*
** pyapi.c -- the Python package's fast paths: builtin functions written in
** C that python/weft calls directly (METH_FASTCALL), with no ctypes
** argument conversion per call and no Lua unless Lua is needed.
**
**   ctx_new(W, WeftError, Array, LuaArray, converters, fallback) -> ctx
**   ctx_free(ctx)
**   import_(ctx, capsule, desc, where) -> h     a C-owned array header
**   export(h, versioned, desc) -> capsule       DLPack view of header h
**   free(h)                                     release h's buffer now
**   info(h) -> (data, shape, strides, device, elsize, dtype id, flags)
**   flags(h) -> int
**   adopt(ctx, h) -> (ref, lua_hdr) | None        make h a Lua array
**   launch(ctx, rt, kernel, dims, inputs, outputs) -> status
**
** Arrays a Python program imports (weft.from_torch, from_numpy, ...) live as
** a C-owned wf_array header (malloc'd, holding one buffer reference whose
** release calls the producer's DLPack deleter) inside a PyCapsule whose C
** destructor frees it: no Lua object is made, and no Python finalizer runs.
** Only when Lua code must see the array by name (rt["x"] = a, rt.call) does
** adopt() make the Lua array, which takes its own buffer reference.
**
**   Python weft.Array --_h--> capsule -> wf_array (C-owned) --buf--> wf_buffer
**                                              --ctx--> DLManagedTensor
**                     --_ref-> registry -> weft_Array cdata (after adopt)
**
** A launch never needs a Lua array of its own: headers of C-owned arrays and
** of tensors passed directly are copied into scratch weft_Array cdata that
** the interop layer keeps per Lua state (launches are synchronous and keep
** no argument), and the tensors taken for the launch are deleted after it.
**
** Every function runs with the GIL held. Python code (converters) runs only
** before Lua is entered, so no other thread can enter the Lua state meanwhile.
** The header layouts and Lua type ids come from the runtime (wf_rt.h).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "interop/interop.h"
#include "interop/pyc.h"
#include "runtime/rt.h"
#include "interop/state.h"

#define SCRATCH_KEY "weft.interop.scratch" /* registry: scratch arrays */
#define MAXSTACKARGS 16

/* What the fast paths of one Runtime need besides its weft_State. */
typedef struct wf_pyctx {
  weft_State *W;
  wf_rt *rt;                 /* messages of imports */
  int32_t ids[WF_NSCALARS];  /* Lua type ids of the scalar types */
  pyobj *error;              /* weft.WeftError */
  pyobj *array_type;         /* weft.Array (C-owned headers) */
  pyobj *lua_array_type;     /* its subclass for arrays Lua holds */
  pyobj *converters;         /* dict: type -> f(x) -> DLPack capsule */
  pyobj *fallback;           /* f(x, rt, kernel, index, nin) -> capsule or value */
  pyobj *s_h, *s_ref, *s_rt; /* interned attribute names */
} wf_pyctx;

/* An element type as the Python package describes it (one tuple per type:
** id, name, scalar index, ntrail, t0, t1, DLPack code, bits). */
typedef struct pydesc {
  int32_t id; /* 0: none given */
  int scalar, ntrail, code, bits;
  int64_t trail[2];
  const char *name;
} pydesc;

/* ---- small helpers ------------------------------------------------------- */

static pyobj *none(void) {
  Py_IncRef(&_Py_NoneStruct);
  return &_Py_NoneStruct;
}

static pyobj *raise(pyobj *type, const char *msg) {
  PyErr_SetString(type, msg);
  return NULL;
}

static int check_nargs(pyssize n, pyssize want, const char *fn) {
  if (n == want) return 0;
  char msg[96];
  snprintf(msg, sizeof msg, "weft: %s takes %d arguments", fn, (int)want);
  PyErr_SetString(PyExc_TypeError, msg);
  return -1;
}

/* A pointer held in a Python int; -1 with an exception on a bad value. */
static int ptr_of(pyobj *o, void **p) {
  *p = PyLong_AsVoidPtr(o);
  return (!*p && PyErr_Occurred()) ? -1 : 0;
}

static int int_of(pyobj *o, int64_t *v) {
  *v = PyLong_AsLongLong(o);
  return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The context of an open runtime, or NULL with an exception. */
static wf_pyctx *ctx_of(pyobj *o) {
  void *p;
  if (ptr_of(o, &p) < 0) return NULL;
  if (!p) raise(PyExc_RuntimeError, "weft: the runtime is closed");
  return p;
}

#define HEADER_CAPSULE "weft.header"

/* A header: a C-owned one is held by a "weft.header" capsule, a Lua-owned
** one is an int (its address inside the Lua array). NULL with an exception. */
static wf_array *header_of(pyobj *o) {
  void *p;
  if (PyCapsule_IsValid(o, HEADER_CAPSULE)) return PyCapsule_GetPointer(o, HEADER_CAPSULE);
  if (ptr_of(o, &p) < 0) return NULL;
  if (!p) raise(PyExc_ValueError, "weft: the array has been released");
  return p;
}

/* The destructor of a header capsule: the C-owned header dies with the
** last Python reference to it, in C (no Python finalizer per array). */
static void header_dtor(pyobj *cap) {
  wf_array *h = PyCapsule_GetPointer(cap, HEADER_CAPSULE);
  if (!h) return;
  wf_array_release(h);
  free(h);
}

/* Raise WeftError "<where>: <message>", the message of a C call without its
** "weft: fn: " prefix. */
static pyobj *weft_error(wf_pyctx *c, const char *where, const char *msg) {
  if (strncmp(msg, "weft: ", 6) == 0) {
    const char *p = msg + 6;
    while ((*p >= 'a' && *p <= 'z') || *p == '_')
      p++;
    if (p[0] == ':' && p[1] == ' ') msg = p + 2;
  }
  char buf[WF_MSGSIZE + 128];
  snprintf(buf, sizeof buf, "%s: %s", where, msg);
  return raise(c->error, buf);
}

/* Read a dtype description tuple (or None: d->id = 0, no trailing dims). */
static int desc_of(pyobj *o, pydesc *d) {
  memset(d, 0, sizeof *d);
  if (o == &_Py_NoneStruct) return 0;
  if (PyTuple_Size(o) != 8) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "weft: bad dtype description");
    return -1;
  }
  int64_t v[8];
  for (int k = 0; k < 8; k++) {
    if (k == 1) continue;
    if (int_of(PyTuple_GetItem(o, k), &v[k]) < 0) return -1;
  }
  d->name = PyUnicode_AsUTF8(PyTuple_GetItem(o, 1));
  if (!d->name) return -1;
  d->id = (int32_t)v[0];
  d->scalar = (int)v[2];
  d->ntrail = (int)v[3];
  d->trail[0] = v[4];
  d->trail[1] = v[5];
  d->code = (int)v[6];
  d->bits = (int)v[7];
  if (d->ntrail < 0 || d->ntrail > 2 || d->scalar < 0 || d->scalar >= WF_NSCALARS) {
    PyErr_SetString(PyExc_ValueError, "weft: bad dtype description");
    return -1;
  }
  return 0;
}

/* Take the DLPack tensor out of a capsule (renaming it "used_...", so the
** caller owns the tensor). NULL with an exception if it is not a fresh
** DLPack capsule. */
static void *take_capsule(pyobj *cap, int *versioned, const char *where) {
  char msg[256];
  for (int kind = 0; kind < 2; kind++) {
    const char *name = wf_dlpack_capsule_name(kind);
    if (!PyCapsule_IsValid(cap, name)) continue;
    void *m = PyCapsule_GetPointer(cap, name);
    if (!m || PyCapsule_SetName(cap, wf_dlpack_capsule_name(kind + 2)) != 0) return NULL;
    *versioned = kind;
    return m;
  }
  int used = PyCapsule_IsValid(cap, wf_dlpack_capsule_name(2)) ||
             PyCapsule_IsValid(cap, wf_dlpack_capsule_name(3));
  snprintf(msg, sizeof msg, "%s: %s", where,
           used ? "the DLPack capsule was already consumed" : "not a DLPack capsule");
  return raise(PyExc_ValueError, msg);
}

/* ---- context --------------------------------------------------------------- */

typedef struct ctx_init {
  wf_pyctx *c;
} ctx_init;

/* Protected: load the interop layer and read the scalar type ids. */
static int do_ctx_init(lua_State *L) {
  ctx_init *o = (ctx_init *)lua_touserdata(L, 1);
  for (int k = 0; k < WF_NSCALARS; k++) {
    wf_interop_push_helper(L, "type_id");
    lua_pushstring(L, wf_dlpack_scalars[k]);
    lua_call(L, 1, 1);
    o->c->ids[k] = (int32_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return 0;
}

static void ctx_free(wf_pyctx *c) {
  pyobj *held[] = {c->error,    c->array_type, c->lua_array_type, c->converters,
                   c->fallback, c->s_h,        c->s_ref,          c->s_rt};
  for (size_t k = 0; k < sizeof held / sizeof held[0]; k++)
    if (held[k]) Py_DecRef(held[k]);
  wf_rt_free(c->rt);
  free(c);
}

/* Long CPU launches release the GIL (src/runtime/wf_launch.h): only on a thread
** that holds it. The Python package serializes the calls into one runtime
** (Runtime._lock), so no other thread enters its Lua state meanwhile. */
static void *py_unblock(void) {
  if (!WF_PY_READY() || !&PyGILState_Check || !&PyEval_SaveThread || !PyGILState_Check())
    return NULL;
  return PyEval_SaveThread();
}
static void py_reblock(void *token) {
  PyEval_RestoreThread(token);
}

/* ctx_new(W, WeftError, Array, LuaArray, converters, fallback) -> ctx */
static pyobj *py_ctx_new(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 6, "ctx_new") < 0) return NULL;
  void *W;
  if (ptr_of(a[0], &W) < 0) return NULL;
  if (!W) return raise(PyExc_ValueError, "weft: ctx_new: no runtime");
  wf_pyctx *c = calloc(1, sizeof *c);
  if (!c) return PyErr_NoMemory();
  c->W = W;
  c->rt = wf_rt_new();
  for (int k = 1; k < 6; k++)
    Py_IncRef(a[k]);
  c->error = a[1], c->array_type = a[2], c->lua_array_type = a[3];
  c->converters = a[4], c->fallback = a[5];
  c->s_h = PyUnicode_InternFromString("_h");
  c->s_ref = PyUnicode_InternFromString("_ref");
  c->s_rt = PyUnicode_InternFromString("_rt");
  if (!c->rt || !c->s_h || !c->s_ref || !c->s_rt) {
    ctx_free(c);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
  }
  ctx_init o = {c};
  lua_pushcfunction(c->W->L, do_ctx_init);
  lua_pushlightuserdata(c->W->L, &o);
  if (wf_state_pcall(c->W, 1, 0) != WEFT_OK) {
    PyErr_SetString(c->error, weft_errmsg(c->W));
    ctx_free(c);
    return NULL;
  }
  if (&PyEval_RestoreThread) { /* the hooks of this weft_State's launches */
    __atomic_store_n(&c->W->intr.reblock, py_reblock, __ATOMIC_RELEASE);
    __atomic_store_n(&c->W->intr.unblock, py_unblock, __ATOMIC_RELEASE);
  }
  pyobj *r = PyLong_FromVoidPtr(c);
  if (!r) ctx_free(c);
  return r;
}

/* ctx_free(ctx): before the runtime closes. */
static pyobj *py_ctx_free(pyobj *self, pyobj *const *a, pyssize n) {
  void *c;
  if (check_nargs(n, 1, "ctx_free") < 0 || ptr_of(a[0], &c) < 0) return NULL;
  if (c) ctx_free(c);
  return none();
}

/* ---- arrays ---------------------------------------------------------------- */

/* import_(ctx, capsule, desc, where) -> h: consume a DLPack capsule into a
** new C-owned header (no Lua), held by the "weft.header" capsule h. desc (or None) folds trailing
*dimensions
** into vector/matrix elements and must agree with the tensor's scalars. */
static pyobj *py_import(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 4, "import_") < 0) return NULL;
  wf_pyctx *c = ctx_of(a[0]);
  if (!c) return NULL;
  const char *where = PyUnicode_AsUTF8(a[3]);
  pydesc d;
  if (!where || desc_of(a[2], &d) < 0) return NULL;
  int versioned = 0;
  void *m = take_capsule(a[1], &versioned, where);
  if (!m) return NULL;
  wf_array h;
  int k;
  if (wf_dlpack_import_k(c->rt, m, versioned, d.ntrail, d.trail, &h, &k) != WEFT_OK)
    return weft_error(c, where, wf_rt_errmsg(c->rt)); /* the tensor is deleted */
  if (d.id && k != d.scalar) {
    char msg[256];
    snprintf(msg, sizeof msg, "the tensor holds %s values, %s needs %s", wf_dlpack_scalars[k],
             d.name, wf_dlpack_scalars[d.scalar]);
    wf_array_release(&h);
    return weft_error(c, where, msg);
  }
  h.dtype = d.id ? d.id : c->ids[k];
  wf_array *p = malloc(sizeof *p);
  if (!p) {
    wf_array_release(&h);
    return PyErr_NoMemory();
  }
  *p = h;
  pyobj *r = PyCapsule_New(p, HEADER_CAPSULE, header_dtor);
  if (!r) {
    wf_array_release(p);
    free(p);
  }
  return r;
}

static void capsule_dtor(pyobj *cap) {
  wf_dlpack_capsule_destructor(cap);
}

/* export(h, versioned, desc) -> a DLPack capsule viewing header h; the
** tensor holds a buffer reference, so it outlives the array and the
** runtime. */
static pyobj *py_export(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 3, "export") < 0) return NULL;
  wf_array *h = header_of(a[0]);
  int64_t versioned;
  pydesc d;
  if (!h || int_of(a[1], &versioned) < 0 || desc_of(a[2], &d) < 0) return NULL;
  wf_rt rt; /* for the message only */
  rt.msg[0] = 0;
  void *m = NULL;
  versioned = versioned != 0;
  if (wf_dlpack_export(&rt, h, (int)versioned, d.code, d.bits, d.ntrail, d.trail, 0, &m) != WEFT_OK)
    return raise(PyExc_BufferError, rt.msg);
  pyobj *cap = PyCapsule_New(m, wf_dlpack_capsule_name((int)versioned), capsule_dtor);
  if (!cap) wf_dlpack_delete(m, (int)versioned);
  return cap;
}

/* free(h): release the buffer reference of a C-owned header now (the
** capsule frees the header itself when it dies). */
static pyobj *py_free(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 1, "free") < 0) return NULL;
  if (!PyCapsule_IsValid(a[0], HEADER_CAPSULE))
    return raise(PyExc_TypeError, "weft: free takes a C-owned header");
  wf_array_release(PyCapsule_GetPointer(a[0], HEADER_CAPSULE));
  return none();
}

static pyobj *dims_tuple(int n, const int64_t *v) {
  pyobj *t = PyTuple_New(n);
  for (int k = 0; t && k < n; k++) {
    pyobj *x = PyLong_FromLongLong((long long)v[k]);
    if (!x || PyTuple_SetItem(t, k, x) != 0) {
      Py_DecRef(t);
      return NULL;
    }
  }
  return t;
}

/* info(h) -> (data, shape, strides, device, elsize, dtype id, flags) */
static pyobj *py_info(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 1, "info") < 0) return NULL;
  wf_array *h = header_of(a[0]);
  if (!h) return NULL;
  pyobj *items[7] = {PyLong_FromVoidPtr(h->data),     dims_tuple(h->ndim, h->shape),
                     dims_tuple(h->ndim, h->strides), PyLong_FromLongLong(h->device),
                     PyLong_FromLongLong(h->elsize),  PyLong_FromLongLong(h->dtype),
                     PyLong_FromLongLong(h->flags)};
  pyobj *t = PyTuple_New(7);
  for (int k = 0; k < 7; k++) {
    if (t && items[k]) {
      PyTuple_SetItem(t, k, items[k]);
    } else if (items[k]) {
      Py_DecRef(items[k]);
    } else if (t) {
      Py_DecRef(t);
      t = NULL;
    }
  }
  return t;
}

/* flags(h) -> the header's flags (WEFT_ARRAY_*). */
static pyobj *py_flags(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 1, "flags") < 0) return NULL;
  wf_array *h = header_of(a[0]);
  return h ? PyLong_FromLongLong(h->flags) : NULL;
}

typedef struct adopt_op {
  wf_array *h;
  const wf_array *lua_hdr;
  int ref;
} adopt_op;

/* Protected: interop.adopt(h) -> a Lua array sharing h's buffer. */
static int do_adopt(lua_State *L) {
  adopt_op *o = (adopt_op *)lua_touserdata(L, 1);
  wf_interop_push_helper(L, "adopt");
  lua_pushlightuserdata(L, o->h);
  lua_call(L, 1, 1);
  o->lua_hdr = (const wf_array *)lua_topointer(L, -1); /* a weft_Array's payload */
  o->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* adopt(ctx, h) -> (registry ref, Lua header) of a new Lua array sharing
** C-owned header h (which stays the caller's to free); None when Lua
** failed (the message is the runtime's). */
static pyobj *py_adopt(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 2, "adopt") < 0) return NULL;
  wf_pyctx *c = ctx_of(a[0]);
  wf_array *h = c ? header_of(a[1]) : NULL;
  if (!h) return NULL;
  adopt_op o = {h, NULL, 0};
  lua_pushcfunction(c->W->L, do_adopt);
  lua_pushlightuserdata(c->W->L, &o);
  if (wf_state_pcall(c->W, 1, 0) != WEFT_OK) return none();
  pyobj *t = PyTuple_New(2), *r = PyLong_FromLongLong(o.ref),
        *p = PyLong_FromVoidPtr((void *)o.lua_hdr);
  if (t && r && p) {
    PyTuple_SetItem(t, 0, r);
    PyTuple_SetItem(t, 1, p);
    return t;
  }
  if (t) Py_DecRef(t);
  if (r) Py_DecRef(r);
  if (p) Py_DecRef(p);
  luaL_unref(c->W->L, LUA_REGISTRYINDEX, o.ref);
  return NULL;
}

/* ---- launch ------------------------------------------------------------------ */

enum { ARG_NIL, ARG_BOOL, ARG_NUM, ARG_REF, ARG_HDR };

/* One launch argument, converted from Python before Lua runs. */
typedef struct pyarg {
  int kind;
  double num;     /* ARG_BOOL (0/1), ARG_NUM */
  int64_t ref;    /* ARG_REF: registry reference */
  wf_array h;     /* ARG_HDR: the header the kernel sees (borrowed memory) */
  wf_array *slot; /* the scratch array h was copied into */
  void *managed;  /* a DLPack tensor taken for this launch, deleted after */
  int versioned;
} pyarg;

typedef struct launch_op {
  wf_pyctx *c;
  const char *kernel;
  int ndim, nin, n;
  int64_t dims[4];
  pyarg *args;
} launch_op;

/* An argument's header from a DLPack capsule: the tensor is taken for the
** time of the launch. */
static int arg_from_capsule(wf_pyctx *c, pyobj *cap, pyarg *a, const char *kernel) {
  char where[160];
  snprintf(where, sizeof where, "weft.Runtime.launch('%s')", kernel);
  int versioned = 0;
  void *m = take_capsule(cap, &versioned, where);
  if (!m) return -1;
  int k;
  if (wf_dlpack_header(c->rt, m, versioned, 0, NULL, &a->h, &k) != WEFT_OK) {
    weft_error(c, where, wf_rt_errmsg(c->rt));
    wf_dlpack_delete(m, versioned);
    return -1;
  }
  a->h.dtype = c->ids[k];
  a->h.flags |= WF_ARR_BORROWED;
  a->managed = m;
  a->versioned = versioned;
  a->kind = ARG_HDR;
  return 0;
}

/* A weft.Array of this runtime: by reference when Lua has it, else its
** C-owned header. 1 when it belongs to another runtime. */
static int arg_from_array(wf_pyctx *c, pyobj *rtobj, pyobj *o, pyarg *a) {
  pyobj *owner = PyObject_GetAttr(o, c->s_rt);
  if (!owner) return -1;
  Py_DecRef(owner); /* the array keeps it alive */
  pyobj *ref = PyObject_GetAttr(o, c->s_ref);
  if (!ref) return -1;
  int st = int_of(ref, &a->ref);
  Py_DecRef(ref);
  if (st < 0) return -1;
  if (a->ref > 0) {
    if (owner != rtobj) return 1;
    a->kind = ARG_REF;
    return 0;
  }
  pyobj *hp = PyObject_GetAttr(o, c->s_h);
  if (!hp) return -1;
  wf_array *h = header_of(hp);
  Py_DecRef(hp);
  if (!h) return -1;
  a->h = *h;
  a->h.buf = NULL; /* borrowed for the launch: the scratch array owns nothing */
  a->kind = ARG_HDR;
  return 0;
}

/* Convert argument `index` (o) of a launch. Python runs here (converters),
** never once Lua has been entered. */
static int convert_arg(wf_pyctx *c, pyobj *rtobj, pyobj *o, pyarg *a, pyobj *kernel, int index,
                       int nin, int depth) {
  memset(a, 0, sizeof *a);
  if (o == &_Py_NoneStruct) return 0;
  if (o == &_Py_TrueStruct || o == &_Py_FalseStruct) {
    a->kind = ARG_BOOL, a->num = o == &_Py_TrueStruct;
    return 0;
  }
  pyobj *type = PyObject_Type(o);
  if (!type) return -1;
  Py_DecRef(type); /* o keeps its type alive */
  if (type == (pyobj *)&PyFloat_Type) {
    a->num = PyFloat_AsDouble(o);
    a->kind = ARG_NUM;
    return PyErr_Occurred() ? -1 : 0;
  }
  if (type == (pyobj *)&PyLong_Type) {
    int64_t v;
    if (int_of(o, &v) < 0) return -1;
    a->kind = ARG_NUM, a->num = (double)v;
    return 0;
  }
  if (type == c->array_type || type == c->lua_array_type) {
    int st = arg_from_array(c, rtobj, o, a);
    if (st <= 0) return st;
  } else if (type == (pyobj *)&PyTuple_Type && depth > 0 && PyTuple_Size(o) == 1) {
    a->kind = ARG_REF; /* a LuaRef, as the fallback spells it */
    return int_of(PyTuple_GetItem(o, 0), &a->ref);
  }
  const char *kname = PyUnicode_AsUTF8(kernel);
  if (!kname) return -1;
  if (type == (pyobj *)&PyCapsule_Type) return arg_from_capsule(c, o, a, kname);
  /* a registered converter (torch.Tensor -> to_dlpack ...), else the
  ** fallback, which knows every protocol and writes the messages */
  pyobj *cap = NULL, *conv = depth == 0 ? PyDict_GetItem(c->converters, type) : NULL;
  if (conv) {
    cap = PyObject_CallFunctionObjArgs(conv, o, NULL);
    if (!cap) PyErr_Clear();
  }
  if (!cap) {
    if (depth > 0) {
      PyErr_SetString(PyExc_TypeError, "weft: the launch fallback returned a bad value");
      return -1;
    }
    pyobj *i = PyLong_FromLongLong(index), *ni = PyLong_FromLongLong(nin);
    if (i && ni) cap = PyObject_CallFunctionObjArgs(c->fallback, o, rtobj, kernel, i, ni, NULL);
    if (i) Py_DecRef(i);
    if (ni) Py_DecRef(ni);
    if (!cap) return -1;
    if (!PyCapsule_IsValid(cap, wf_dlpack_capsule_name(0)) &&
        !PyCapsule_IsValid(cap, wf_dlpack_capsule_name(1))) {
      int st = convert_arg(c, rtobj, cap, a, kernel, index, nin, depth + 1);
      Py_DecRef(cap);
      return st;
    }
  }
  int st = arg_from_capsule(c, cap, a, kname);
  Py_DecRef(cap); /* renamed: its destructor leaves the tensor to us */
  return st;
}

/* Protected: interop.launch(kernel, dims, nin, args...) with the scratch
** arrays filled from the headers. */
static int do_launch(lua_State *L) {
  launch_op *o = (launch_op *)lua_touserdata(L, 1);
  luaL_checkstack(L, o->n + 8, "weft: too many arguments");
  lua_getfield(L, LUA_REGISTRYINDEX, SCRATCH_KEY);
  int scratch = lua_gettop(L);
  if (!lua_istable(L, scratch)) luaL_error(L, "weft: the interop layer is not loaded");
  wf_interop_push_helper(L, "launch");
  wf_interop_get_path(L, o->kernel);
  if (lua_isnil(L, -1)) luaL_error(L, "weft_launch: no kernel named '%s'", o->kernel);
  if (o->ndim == 1) {
    lua_pushnumber(L, (lua_Number)o->dims[0]);
  } else {
    lua_createtable(L, o->ndim, 0);
    for (int k = 0; k < o->ndim; k++) {
      lua_pushnumber(L, (lua_Number)o->dims[k]);
      lua_rawseti(L, -2, k + 1);
    }
  }
  lua_pushinteger(L, o->nin);
  int nscratch = 0;
  for (int k = 0; k < o->n; k++) {
    pyarg *a = &o->args[k];
    switch (a->kind) {
    case ARG_NIL: lua_pushnil(L); break;
    case ARG_BOOL: lua_pushboolean(L, a->num != 0); break;
    case ARG_NUM: lua_pushnumber(L, a->num); break;
    case ARG_REF: lua_rawgeti(L, LUA_REGISTRYINDEX, (int)a->ref); break;
    case ARG_HDR:
      lua_rawgeti(L, scratch, ++nscratch);
      if (lua_isnil(L, -1)) { /* a new scratch array, kept by the layer */
        lua_pop(L, 1);
        wf_interop_push_helper(L, "scratch");
        lua_pushinteger(L, nscratch);
        lua_call(L, 1, 1);
      }
      a->slot = (wf_array *)lua_topointer(L, -1);
      *a->slot = a->h;
      break;
    }
  }
  lua_call(L, 3 + o->n, 0);
  return 0;
}

/* Undo what converting args[0 .. n-1] did: clear the scratch headers and
** delete the tensors taken for the launch. */
static void release_args(pyarg *args, int n) {
  for (int k = 0; k < n; k++) {
    if (args[k].slot) memset(args[k].slot, 0, sizeof *args[k].slot);
    if (args[k].managed) wf_dlpack_delete(args[k].managed, args[k].versioned);
  }
}

static int read_dims(pyobj *o, launch_op *op) {
  pyobj *type = PyObject_Type(o);
  if (!type) return -1;
  Py_DecRef(type);
  if (type == (pyobj *)&PyLong_Type) {
    op->ndim = 1;
    return int_of(o, &op->dims[0]);
  }
  pyssize n = PySequence_Size(o);
  if (n < 1 || n > 4) {
    if (!PyErr_Occurred() || n >= 0) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError,
                      "weft.Runtime.launch: dim must be an int or a sequence of 1 to 4 ints");
    }
    return -1;
  }
  op->ndim = (int)n;
  for (pyssize k = 0; k < n; k++) {
    pyobj *x = PySequence_GetItem(o, k);
    int st = x ? int_of(x, &op->dims[k]) : -1;
    if (x) Py_DecRef(x);
    if (st < 0) return -1;
  }
  return 0;
}

/* The length of inputs/outputs (a sequence, or None for none); -1 with an
** exception. */
static pyssize seq_len(pyobj *o) {
  if (o == &_Py_NoneStruct) return 0;
  return PySequence_Size(o);
}

/* launch(ctx, rt, kernel, dims, inputs, outputs) -> status (0 = ok; else
** the runtime's message says why) */
static pyobj *py_launch(pyobj *self, pyobj *const *a, pyssize n) {
  if (check_nargs(n, 6, "launch") < 0) return NULL;
  wf_pyctx *c = ctx_of(a[0]);
  if (!c) return NULL;
  launch_op op;
  memset(&op, 0, sizeof op);
  op.c = c;
  op.kernel = PyUnicode_AsUTF8(a[2]);
  if (!op.kernel || read_dims(a[3], &op) < 0) return NULL;
  pyssize nin = seq_len(a[4]), nout = seq_len(a[5]);
  if (nin < 0 || nout < 0) return NULL;
  op.nin = (int)nin;
  op.n = (int)(nin + nout);
  /* zeroed: release_args also sees the argument whose conversion failed */
  pyarg stack[MAXSTACKARGS];
  op.args = op.n <= MAXSTACKARGS ? stack : calloc((size_t)op.n, sizeof(pyarg));
  if (!op.args) return PyErr_NoMemory();
  if (op.args == stack) memset(stack, 0, sizeof stack);
  int done = 0, st = 0;
  for (; done < op.n && st == 0; done++) {
    int out = done >= op.nin;
    pyobj *x = PySequence_GetItem(a[4 + out], out ? done - op.nin : done);
    st = x ? convert_arg(c, a[1], x, &op.args[done], a[2], done, op.nin, 0) : -1;
    if (x) Py_DecRef(x); /* the sequence keeps it (and its memory) alive */
  }
  pyobj *res = NULL;
  if (st == 0) {
    lua_pushcfunction(c->W->L, do_launch);
    lua_pushlightuserdata(c->W->L, &op);
    res = PyLong_FromLongLong(wf_state_pcall(c->W, 1, 0));
  }
  release_args(op.args, done);
  if (op.args != stack) free(op.args);
  return res;
}

/* ---- the function table ------------------------------------------------------- */

/* CPython keeps a pointer to its method record for as long as the function
** lives; these are never written. */
static wf_pymethod methods[] = {
    {"ctx_new", (void *)py_ctx_new, WF_METH_FASTCALL, NULL},
    {"ctx_free", (void *)py_ctx_free, WF_METH_FASTCALL, NULL},
    {"import_", (void *)py_import, WF_METH_FASTCALL, NULL},
    {"export", (void *)py_export, WF_METH_FASTCALL, NULL},
    {"free", (void *)py_free, WF_METH_FASTCALL, NULL},
    {"info", (void *)py_info, WF_METH_FASTCALL, NULL},
    {"flags", (void *)py_flags, WF_METH_FASTCALL, NULL},
    {"adopt", (void *)py_adopt, WF_METH_FASTCALL, NULL},
    {"launch", (void *)py_launch, WF_METH_FASTCALL, NULL},
};

void *wf_py_method_tuple(wf_pymethod *m, int n) {
  if (!WF_PY_READY()) return NULL;
  pyobj *t = PyTuple_New(n);
  for (int k = 0; t && k < n; k++) {
    pyobj *f = PyCFunction_NewEx(&m[k], NULL, NULL);
    if (!f || PyTuple_SetItem(t, k, f) != 0) {
      Py_DecRef(t);
      t = NULL;
    }
  }
  return t;
}

void *wf_py_functions(void) {
  return wf_py_method_tuple(methods, (int)(sizeof methods / sizeof methods[0]));
}
