/*
** launch.c -- wf_cpu_launch: run a compiled kernel over a grid on the pool
** (wf_launch.h; the kernel ABI is src/ir/abi.h). No LLVM here: the CPU
** backend hands over a function pointer.
*/
#include <stdint.h>
#include <string.h>

#include "runtime/rt.h"
#include "runtime/wf_launch.h"

/* Work (estimated instructions) below which a launch runs on the caller:
** waking the workers costs a few microseconds. */
#define WF_INLINE_WORK 32768
/* Work per chunk the pool should aim for, so chunk overhead stays small. */
#define WF_CHUNK_WORK 16384

typedef struct launch_job {
  wf_kernel_fn fn;
  const void *args;
  wf_launch_ctx *ctx;
} launch_job;

/* The pool calls this per chunk; an interrupt stops the chunks not yet
** started (kernels without loops never poll). */
static void run_chunk(void *job, int64_t begin, int64_t end) {
  launch_job *j = job;
  if (__atomic_load_n(j->ctx->intr, __ATOMIC_RELAXED)) {
    wf_launch_interrupted(j->ctx);
    return;
  }
  j->fn(j->args, begin, end, j->ctx);
}

/* Creates the runtime's pool on first use (rt.h: the launch part owns it). */
wf_pool *wf_launch_pool(wf_rt *rt) {
  if (!rt->pool && rt->num_threads > 1) {
    rt->pool = wf_pool_new(rt->num_threads);
    rt->pool_free = rt->pool ? wf_pool_free : NULL;
  }
  return rt->pool;
}

int wf_cpu_launch(wf_rt *rt, void *fn, int ndim, const int64_t *dims, const void *args,
                  int64_t cost) {
  if (!rt) return WEFT_ERRARG;
  if (!fn) return wf_rt_seterr(rt, WEFT_ERRARG, "weft.launch: kernel has no CPU code");
  if (ndim < 1 || ndim > WF_MAXDIM || !dims)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft.launch: dim must have 1 to 4 entries, got %d", ndim);
  wf_launch_ctx ctx;
  int64_t total = 1;
  for (int i = 0; i < WF_MAXDIM; i++)
    ctx.dims[i] = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0 || dims[i] > INT32_MAX)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft.launch: dim[%d] = %lld is out of range (0 to 2^31-1)", i + 1,
                          (long long)dims[i]);
    ctx.dims[i] = dims[i];
    if (dims[i] != 0 && total > INT64_MAX / dims[i])
      return wf_rt_seterr(rt, WEFT_ERRARG, "weft.launch: too many threads");
    total *= dims[i];
  }
  if (total == 0) return WEFT_OK;
  wf_intr *intr = wf_rt_intr(rt);
  if (wf_intr_take(intr)) return wf_rt_seterr(rt, WEFT_ERRINTR, "interrupted");
  ctx.intr = &intr->pending;
  ctx.geom = rt->geom;
  ctx.ndim = ndim;
  ctx.error = 0;
  ctx.msg[0] = '\0';
  ctx.priv = 0;
  ctx.lock = 0;
  ctx.order = rt->cell_order;
  if (cost < 1) cost = 1;
  int64_t work = total > INT64_MAX / cost ? INT64_MAX : total * cost;
  wf_kernel_fn kfn = (wf_kernel_fn)fn;
  wf_pool *pool = work < WF_INLINE_WORK ? NULL : wf_launch_pool(rt);
  ctx.serial = pool == NULL;
  /* the host's hooks (the weft_State's, through the interrupt request) */
  void *(*unblock)(void) = __atomic_load_n(&intr->unblock, __ATOMIC_ACQUIRE);
  void (*reblock)(void *) = __atomic_load_n(&intr->reblock, __ATOMIC_ACQUIRE);
  void *token = unblock && reblock && work >= WF_UNBLOCK_WORK ? unblock() : NULL;
  if (!pool) {
    kfn(args, 0, total, &ctx);
  } else {
    launch_job job = {kfn, args, &ctx};
    int64_t grain = WF_CHUNK_WORK / cost;
    wf_pool_run(pool, total, grain < 1 ? 1 : grain, run_chunk, &job, &ctx.error);
  }
  if (token) reblock(token);
  int32_t err = __atomic_load_n(&ctx.error, __ATOMIC_ACQUIRE);
  if (err == WF_LAUNCH_INTERRUPTED) {
    /* count the stop even if the request was taken meanwhile */
    if (!wf_intr_take(intr)) __atomic_add_fetch(&intr->taken, 1, __ATOMIC_RELEASE);
    return wf_rt_seterr(rt, WEFT_ERRINTR, "interrupted");
  }
  if (err) return wf_rt_seterr(rt, WEFT_ERRRUN, "%s", ctx.msg);
  return WEFT_OK;
}
