/*
** rt.h -- the runtime object (wf_rt) shared by the runtime's C files.
**
** One wf_rt per LuaJIT state (made by wf_rt_new, held by the Lua layer in
** its private table as P.rt). It owns the error message of the last failed FFI call, the
** thread count of CPU launches, the thread pool (made lazily by the launch
** part) and the device backends.
**
**   wf_rt  +-------------------------------------------+
**          | msg[WF_MSGSIZE]   last error message       |
**          | num_threads       CPU launch threads        |
**          | pool, pool_free   launch thread pool (lazy) |
**          | cuda, cuda_ctx    CUDA backend (lazy, NULL) |
**          | intr              interrupt request polled  |
**          +-------------------------------------------+
*/
#ifndef WF_RT_INTERNAL_H
#define WF_RT_INTERNAL_H

#include "runtime/device.h"
#include "runtime/wf_rt.h"

struct wf_rt {
  char msg[WF_MSGSIZE];
  int num_threads; /* >= 1; defaults to the number of online CPUs */
  /* 0: CPU launches run threads in tid order always; 1 (the default):
  ** a kernel querying a hash grid at p[tid()] may run them in the grid's
  ** cell order (wf_cpu_rt_hgrid_order, src/cpu/rtlib.c) */
  int cell_order;
  /* Thread pool of CPU launches, owned by the launch part: it creates the
  ** pool on first use and sets pool_free. wf_rt_free and a change of the
  ** thread count call pool_free(pool) and clear both fields, so the launch
  ** part makes a new pool of the new size when it next needs one. */
  void *pool;
  void (*pool_free)(void *pool);
  /* CUDA backend: set by wf_cuda_attach (src/cuda, weak) on first use.
  ** cuda_tried makes the attempt happen once. cuda_free releases cuda_ctx
  ** when the runtime is freed. */
  const wf_device_ops *cuda;
  void *cuda_ctx;
  void (*cuda_free)(void *ctx);
  int cuda_tried;
  char namebuf[32]; /* wf_device_name's answer for a cuda ordinal */
  /* The interrupt request kernels poll: own_intr, or the one of the
  ** weft_State that made this runtime (wf_rt_attach_intr). */
  wf_intr *intr;
  wf_intr own_intr;
  /* Live geometry objects (src/runtime/geom_registry.c): made by the first mesh
  ** or Bvh, released by wf_rt_free; kernels check ids against it in debug
  ** mode (wf_launch_ctx.geom). */
  void *geom;
  void (*geom_release)(void *geom);
  /* BLAS libraries (src/runtime/blas.c): loaded on the first matmul,
  ** released by wf_rt_free before the CUDA backend. */
  void *blas;
  void (*blas_free)(void *blas);
};

#endif
