/*
** weft.h -- the public C API of weft, an embeddable kernel runtime for Lua.
**
** A host opens a weft_State (which owns a LuaJIT state with the "weft" module
** preloaded), loads Lua scripts that declare kernels, shares its own buffers
** with them without copying, and exchanges arrays through DLPack.
**
** Every function that can fail returns a status (WEFT_OK on success) and
** leaves a message readable with weft_errmsg. Nothing here calls exit or
** abort, and nothing longjmps out of these functions.
*/
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define WEFT_API __declspec(dllexport)
#else
#define WEFT_API __attribute__((visibility("default")))
#endif

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION "0.1.0"
/* ABI number checked between the Lua layer and the library at load. */
#define WEFT_ABI_VERSION 1

/* status codes */
#define WEFT_OK 0
#define WEFT_ERRRUN 1    /* a Lua runtime error */
#define WEFT_ERRSYNTAX 2 /* a Lua syntax error */
#define WEFT_ERRMEM 3    /* out of memory */
#define WEFT_ERRFILE 4   /* cannot open or read a file */
#define WEFT_ERRARG 5    /* a bad argument to a weft_* function */
#define WEFT_ERRDEVICE 6 /* a device is missing or failed */
#define WEFT_ERRINTR 7   /* stopped by weft_interrupt */

typedef struct weft_State weft_State;
struct lua_State;

/*
** ======================================================================
** state
** ======================================================================
*/
WEFT_API weft_State *weft_open(void); /* NULL on failure */
WEFT_API void weft_close(weft_State *W);

/* Options of weft_open_ex: zero the struct, then set what you need.
** (sandbox_exit keeps scripts from ending the host by accident; it is no
** security boundary: the FFI reaches all of C.) */
typedef struct weft_Options {
  int sandbox_exit;    /* nonzero: os.exit raises "os.exit is disabled by the host" */
  size_t memory_limit; /* bytes the Lua heap may hold, 0 = no limit (beyond: WEFT_ERRMEM) */
  char *errbuf;        /* if set: why weft_open_ex returned NULL (NUL-terminated), */
  size_t errbuf_size;  /* ... in at most errbuf_size bytes; "" on success */
} weft_Options;
/* weft_open with options (NULL = the defaults of weft_open). On failure it
** returns NULL, with the reason in opts->errbuf when that is set, else
** printed to stderr (weft_open prints it). */
WEFT_API weft_State *weft_open_ex(const weft_Options *opts);

/* Stop what runs on W: CPU kernels leave at their next loop back-edge (or
** chunk), Lua code at its next instruction (a debug hook, as lua.c does),
** and the call returns WEFT_ERRINTR ("interrupted" at the launch or the
** Lua line). Safe from a signal handler or another thread. A request made
** while nothing runs stops the next call. Running CUDA kernels finish;
** the script stops after them. Loops LuaJIT has compiled to machine code
** do not see the hook. */
WEFT_API void weft_interrupt(weft_State *W);
WEFT_API struct lua_State *weft_lua(weft_State *W);
WEFT_API const char *weft_version(void);

/*
** ======================================================================
** running Lua code
** ======================================================================
*/
WEFT_API int weft_dostring(weft_State *W, const char *code); /* 0 = ok */
WEFT_API int weft_dofile(weft_State *W, const char *path);
/* Run len bytes of Lua text under a chunk name ("=level1/ai" as in
** luaL_loadbuffer; NULL = "=buffer"); the text is kept for the kernels
** it defines. */
WEFT_API int weft_dobuffer(weft_State *W, const char *buf, size_t len, const char *chunkname);
/* Keep the text of a chunk the host loads itself (luaL_loadbuffer on
** weft_lua(W)) so that its kernels compile: kernels are compiled from their
** Lua source, which a chunk loaded from a buffer does not carry. Register
** before the kernels are declared or launched; the same name again
** replaces the text for kernels declared after. */
WEFT_API int weft_register_source(weft_State *W, const char *chunkname, const char *text,
                                  size_t len);
/* Call the function below nargs arguments on weft_lua(W)'s stack (as
** lua_pcall), with nres results (LUA_MULTRET = -1: all) left there on
** success; on failure nothing is left and the message, with a traceback
** of the caller's frames (not weft's own), is in weft_errmsg. */
WEFT_API int weft_pcall(weft_State *W, int nargs, int nres);
/* Compile the kernel at a global path now, for launches of ndim (1-4)
** dimensions on device ("cpu" or NULL, "cuda:N"), so the first launch does
** not wait for the compiler (k:compile in Lua). Generic parameters need
** their types: declare them, or compile with k:compile{ types = ... }. */
WEFT_API int weft_compile(weft_State *W, const char *kernel, int ndim, const char *device);
/* The message of the last failed call on W ("" if none). Valid until the
** next call on W. */
WEFT_API const char *weft_errmsg(weft_State *W);

/*
** ======================================================================
** arrays shared with the host
** ======================================================================
*/
/* Bind the Lua global `global` to an array viewing `data` without copying.
** dtype is a weft type name ("float32", "vec3", ...); shape has ndim (1-4)
** entries, row-major, compact. The memory must stay valid while Lua can
** reach the array (until the global is cleared and collected, or W closes). */
WEFT_API int weft_wrap(weft_State *W, const char *global, void *data, const char *dtype, int ndim,
                       const int64_t *shape, const char *device);

/* Export the array in Lua global `global` as a DLPack tensor: a
** DLManagedTensor* (versioned = 0) or DLManagedTensorVersioned* (versioned =
** 1). The consumer calls its deleter once; the memory stays alive until then,
** even after weft_close. NULL on failure (see weft_errmsg). */
WEFT_API void *weft_export_dlpack(weft_State *W, const char *global, int versioned);

/* Bind Lua global `global` to the DLPack tensor `managed` without copying.
** Takes ownership: the deleter runs once, when the last user drops it (also
** when this call fails). */
WEFT_API int weft_import_dlpack(weft_State *W, const char *global, void *managed, int versioned);

/*
** ======================================================================
** values, calls and launches from the host (interop, src/interop/capi.c)
** ======================================================================
** A weft_Arg is a tagged value passed to or returned from Lua without any
** Lua glue in the host. Fill only the fields of its type; zero the rest.
**
**   type                      in  out  fields
**   WEFT_ARG_NIL              x   x    -
**   WEFT_ARG_BOOL             x   x    i (0 / 1)
**   WEFT_ARG_INT              x   x    i (out: int64 cdata; d too)
**   WEFT_ARG_FLOAT            x        d, rounded to float32
**   WEFT_ARG_DOUBLE           x   x    d (every Lua number comes out so)
**   WEFT_ARG_STRING           x   x    s (out: valid until the next call on W)
**   WEFT_ARG_GLOBAL           x        s: a global path ("pos", "sim.step")
**   WEFT_ARG_REF              x   x    i: a reference (out: any other value;
**                                      s its type name); drop with weft_unref
**   WEFT_ARG_ARRAY            x   x    an array held by reference i; out also
**                                      p = data, s = dtype name, ndim, shape,
**                                      strides (bytes), device, flags, d =
**                                      bytes per element
**   WEFT_ARG_DATA             x        host memory wrapped without copying:
**                                      p, s = dtype name, ndim, shape,
**                                      strides (bytes; all 0 = compact),
**                                      device (-1 = cpu, n = cuda:n)
**   WEFT_ARG_DLPACK           x        p: a DLManagedTensor* (ownership
**   WEFT_ARG_DLPACK_VERSIONED x        passes, even on failure); s: optional
**                                      element type ("vec3": trailing dims)
*/
#define WEFT_ARG_NIL 0
#define WEFT_ARG_BOOL 1
#define WEFT_ARG_INT 2
#define WEFT_ARG_FLOAT 3
#define WEFT_ARG_DOUBLE 4
#define WEFT_ARG_STRING 5
#define WEFT_ARG_GLOBAL 6
#define WEFT_ARG_REF 7
#define WEFT_ARG_DATA 8
#define WEFT_ARG_DLPACK 9
#define WEFT_ARG_DLPACK_VERSIONED 10
#define WEFT_ARG_ARRAY 11

/* weft_Arg.flags of arrays */
#define WEFT_ARRAY_REQUIRES_GRAD 1
#define WEFT_ARRAY_READONLY 4

typedef struct weft_Arg {
  int32_t type;
  int32_t ndim;
  int32_t flags;
  int32_t device;
  int64_t i;
  double d;
  const char *s;
  void *p;
  int64_t shape[4];
  int64_t strides[4];
  void *handle; /* ARRAY out: the array's header (for language bindings) */
} weft_Arg;

/* Read the value at a global path into *out. */
WEFT_API int weft_get(weft_State *W, const char *global, weft_Arg *out);
/* Assign a value to a global path (a DLPack value is imported). */
WEFT_API int weft_set(weft_State *W, const char *global, const weft_Arg *value);
/* Drop a reference returned in a WEFT_ARG_REF / WEFT_ARG_ARRAY result. */
WEFT_API void weft_unref(weft_State *W, int64_t ref);
/* Call the Lua function at a global path; up to nres results go to res
** (missing ones are WEFT_ARG_NIL). */
WEFT_API int weft_call(weft_State *W, const char *func, int nargs, const weft_Arg *args, int nres,
                       weft_Arg *res);
/* Launch the kernel at a global path over a grid of ndim (1-4) dimensions,
** with the kernel's parameters in order (weft.launch(k, dims, args)). */
WEFT_API int weft_launch(weft_State *W, const char *kernel, int ndim, const int64_t *dims,
                         int nargs, const weft_Arg *args);
/* The same with inputs and outputs apart (what the tape records). */
WEFT_API int weft_launch_io(weft_State *W, const char *kernel, int ndim, const int64_t *dims,
                            int nin, const weft_Arg *inputs, int nout, const weft_Arg *outputs);
/* Export an array value (WEFT_ARG_GLOBAL, _REF or _ARRAY) as DLPack like
** weft_export_dlpack; copy = 1 exports a fresh copy (flag IS_COPIED). */
WEFT_API void *weft_export_value(weft_State *W, const weft_Arg *value, int versioned, int copy);

#ifdef __cplusplus
}
#endif
#endif
