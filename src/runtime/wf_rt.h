/*
** wf_rt.h -- the runtime's C ABI, reached from Lua through the LuaJIT FFI.
**
** Takes: the kernel ABI (ir/abi.h), CPU kernels as function pointers and
** CUDA images from the backends. Gives: the runtime object, buffers and
** arrays, devices (device_cpu.c, device_cuda.c), launches (wf_launch.h).
**
** lua/weft/cdef.lua declares exactly the structs and functions marked
** "FFI" below; keep the two in step (WF_ABI_VERSION guards a mismatch).
**
** Rules for FFI functions: they return a status (0 = ok, else a WEFT_ERR*
** code) and leave a message in the runtime (wf_rt_errmsg); they never raise
** Lua errors and never longjmp.
**
** Memory ownership:
**
**   wf_buffer   refcounted block of device memory (atomic count). Arrays
**               created by weft own one reference; DLPack exports take
**               another. The last release frees through buf->release, which
**               does not need the runtime, so an export outlives weft_close.
**   wf_array    the array header that Lua holds as cdata (ffi.gc releases
**               its buffer reference). Kernels receive a pointer to it.
**
**     wf_array  +--------------------------------------------+
**               | data -> first element (inside buf->ptr)    |
**               | shape[4], strides[4] (bytes), ndim, size   |
**               | dtype (Lua type registry id), device, flags|
**               | buf -> wf_buffer (NULL: borrowed memory)   |
**               +--------------------------------------------+
*/
#ifndef WF_RT_H
#define WF_RT_H

#include <stddef.h>
#include <stdint.h>

#include "ir/abi.h"
#include "util/util.h"
#include "weft.h"

#define WF_FFI WEFT_API

#define WF_ALIGN 64        /* host allocations are 64-byte aligned */
#define WF_DEVICE_CPU (-1) /* device index of the host; n >= 0 is cuda:n */
#define WF_MSGSIZE 2048

/* array flags */
#define WF_ARR_REQUIRES_GRAD 1
#define WF_ARR_BORROWED 2 /* memory owned by someone else (opts.copy = false) */
#define WF_ARR_READONLY 4
#define WF_ARR_VIEW 8 /* a view into another array's buffer */

#define WF_BUF_PINNED 1 /* page-locked host memory (cuMemAllocHost) */

struct wf_buffer {
  int64_t refcount; /* touched with __atomic builtins only */
  void *ptr;
  size_t nbytes;
  int32_t device;
  int32_t flags;                 /* WF_BUF_PINNED */
  void (*release)(wf_buffer *b); /* frees ptr and b itself */
  void *ctx;                     /* owner data: DLPack tensor, CUDA context... */
};

/* wf_array, the header kernels read, is part of the launch ABI: ir/abi.h */

typedef struct wf_rt wf_rt;

/* An interrupt request (weft_interrupt). `pending` is set from any thread
** or a signal handler and read with relaxed loads by kernels at loop
** back-edges; the launch (or Lua hook) that stops for it clears it and
** bumps `taken`, which tells the C API the call ended by an interrupt.
** Touched with __atomic builtins only.
**
** It also carries the host's hooks around long CPU launches (wf_launch.h:
** an embedding interpreter lets its other threads run meanwhile), set by
** the owner of the weft_State; NULL = none. Loaded with __atomic too. */
typedef struct wf_intr {
  int32_t pending;
  uint32_t taken;
  void *(*unblock)(void);
  void (*reblock)(void *token);
} wf_intr;

/* ---- runtime (FFI) ---------------------------------------------------- */
WF_FFI int wf_abi_version(void);
WF_FFI wf_rt *wf_rt_new(void); /* NULL only when out of memory */
WF_FFI void wf_rt_free(wf_rt *rt);
WF_FFI const char *wf_rt_errmsg(wf_rt *rt);
WF_FFI int wf_rt_num_threads(wf_rt *rt);
WF_FFI int wf_rt_set_num_threads(wf_rt *rt, int n);
/* weft.config.cell_order: 0 keeps every CPU launch in tid order */
WF_FFI int wf_rt_set_cell_order(wf_rt *rt, int on);
/* Make the launches of rt poll *intr (a wf_intr owned by a weft_State,
** which outlives rt) instead of rt's own; NULL restores rt's own. */
WF_FFI void wf_rt_attach_intr(wf_rt *rt, void *intr);

/* ---- buffers (FFI) ---------------------------------------------------- */
/* New buffer of nbytes on device (64-byte aligned on the host), refcount 1,
** contents undefined. */
WF_FFI int wf_buffer_new(wf_rt *rt, int32_t device, size_t nbytes, wf_buffer **out);
/* Wrap foreign memory; release_fn (may be NULL) runs at the last release. */
WF_FFI int wf_buffer_wrap(wf_rt *rt, int32_t device, void *ptr, size_t nbytes,
                          void (*release_fn)(wf_buffer *), void *ctx, wf_buffer **out);
WF_FFI void wf_buffer_retain(wf_buffer *b);
WF_FFI void wf_buffer_release(wf_buffer *b); /* NULL is ignored */

/* ---- array helpers (FFI) ---------------------------------------------- */
/* Release the array's buffer reference (the ffi.gc finalizer); idempotent. */
WF_FFI void wf_array_release(wf_array *a);
/* Copy between arrays of equal shape and element size on any devices;
** handles strided layouts. */
WF_FFI int wf_array_copy(wf_rt *rt, wf_array *dst, const wf_array *src);
/* Fill every element with the elsize bytes at value. */
WF_FFI int wf_array_fill(wf_rt *rt, wf_array *dst, const void *value);
/* Is the array compact row-major? */
WF_FFI int wf_array_is_contiguous(const wf_array *a);

/* ---- devices (FFI) ---------------------------------------------------- */
WF_FFI int wf_device_count(wf_rt *rt); /* number of CUDA devices (0 without a driver) */
WF_FFI const char *wf_device_name(wf_rt *rt, int32_t device);

/* ---- internal --------------------------------------------------------- */
WF_INTERNAL int wf_rt_seterr(wf_rt *rt, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The interrupt request launches of rt poll (never NULL). */
WF_INTERNAL wf_intr *wf_rt_intr(wf_rt *rt);
/* If an interrupt is pending, take it (clear it, bump taken): 1, else 0. */
WF_INTERNAL int wf_intr_take(wf_intr *in);

#endif
