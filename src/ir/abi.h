/*
** abi.h -- the launch ABI: what a compiled kernel receives. The backends
** (src/cpu, src/cuda) generate code against it; the runtime (src/runtime)
** and the Lua layer (lua/weft/cdef.lua) build the values. It lives beside
** the IR, below both, so neither side includes the other's headers.
**
** Layouts come from the compiler: an emitter that needs a field's offset
** asks offsetof, and the _Static_asserts below lock what generated code and
** lua/weft/cdef.lua rely on.
**
** An array parameter is a pointer to its header:
**
**   wf_array  +0   void *data          first element
**             +8   int64_t shape[4]
**             +40  int64_t strides[4]  in bytes
**             +72  int64_t size        number of elements
**             +80  int32_t ndim, dtype, device, flags, elsize, pad_
**             +104 wf_buffer *buf      owner (NULL: borrowed memory)
**
** A CUDA kernel takes the first WF_ARR_KERNEL_BYTES (data, shape,
** strides) by value: struct wf_arr in src/cuda/prelude.cuh.
**
** A CPU kernel is one native function (src/runtime/wf_launch.h launches it)
**
**   void k(const void *args, int64_t begin, int64_t end, wf_launch_ctx *ctx);
**
** that runs the linear thread indices [begin, end) of a launch. The thread
** pool calls it once per chunk, from several threads at once.
**
** Thread indices. A launch has 1-4 dims d0..d3 (ctx->dims, unused = 1). The
** linear index t maps to the tids row-major, as in Warp:
**   1-D: i = t
**   2-D: i = t / d1,            j = t % d1
**   3-D: i = t / (d1*d2),       j = (t / d2) % d1,  k = t % d2
**   4-D: i = t / (d1*d2*d3) ... l = t % d3
** The kernel walks its chunk row by row (the last dimension innermost), so
** the per-thread loop it contains can be vectorized by LLVM.
**
** Arguments. `args` is a byte block (built by the Lua layer, layout from
** core.cpu_compile: offsets[] and size). Parameter i sits at offset[i]:
** each parameter gets a slot of max(8, size) bytes rounded up to 8, aligned
** to max(8, type align).
**   array param    the slot holds a `wf_array *`
**   bool           1 byte (0/1)           intN/uintN   N/8 bytes
**   float16        2 bytes (IEEE half)    float32/64   4/8 bytes
**   vector/matrix/quaternion/transform: the scalars in C layout, row-major
**                  (vec3f = 3 floats, 12 bytes; transform = p xyz, q xyzw)
**   struct         the C layout described by the type's field offsets
**   rng            uint32 state
**
** Aliasing. weft, like Warp, assumes that the arrays passed to one launch do
** not overlap in memory, unless the same array (the same header or the same
** data pointer) is passed twice. The kernel checks this at entry: distinct
** arrays with compact innermost strides run a variant whose data pointers
** are noalias (so loops vectorize); otherwise a general variant runs.
**
** Errors (bounds checks, TRAP). A failing thread sets ctx->error from 0 to 1
** with a compare-and-swap (the first failure wins), writes ctx->msg
** ("chunk:line: index 7 out of bounds for axis 0 with size 5 in array 'x'
** of kernel 'k'") and returns; other threads stop at their next thread
** index (debug mode) or chunk. The launch returns WEFT_ERRRUN with the
** message in the runtime.
**
**   wf_launch_ctx  +0   int64_t dims[4]
**                  +32  int32_t ndim
**                  +36  int32_t error        (atomic)
**                  +40  char msg[WF_LAUNCH_MSGSIZE]
**                  +552 int32_t serial       1: one thread runs the whole launch
**                  +556 int32_t priv         private accumulation: 0 undecided,
**                                            1 on, 2 off
**                  +560 int32_t lock         spinlock folding private copies
**                  +568 const int32_t *intr  the interrupt request
**                                            (wf_intr.pending), read with
**                                            relaxed loads at loop back-edges
**                  +576 const void *geom     the live geometry objects
**                                            (debug-mode id checks)
**
** Interrupts (weft_interrupt). A kernel that finds *intr set at a loop
** back-edge stops the launch (wf_launch_interrupted: error =
** WF_LAUNCH_INTERRUPTED, message "interrupted") and returns; the pool checks
** *intr before each chunk too, so loop-free kernels stop at chunk
** granularity. The launch then takes the request and returns WEFT_ERRINTR.
*/
#ifndef WF_ABI_H
#define WF_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define WF_MAXDIM 4

/* ---- arrays ------------------------------------------------------------ */
typedef struct wf_buffer wf_buffer; /* src/runtime/wf_rt.h */

typedef struct wf_array {
  void *data;
  int64_t shape[WF_MAXDIM];
  int64_t strides[WF_MAXDIM]; /* in bytes */
  int64_t size;               /* number of elements */
  int32_t ndim;
  int32_t dtype;  /* id in the Lua type registry (weft.types) */
  int32_t device; /* WF_DEVICE_CPU or a cuda ordinal */
  int32_t flags;
  int32_t elsize; /* bytes per element */
  int32_t pad_;
  wf_buffer *buf;
} wf_array;

/* The bytes of a header a CUDA kernel receives by value (data, shape,
** strides: struct wf_arr in src/cuda/prelude.cuh). */
#define WF_ARR_KERNEL_BYTES 72

_Static_assert(offsetof(wf_array, data) == 0, "generated code loads data at the header");
_Static_assert(offsetof(wf_array, shape) == 8 && offsetof(wf_array, strides) == 40,
               "the layout drawn above");
_Static_assert(sizeof(((wf_array *)0)->shape[0]) == 8 && sizeof(((wf_array *)0)->strides[0]) == 8,
               "generated code loads shape and strides as i64");
_Static_assert(offsetof(wf_array, strides) + sizeof(((wf_array *)0)->strides) ==
                   WF_ARR_KERNEL_BYTES,
               "struct wf_arr of src/cuda/prelude.cuh is the header's first 72 bytes");

/* ---- CPU launches ------------------------------------------------------ */
#define WF_LAUNCH_MSGSIZE 512
#define WF_LAUNCH_INTERRUPTED 2 /* ctx->error of a launch stopped by an interrupt */

typedef struct wf_launch_ctx {
  int64_t dims[WF_MAXDIM];
  int32_t ndim;
  int32_t error;
  char msg[WF_LAUNCH_MSGSIZE];
  int32_t serial;
  int32_t priv;
  int32_t lock;
  int32_t order; /* 1: a kernel may run its threads in a hash grid's cell order (wf_rt) */
  const int32_t *intr;
  const void *geom; /* live geometry ids (src/runtime/geom_registry.c), or NULL */
} wf_launch_ctx;

_Static_assert(offsetof(wf_launch_ctx, dims) == 0 && offsetof(wf_launch_ctx, error) == 36 &&
                   offsetof(wf_launch_ctx, msg) == 40 && offsetof(wf_launch_ctx, serial) == 552 &&
                   offsetof(wf_launch_ctx, intr) == 568,
               "the layout drawn above");
_Static_assert(sizeof(((wf_launch_ctx *)0)->dims[0]) == 8, "generated code loads dims as i64");
_Static_assert(sizeof(((wf_launch_ctx *)0)->error) == 4, "generated code loads error as i32");

typedef void (*wf_kernel_fn)(const void *args, int64_t begin, int64_t end, wf_launch_ctx *ctx);

/* Stop the launch of ctx for an interrupt: the first failure wins. */
static inline void wf_launch_interrupted(wf_launch_ctx *ctx) {
  int32_t zero = 0;
  if (__atomic_compare_exchange_n(&ctx->error, &zero, WF_LAUNCH_INTERRUPTED, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_RELAXED))
    snprintf(ctx->msg, sizeof ctx->msg, "interrupted");
}

#endif
