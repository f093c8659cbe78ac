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

typedef struct weft_State weft_State;
struct lua_State;

/*
** ======================================================================
** state
** ======================================================================
*/
WEFT_API weft_State *weft_open(void); /* NULL on failure */
WEFT_API void weft_close(weft_State *W);
WEFT_API struct lua_State *weft_lua(weft_State *W);
WEFT_API const char *weft_version(void);

/*
** ======================================================================
** running Lua code
** ======================================================================
*/
WEFT_API int weft_dostring(weft_State *W, const char *code); /* 0 = ok */
WEFT_API int weft_dofile(weft_State *W, const char *path);
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
WEFT_API int weft_wrap(weft_State *W, const char *global, void *data, const char *dtype,
                       int ndim, const int64_t *shape, const char *device);

/* Export the array in Lua global `global` as a DLPack tensor: a
** DLManagedTensor* (versioned = 0) or DLManagedTensorVersioned* (versioned =
** 1). The consumer calls its deleter once; the memory stays alive until then,
** even after weft_close. NULL on failure (see weft_errmsg). */
WEFT_API void *weft_export_dlpack(weft_State *W, const char *global, int versioned);

/* Bind Lua global `global` to the DLPack tensor `managed` without copying.
** Takes ownership: the deleter runs once, when the last user drops it (also
** when this call fails). */
WEFT_API int weft_import_dlpack(weft_State *W, const char *global, void *managed,
                                int versioned);

#ifdef __cplusplus
}
#endif
#endif
