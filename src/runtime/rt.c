/*
** rt.c -- the runtime object: error messages, thread count, devices.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt.h"

__attribute__((weak)) int wf_cuda_attach(wf_rt *rt);

/* The Lua layer compares this with its own number at load, so a stale
** library and a newer lua/weft never run together silently. */
int wf_abi_version(void) {
  return WEFT_ABI_VERSION;
}

/* Threads default to the online CPUs; 1 if the system will not say. */
static int default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 ? (int)n : 1;
}

wf_rt *wf_rt_new(void) {
  wf_rt *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  rt->num_threads = default_threads();
  rt->cell_order = 1;
  rt->intr = &rt->own_intr;
  return rt;
}

void wf_rt_attach_intr(wf_rt *rt, void *intr) {
  if (rt) rt->intr = intr ? (wf_intr *)intr : &rt->own_intr;
}

wf_intr *wf_rt_intr(wf_rt *rt) {
  return rt->intr;
}

int wf_intr_take(wf_intr *in) {
  if (!__atomic_exchange_n(&in->pending, 0, __ATOMIC_ACQ_REL)) return 0;
  __atomic_add_fetch(&in->taken, 1, __ATOMIC_RELEASE);
  return 1;
}

/* Drop the thread pool; the launch part makes a new one when needed. */
static void drop_pool(wf_rt *rt) {
  if (rt->pool && rt->pool_free) rt->pool_free(rt->pool);
  rt->pool = NULL;
  rt->pool_free = NULL;
}

void wf_rt_free(wf_rt *rt) {
  if (!rt) return;
  drop_pool(rt);
  if (rt->blas && rt->blas_free) rt->blas_free(rt->blas);
  if (rt->cuda_ctx && rt->cuda_free) rt->cuda_free(rt->cuda_ctx);
  if (rt->geom && rt->geom_release) rt->geom_release(rt->geom);
  free(rt);
}

const char *wf_rt_errmsg(wf_rt *rt) {
  return rt ? rt->msg : "weft: no runtime";
}

int wf_rt_seterr(wf_rt *rt, int status, const char *fmt, ...) {
  if (!rt) return status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->msg, sizeof rt->msg, fmt, ap);
  va_end(ap);
  return status;
}

int wf_rt_num_threads(wf_rt *rt) {
  return rt->num_threads;
}

/* n <= 0 restores the default (one thread per online CPU). A change drops
** the pool so the next launch runs with the new count. */
int wf_rt_set_num_threads(wf_rt *rt, int n) {
  if (n > 4096) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: thread count %d is too large", n);
  if (n <= 0) n = default_threads();
  if (n != rt->num_threads) drop_pool(rt);
  rt->num_threads = n;
  return WEFT_OK;
}

int wf_rt_set_cell_order(wf_rt *rt, int on) {
  if (!rt) return WEFT_ERRARG;
  rt->cell_order = on != 0;
  return WEFT_OK;
}

/* Ask the CUDA backend (if linked in) once per runtime. */
static int cuda_count(wf_rt *rt) {
  if (!rt->cuda_tried) {
    rt->cuda_tried = 1;
    if (wf_cuda_attach && wf_cuda_attach(rt) < 0) rt->cuda = NULL;
  }
  return rt->cuda && rt->cuda->count ? rt->cuda->count(rt) : 0;
}

int wf_device_count(wf_rt *rt) {
  return cuda_count(rt);
}

const char *wf_device_name(wf_rt *rt, int32_t device) {
  if (device == WF_DEVICE_CPU) return "cpu";
  if (device < 0) return "invalid";
  snprintf(rt->namebuf, sizeof rt->namebuf, "cuda:%d", (int)device);
  return rt->namebuf;
}

const wf_device_ops *wf_device_ops_for(wf_rt *rt, int32_t dev) {
  if (dev == WF_DEVICE_CPU) return wf_device_cpu();
  if (dev < 0) {
    wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: invalid device index %d", (int)dev);
    return NULL;
  }
  int n = cuda_count(rt);
  if (n == 0) {
    wf_rt_seterr(rt, WEFT_ERRDEVICE,
                 "weft: device 'cuda:%d': CUDA is not available: libcuda.so.1 could not be loaded "
                 "(no NVIDIA driver)",
                 (int)dev);
    return NULL;
  }
  if (dev >= n) {
    wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: device 'cuda:%d' is not available (%d CUDA device%s)",
                 (int)dev, n, n == 1 ? "" : "s");
    return NULL;
  }
  return rt->cuda;
}
