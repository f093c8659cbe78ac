/*
** wf_launch.h -- CPU launches (FFI) and the thread pool that runs them.
**
** A launch runs a compiled kernel (the ABI of src/ir/abi.h: arguments,
** thread indices, wf_launch_ctx, errors, interrupts) over its grid: small
** launches inline on the caller, others in chunks on the runtime's pool.
** A failing kernel's message (ctx->msg) becomes the runtime's message.
*/
#ifndef WF_LAUNCH_H
#define WF_LAUNCH_H

#include <stdint.h>

#include "ir/abi.h"
#include "runtime/wf_rt.h"

/* ---- launches (FFI) ---------------------------------------------------- */
/* Run kernel fn over the grid dims[0..ndim-1] with the packed args on the
** thread pool of rt. cost is the kernel's estimated work per thread (from
** core.cpu_compile), used to run small launches inline on the caller. An
** empty grid does nothing. Returns 0, or WEFT_ERRRUN with the kernel's
** message (wf_rt_errmsg), or WEFT_ERRARG for bad dims. */
WF_FFI int wf_cpu_launch(wf_rt *rt, void *fn, int ndim, const int64_t *dims, const void *args,
                         int64_t cost);
/* Long launches let other threads of an embedding interpreter run: when
** the weft_State's hooks are set (wf_intr.unblock, by the Python fast
** paths, src/interop/pyapi.c), unblock() is called before a launch of at
** least WF_UNBLOCK_WORK estimated instructions (the size from which
** launches use the thread pool; the estimate cannot see runtime trip
** counts, so it stays low) and returns a token (NULL: nothing was
** released), which reblock(token) takes back after the launch. */
#define WF_UNBLOCK_WORK ((int64_t)32768)
/* The runtime's thread pool, made on first use (NULL with one thread):
** for other work split over the launch threads (blas.c's batches). */
WF_INTERNAL struct wf_pool *wf_launch_pool(wf_rt *rt);

/* ---- the thread pool (pool.c) ------------------------------------------ */
typedef struct wf_pool wf_pool;
/* A job body: runs the indices [begin, end). */
typedef void (*wf_pool_fn)(void *job, int64_t begin, int64_t end);
/* nthreads >= 1 counts the caller: nthreads - 1 workers are started. NULL
** if no worker could be started (the caller then runs jobs inline). */
WF_INTERNAL wf_pool *wf_pool_new(int nthreads);
WF_INTERNAL void wf_pool_free(void *pool); /* joins the workers */
WF_INTERNAL int wf_pool_size(const wf_pool *p);
/* Wake the workers (p may be NULL) to spin for a job the caller is about
** to publish, as they do after a job (spinning ones spin anew): the job
** then does not wait for their wake-up. A hint, and no job runs; unused,
** they sleep again. */
WF_INTERNAL void wf_pool_wake(wf_pool *p);
/* Run fn over [0, total) in chunks of at least grain indices on the pool's
** threads and the caller; returns when every chunk has run. *stop (may be
** NULL) is polled between chunks: nonzero ends the job early. */
WF_INTERNAL void wf_pool_run(wf_pool *p, int64_t total, int64_t grain, wf_pool_fn fn, void *job,
                             const int32_t *stop);

#endif
