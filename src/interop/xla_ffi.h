/*
** xla_ffi.h -- the part of XLA's FFI C ABI (xla/ffi/api/c_api.h, API
** version 0.x, shipped with jaxlib) that weft's JAX targets use, declared
** here as was done for DLPack: libweft builds without jaxlib's headers.
**
** A handler is `wf_xla_error *h(wf_xla_frame *)`. XLA calls it once at
** registration with a metadata extension in the frame (the handler answers
** the API version it was built for), then for every execution. Every struct
** starts with its size, which grows when XLA adds fields at the end: a
** caller's struct must be at least as large as the fields we read
** (wf_xla_check_frame). The layouts below are checked against the sizes
** c_api.h computes for x86-64 and aarch64 (LP64).
**
**   frame   +0  struct_size  +8 extension_start  +16 api  +24 ctx
**           +32 stage        +40 args {size, ext, n, types, ptrs}
**           +80 rets {...}   +120 attrs {size, ext, n, types, names, ptrs}
**           +168 future
*/
#ifndef WF_XLA_FFI_H
#define WF_XLA_FFI_H

#include <stddef.h>
#include <stdint.h>

#include "weft.h"

#define WF_XLA_API_MAJOR 0
#define WF_XLA_API_MINOR 1 /* what these handlers need and report */

typedef struct wf_xla_ext {
  size_t struct_size;
  int32_t type; /* 1: metadata */
  struct wf_xla_ext *next;
} wf_xla_ext;
#define WF_XLA_EXT_METADATA 1

typedef struct wf_xla_version {
  size_t struct_size;
  wf_xla_ext *extension_start;
  int major, minor;
} wf_xla_version;

typedef struct wf_xla_error wf_xla_error; /* opaque, made by the API */

typedef struct wf_xla_error_args {
  size_t struct_size;
  wf_xla_ext *extension_start;
  const char *message;
  int32_t errc; /* absl status code */
} wf_xla_error_args;
#define WF_XLA_INVALID_ARGUMENT 3
#define WF_XLA_FAILED_PRECONDITION 9
#define WF_XLA_UNIMPLEMENTED 12
#define WF_XLA_INTERNAL 13

/* XLA element types (xla::PrimitiveType) that weft's scalars map to. */
enum {
  WF_XLA_PRED = 1,
  WF_XLA_S8 = 2,
  WF_XLA_S16 = 3,
  WF_XLA_S32 = 4,
  WF_XLA_S64 = 5,
  WF_XLA_U8 = 6,
  WF_XLA_U16 = 7,
  WF_XLA_U32 = 8,
  WF_XLA_U64 = 9,
  WF_XLA_F16 = 10,
  WF_XLA_F32 = 11,
  WF_XLA_F64 = 12
};

typedef struct wf_xla_buffer {
  size_t struct_size;
  wf_xla_ext *extension_start;
  int32_t dtype;
  void *data;
  int64_t rank;
  int64_t *dims;
} wf_xla_buffer;

typedef struct wf_xla_span {
  const char *ptr;
  size_t len;
} wf_xla_span;

typedef struct wf_xla_scalar {
  int32_t dtype;
  void *value;
} wf_xla_scalar;

typedef struct wf_xla_array {
  int32_t dtype;
  size_t size;
  void *data;
} wf_xla_array;

enum {
  WF_XLA_ATTR_ARRAY = 1,
  WF_XLA_ATTR_DICT = 2,
  WF_XLA_ATTR_SCALAR = 3,
  WF_XLA_ATTR_STRING = 4
};

typedef struct wf_xla_list { /* XLA_FFI_Args and XLA_FFI_Rets */
  size_t struct_size;
  wf_xla_ext *extension_start;
  int64_t size;
  int32_t *types; /* 1: buffer */
  void **ptrs;    /* wf_xla_buffer * each */
} wf_xla_list;

typedef struct wf_xla_attrs {
  size_t struct_size;
  wf_xla_ext *extension_start;
  int64_t size;
  int32_t *types;
  wf_xla_span **names; /* sorted by name */
  void **ptrs;
} wf_xla_attrs;

typedef struct wf_xla_api wf_xla_api;

typedef struct wf_xla_frame {
  size_t struct_size;
  wf_xla_ext *extension_start;
  const wf_xla_api *api;
  void *ctx;
  int32_t stage; /* 3: execute */
  wf_xla_list args;
  wf_xla_list rets;
  wf_xla_attrs attrs;
  void *future;
} wf_xla_frame;

typedef struct wf_xla_stream_args {
  size_t struct_size;
  wf_xla_ext *extension_start;
  void *ctx;
  void *stream; /* out */
} wf_xla_stream_args;

/* XLA_FFI_DeviceOrdinal_Get's arguments (API 0.3 on). */
typedef struct wf_xla_device_args {
  size_t struct_size;
  wf_xla_ext *extension_start;
  void *ctx;
  int32_t device_ordinal; /* out */
} wf_xla_device_args;

/* XLA_FFI_Api up to the functions used (more follow in newer versions).
** stream_get gives the platform stream of the call (a CUstream on CUDA);
** device_ordinal_get, which API 0.3 added, the device it runs on. */
struct wf_xla_api {
  size_t struct_size;
  wf_xla_ext *extension_start;
  wf_xla_version api_version;
  const void *internal_api;
  wf_xla_error *(*error_create)(wf_xla_error_args *args);
  void *error_get_message;
  void *error_destroy;
  void *handler_register;
  wf_xla_error *(*stream_get)(wf_xla_stream_args *args);
  void *unused_[12]; /* types, execution context, state, memory, pool, futures, run id */
  wf_xla_error *(*device_ordinal_get)(wf_xla_device_args *args);
};

typedef struct wf_xla_metadata {
  size_t struct_size;
  wf_xla_version api_version;
  uint32_t traits;
  int64_t state_type_id;
} wf_xla_metadata;

typedef struct wf_xla_metadata_ext {
  wf_xla_ext base;
  wf_xla_metadata *metadata;
} wf_xla_metadata_ext;

/* The sizes c_api.h's XLA_FFI_STRUCT_SIZE gives (struct up to its last
** field) on LP64. */
_Static_assert(sizeof(wf_xla_ext) == 24 && sizeof(wf_xla_version) == 24, "c_api.h layout");
_Static_assert(offsetof(wf_xla_error_args, errc) == 24, "c_api.h layout");
_Static_assert(offsetof(wf_xla_buffer, data) == 24 && offsetof(wf_xla_buffer, dims) == 40,
               "c_api.h layout");
_Static_assert(sizeof(wf_xla_list) == 40 && sizeof(wf_xla_attrs) == 48, "c_api.h layout");
_Static_assert(offsetof(wf_xla_frame, args) == 40 && offsetof(wf_xla_frame, rets) == 80 &&
                   offsetof(wf_xla_frame, attrs) == 120 && offsetof(wf_xla_frame, future) == 168,
               "c_api.h layout");
_Static_assert(offsetof(wf_xla_api, error_create) == 48 && offsetof(wf_xla_api, stream_get) == 80 &&
                   offsetof(wf_xla_api, device_ordinal_get) == 184,
               "c_api.h layout");
_Static_assert(sizeof(wf_xla_stream_args) == 32 &&
                   offsetof(wf_xla_device_args, device_ordinal) == 24,
               "c_api.h layout");
_Static_assert(offsetof(wf_xla_metadata, traits) == 32 && sizeof(wf_xla_metadata_ext) == 32,
               "c_api.h layout");

/* What a frame must hold for a handler to read it: NULL if it does, else
** a message (the frame predates fields we read, or another major API). */
static inline const char *wf_xla_check_frame(const wf_xla_frame *f) {
  if (f->struct_size < offsetof(wf_xla_frame, attrs) + sizeof(wf_xla_attrs))
    return "weft: the XLA FFI call frame is older than API 0.1";
  const wf_xla_api *api = f->api;
  if (!api || api->api_version.major != WF_XLA_API_MAJOR)
    return "weft: XLA FFI API major version mismatch (weft was built for 0.x)";
  if (api->struct_size < offsetof(wf_xla_api, stream_get) + sizeof(void *))
    return "weft: the XLA FFI API table is older than API 0.1";
  return NULL;
}

/* ---- the Python side (xla_ffi.c) -------------------------------------- */
/* A tuple of builtin functions (a new reference) for python/weft/jax.py:
** see xla_ffi.c. NULL when Python is not in the process. */
WEFT_API void *wf_xla_functions(void);

#endif
