/*
** wf_launch.h -- the CPU kernel ABI and the launch entry point (FFI).
**
** A compiled CPU kernel is one native function:
**
**   void k(const void *args, int64_t begin, int64_t end, wf_launch_ctx *ctx);
**
** It runs the linear thread indices [begin, end) of a launch. The thread
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
** Arguments. `args` is a byte block (built by lua/weft/launch.lua, layout
** from core.cpu_compile: offsets[] and size). Parameter i sits at offset[i]:
** each parameter gets a slot of max(8, size) bytes rounded up to 8, aligned
** to max(8, type align).
**   array param    the slot holds a `wf_array *` (runtime header: data,
**                  shape[4], strides[4] in bytes, see runtime/wf_rt.h)
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
** index (debug mode) or chunk. The
** launch returns WEFT_ERRRUN with the message in the runtime.
**
** Memory layout of wf_launch_ctx (read by generated code):
**   0   int64_t dims[4]
**   32  int32_t ndim
**   36  int32_t error        (atomic)
**   40  char msg[WF_LAUNCH_MSGSIZE]
**   552 int32_t serial       1: one thread runs the whole launch
**   556 int32_t priv         private accumulation: 0 undecided, 1 on, 2 off
**   560 int32_t lock         spinlock folding private copies (rtlib.c)
**   568 const int32_t *intr  the interrupt request (wf_intr.pending), read
**                            with relaxed loads at loop back-edges
**
** Interrupts (weft_interrupt). A kernel that finds *intr set at a loop
** back-edge calls wf_cpu_rt_interrupted (error = WF_LAUNCH_INTERRUPTED,
** message "interrupted") and returns; the pool checks *intr before each
** chunk too, so loop-free kernels stop at chunk granularity. The launch
** then takes the request and returns WEFT_ERRINTR.
*/
#ifndef WF_LAUNCH_H
#define WF_LAUNCH_H

#include <stdint.h>

#include "runtime/wf_rt.h"

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
  int32_t pad_;
  const int32_t *intr;
} wf_launch_ctx;

typedef void (*wf_kernel_fn)(const void *args, int64_t begin, int64_t end, wf_launch_ctx *ctx);

/* ---- launches (FFI) ---------------------------------------------------- */
/* Run kernel fn over the grid dims[0..ndim-1] with the packed args on the
** thread pool of rt. cost is the kernel's estimated work per thread (from
** core.cpu_compile), used to run small launches inline on the caller. An
** empty grid does nothing. Returns 0, or WEFT_ERRRUN with the kernel's
** message (wf_rt_errmsg), or WEFT_ERRARG for bad dims. */
WF_FFI int wf_cpu_launch(wf_rt *rt, void *fn, int ndim, const int64_t *dims, const void *args,
                         int64_t cost);
/* Long launches let other threads of an embedding interpreter run: when
** set (by the Python fast paths, src/interop/pyapi.c), unblock() is called
** before a launch of at least WF_UNBLOCK_WORK estimated instructions (the
** size from which launches use the thread pool; the estimate cannot see
** runtime trip counts, so it stays low) and returns a token (NULL: nothing
** was released), which reblock(token) takes back after the launch.
** Process-wide; the hooks must work from any thread. */
#define WF_UNBLOCK_WORK ((int64_t)32768)
WF_INTERNAL void wf_cpu_set_unblock(void *(*unblock)(void), void (*reblock)(void *token));

/* ---- the thread pool (src/runtime/pool.c) ------------------------------ */
typedef struct wf_pool wf_pool;
/* A job body: runs the indices [begin, end). */
typedef void (*wf_pool_fn)(void *job, int64_t begin, int64_t end);
/* nthreads >= 1 counts the caller: nthreads - 1 workers are started. NULL
** if no worker could be started (the caller then runs jobs inline). */
WF_INTERNAL wf_pool *wf_pool_new(int nthreads);
WF_INTERNAL void wf_pool_free(void *pool); /* joins the workers */
WF_INTERNAL int wf_pool_size(const wf_pool *p);
/* Run fn over [0, total) in chunks of at least grain indices on the pool's
** threads and the caller; returns when every chunk has run. *stop (may be
** NULL) is polled between chunks: nonzero ends the job early. */
WF_INTERNAL void wf_pool_run(wf_pool *p, int64_t total, int64_t grain, wf_pool_fn fn, void *job,
                             const int32_t *stop);

#endif
