/*
** device_cuda.c -- the CUDA Driver API through dlopen("libcuda.so.1").
**
** libweft never links libcuda (nor its stub): binaries must start on
** machines without a driver. The first use of a cuda device loads the
** library, resolves the entry points (the _v2 names where the ABI has
** them), calls cuInit and counts the devices. Without a driver every cuda
** device use fails with WF_CUDA_NODRIVER and device_count is 0.
**
**   wf_cudrv  +------------------------------------------+
**   (refcnt)  | lib (dlopen handle), fn table             |
**             | ndev; per device: primary ctx, stream,    |
**             |   current user stream, capturing flag     |
**             +------------------------------------------+
**
** The runtime holds one reference (rt->cuda_ctx); every device buffer
** holds another, so a buffer released after weft_close (a DLPack consumer)
** can still call cuMemFree. The last reference releases the primary
** contexts and closes the library.
*/
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"
#include "runtime/wf_cudadrv.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUgraph, *CUgraphExec;
typedef unsigned long long CUdeviceptr;

#define CU_ATTR_MP_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define CU_CAPTURE_MODE_GLOBAL 0

/* The entry points: field, type, symbol, fallback symbol (or NULL). */
/* clang-format off */
#define WF_CU_FUNCS(_) \
  _(Init, CUresult (*)(unsigned), "cuInit", NULL) \
  _(DeviceGet, CUresult (*)(CUdevice *, int), "cuDeviceGet", NULL) \
  _(DeviceGetCount, CUresult (*)(int *), "cuDeviceGetCount", NULL) \
  _(DeviceGetName, CUresult (*)(char *, int, CUdevice), "cuDeviceGetName", NULL) \
  _(DeviceGetAttribute, CUresult (*)(int *, int, CUdevice), "cuDeviceGetAttribute", NULL) \
  _(DeviceTotalMem, CUresult (*)(size_t *, CUdevice), "cuDeviceTotalMem_v2", "cuDeviceTotalMem") \
  _(PrimaryCtxRetain, CUresult (*)(CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain", NULL) \
  _(PrimaryCtxRelease, CUresult (*)(CUdevice), "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") \
  _(CtxSetCurrent, CUresult (*)(CUcontext), "cuCtxSetCurrent", NULL) \
  _(CtxSynchronize, CUresult (*)(void), "cuCtxSynchronize", NULL) \
  _(StreamCreate, CUresult (*)(CUstream *, unsigned), "cuStreamCreate", NULL) \
  _(StreamDestroy, CUresult (*)(CUstream), "cuStreamDestroy_v2", "cuStreamDestroy") \
  _(StreamSynchronize, CUresult (*)(CUstream), "cuStreamSynchronize", NULL) \
  _(StreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned), "cuStreamWaitEvent", NULL) \
  _(EventCreate, CUresult (*)(CUevent *, unsigned), "cuEventCreate", NULL) \
  _(EventRecord, CUresult (*)(CUevent, CUstream), "cuEventRecord", NULL) \
  _(EventSynchronize, CUresult (*)(CUevent), "cuEventSynchronize", NULL) \
  _(EventQuery, CUresult (*)(CUevent), "cuEventQuery", NULL) \
  _(EventElapsedTime, CUresult (*)(float *, CUevent, CUevent), "cuEventElapsedTime_v2", "cuEventElapsedTime") \
  _(EventDestroy, CUresult (*)(CUevent), "cuEventDestroy_v2", "cuEventDestroy") \
  _(MemAlloc, CUresult (*)(CUdeviceptr *, size_t), "cuMemAlloc_v2", NULL) \
  _(MemFree, CUresult (*)(CUdeviceptr), "cuMemFree_v2", NULL) \
  _(MemAllocHost, CUresult (*)(void **, size_t), "cuMemAllocHost_v2", NULL) \
  _(MemFreeHost, CUresult (*)(void *), "cuMemFreeHost", NULL) \
  _(MemcpyHtoD, CUresult (*)(CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2", NULL) \
  _(MemcpyDtoH, CUresult (*)(void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2", NULL) \
  _(MemcpyDtoD, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t), "cuMemcpyDtoD_v2", NULL) \
  _(MemcpyPeer, CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t), "cuMemcpyPeer", NULL) \
  _(MemcpyHtoDAsync, CUresult (*)(CUdeviceptr, const void *, size_t, CUstream), "cuMemcpyHtoDAsync_v2", NULL) \
  _(MemcpyDtoHAsync, CUresult (*)(void *, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoHAsync_v2", NULL) \
  _(MemcpyDtoDAsync, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream), "cuMemcpyDtoDAsync_v2", NULL) \
  _(MemsetD8, CUresult (*)(CUdeviceptr, unsigned char, size_t), "cuMemsetD8_v2", NULL) \
  _(MemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream), "cuMemsetD8Async", NULL) \
  _(MemsetD16, CUresult (*)(CUdeviceptr, unsigned short, size_t), "cuMemsetD16_v2", NULL) \
  _(MemsetD32, CUresult (*)(CUdeviceptr, unsigned, size_t), "cuMemsetD32_v2", NULL) \
  _(MemsetD2D8, CUresult (*)(CUdeviceptr, size_t, unsigned char, size_t, size_t), "cuMemsetD2D8_v2", NULL) \
  _(MemsetD2D16, CUresult (*)(CUdeviceptr, size_t, unsigned short, size_t, size_t), "cuMemsetD2D16_v2", NULL) \
  _(MemsetD2D32, CUresult (*)(CUdeviceptr, size_t, unsigned, size_t, size_t), "cuMemsetD2D32_v2", NULL) \
  _(ModuleLoadData, CUresult (*)(CUmodule *, const void *), "cuModuleLoadData", NULL) \
  _(ModuleUnload, CUresult (*)(CUmodule), "cuModuleUnload", NULL) \
  _(ModuleGetFunction, CUresult (*)(CUfunction *, CUmodule, const char *), "cuModuleGetFunction", NULL) \
  _(LaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, \
                               unsigned, unsigned, CUstream, void **, void **), "cuLaunchKernel", NULL) \
  _(StreamBeginCapture, CUresult (*)(CUstream, int), "cuStreamBeginCapture_v2", NULL) \
  _(StreamEndCapture, CUresult (*)(CUstream, CUgraph *), "cuStreamEndCapture", NULL) \
  _(GraphInstantiate, CUresult (*)(CUgraphExec *, CUgraph, unsigned long long), "cuGraphInstantiateWithFlags", NULL) \
  _(GraphLaunch, CUresult (*)(CUgraphExec, CUstream), "cuGraphLaunch", NULL) \
  _(GraphExecDestroy, CUresult (*)(CUgraphExec), "cuGraphExecDestroy", NULL) \
  _(GraphDestroy, CUresult (*)(CUgraph), "cuGraphDestroy", NULL) \
  _(GetErrorName, CUresult (*)(CUresult, const char **), "cuGetErrorName", NULL) \
  _(GetErrorString, CUresult (*)(CUresult, const char **), "cuGetErrorString", NULL)
/* clang-format on */

typedef struct wf_cufns {
#define WF_CU_FIELD(f, ty, sym, alt) __typeof__(ty) f;
  WF_CU_FUNCS(WF_CU_FIELD)
#undef WF_CU_FIELD
} wf_cufns;

typedef struct wf_custream wf_custream;

typedef struct wf_cufree {
  CUdeviceptr p;
  int host; /* page-locked host memory (cuMemFreeHost) */
} wf_cufree;

typedef struct wf_cudev {
  CUcontext ctx;    /* primary context, NULL until first use */
  CUstream stream;  /* the device's own stream */
  wf_custream *cur; /* the current stream set by the user (retained), or NULL */
  CUstream cap;     /* the stream being captured */
  int capturing;    /* under wf_cudrv.mu */
  /* frees asked for while capturing (a collected array): the driver
  ** refuses cuMemFree then and drops the capture, so they wait for its end */
  struct wf_cufree *deferred;
  size_t ndeferred, maxdeferred;
} wf_cudev;

struct wf_cudrv {
  int64_t refcount; /* __atomic builtins only */
  void *lib;
  int ndev;
  wf_cudev *dev;
  pthread_mutex_t mu; /* capturing and deferred (buffers die on any thread) */
  wf_cufns fn;
};

/* A few names for when cuGetErrorName itself is unusable (a stub library
** answers every call with CUDA_ERROR_STUB_LIBRARY). */
static const char *fallback_name(int r) {
  switch (r) {
  case 1: return "CUDA_ERROR_INVALID_VALUE";
  case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
  case 3: return "CUDA_ERROR_NOT_INITIALIZED";
  case 34: return "CUDA_ERROR_STUB_LIBRARY";
  case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
  case 100: return "CUDA_ERROR_NO_DEVICE";
  case 101: return "CUDA_ERROR_INVALID_DEVICE";
  case 200: return "CUDA_ERROR_INVALID_IMAGE";
  case 201: return "CUDA_ERROR_INVALID_CONTEXT";
  case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case 218: return "CUDA_ERROR_INVALID_PTX";
  case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
  case 400: return "CUDA_ERROR_INVALID_HANDLE";
  case 500: return "CUDA_ERROR_NOT_FOUND";
  case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case 710: return "CUDA_ERROR_ASSERT";
  case 719: return "CUDA_ERROR_LAUNCH_FAILED";
  case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
  case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
  case 999: return "CUDA_ERROR_UNKNOWN";
  default: return NULL;
  }
}

void wf_cudrv_errstr(wf_cudrv *d, int res, char *buf, size_t n) {
  const char *name = NULL, *msg = NULL;
  if (d && d->fn.GetErrorName && d->fn.GetErrorName(res, &name) != 0) name = NULL;
  if (d && d->fn.GetErrorString && d->fn.GetErrorString(res, &msg) != 0) msg = NULL;
  if (!name) name = fallback_name(res);
  if (name && msg)
    snprintf(buf, n, "%s: %s", name, msg);
  else if (name)
    snprintf(buf, n, "%s (CUresult %d)", name, res);
  else
    snprintf(buf, n, "CUDA_ERROR_%d: unknown CUDA error", res);
}

/* Set the runtime message for a failed driver call; returns WEFT_ERRDEVICE. */
static int cuerr(wf_rt *rt, wf_cudrv *d, CUresult r, const char *what) {
  char e[512];
  wf_cudrv_errstr(d, r, e, sizeof e);
  /* the sticky errors of a faulting kernel (illegal address, assert,
  ** illegal instruction, a trap): every later call fails the same way */
  int sticky = r == 700 || r == 710 || r == 715 || r == 719;
  return wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: CUDA %s failed: %s%s", what, e,
                      sticky ? " (a kernel faulted or trapped; the device cannot be used again "
                               "in this process: fast mode traps where release mode reports)"
                             : "");
}

/* dlopen the driver: $WEFT_LIBCUDA lets tests load another library (the
** toolkit's stub) to exercise the failure paths. */
static void *load_lib(char *err, size_t errsize) {
  const char *path = getenv("WEFT_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) snprintf(err, errsize, "%s", WF_CUDA_NODRIVER);
  return lib;
}

/* Resolve every entry point; the error names the first one missing. */
static int resolve(wf_cudrv *d, char *err, size_t errsize) {
  void *p;
#define WF_CU_RESOLVE(f, ty, sym, alt)                                                             \
  p = dlsym(d->lib, sym);                                                                          \
  if (!p && alt) p = dlsym(d->lib, alt ? alt : sym);                                               \
  if (!p) {                                                                                        \
    snprintf(err, errsize, "weft: CUDA is not available: the driver lacks %s (driver too old)",    \
             sym);                                                                                 \
    return -1;                                                                                     \
  }                                                                                                \
  memcpy(&d->fn.f, &p, sizeof p);
  WF_CU_FUNCS(WF_CU_RESOLVE)
#undef WF_CU_RESOLVE
  return 0;
}

wf_cudrv *wf_cudrv_open(char *err, size_t errsize) {
  wf_cudrv *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errsize, "weft: out of memory");
    return NULL;
  }
  d->refcount = 1;
  pthread_mutex_init(&d->mu, NULL);
  if (!(d->lib = load_lib(err, errsize)) || resolve(d, err, errsize) != 0) goto fail;
  CUresult r = d->fn.Init(0);
  if (r == 0) r = d->fn.DeviceGetCount(&d->ndev);
  if (r != 0) {
    char e[400];
    wf_cudrv_errstr(d, r, e, sizeof e);
    snprintf(err, errsize, "weft: CUDA is not available: %s", e);
    goto fail;
  }
  if (d->ndev > 0 && !(d->dev = calloc((size_t)d->ndev, sizeof *d->dev))) {
    snprintf(err, errsize, "weft: out of memory");
    goto fail;
  }
  return d;
fail:
  if (d->lib) dlclose(d->lib);
  pthread_mutex_destroy(&d->mu);
  free(d);
  return NULL;
}

/* Free what waited for the end of dev's capture (the capture is over). */
static void flush_deferred(wf_cudrv *d, int dev) {
  wf_cudev *v = &d->dev[dev];
  pthread_mutex_lock(&d->mu);
  wf_cufree *list = v->deferred;
  size_t n = v->ndeferred;
  v->deferred = NULL;
  v->ndeferred = v->maxdeferred = 0;
  pthread_mutex_unlock(&d->mu);
  if (n) d->fn.CtxSetCurrent(v->ctx);
  for (size_t i = 0; i < n; i++) {
    if (list[i].host)
      d->fn.MemFreeHost((void *)(uintptr_t)list[i].p);
    else
      d->fn.MemFree(list[i].p);
  }
  free(list);
}

/* Queue a free on a capturing device (dev -1: any); 0 if none captures
** (or out of memory: the caller frees now). */
static int defer_free(wf_cudrv *d, int dev, CUdeviceptr p, int host) {
  int done = 0;
  pthread_mutex_lock(&d->mu);
  for (int i = dev < 0 ? 0 : dev; i < (dev < 0 ? d->ndev : dev + 1) && !done; i++) {
    wf_cudev *v = &d->dev[i];
    if (!v->capturing) continue;
    if (v->ndeferred == v->maxdeferred) {
      size_t m = v->maxdeferred ? 2 * v->maxdeferred : 16;
      wf_cufree *nl = realloc(v->deferred, m * sizeof *nl);
      if (!nl) break;
      v->deferred = nl;
      v->maxdeferred = m;
    }
    v->deferred[v->ndeferred].p = p;
    v->deferred[v->ndeferred++].host = host;
    done = 1;
  }
  pthread_mutex_unlock(&d->mu);
  return done;
}

/* Last reference: release contexts (streams die with them) and the lib. */
void wf_cudrv_release(wf_cudrv *d) {
  if (!d || __atomic_sub_fetch(&d->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  for (int i = 0; i < d->ndev; i++) {
    if (!d->dev[i].ctx) continue;
    d->dev[i].capturing = 0; /* a capture never ended: its frees go now */
    flush_deferred(d, i);
    d->fn.CtxSetCurrent(d->dev[i].ctx);
    if (d->dev[i].stream) d->fn.StreamDestroy(d->dev[i].stream);
    d->fn.PrimaryCtxRelease(i);
  }
  free(d->dev);
  dlclose(d->lib);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

static void stream_unref(wf_custream *st);

/* The runtime's reference goes: the current streams it set go with it
** (each holds a driver reference, which would otherwise keep it alive). */
static void cudrv_free_cb(void *ctx) {
  wf_cudrv *d = ctx;
  for (int i = 0; i < d->ndev; i++) {
    wf_custream *st = d->dev[i].cur;
    d->dev[i].cur = NULL;
    stream_unref(st);
  }
  wf_cudrv_release(d);
}

/* The driver of rt, or NULL with the runtime message set. */
static wf_cudrv *drv_of(wf_rt *rt) {
  if (!rt->cuda_tried) wf_device_count(rt);
  if (!rt->cuda_ctx) {
    /* Ask again for the reason (rare path; dlopen fails fast). */
    char err[512];
    wf_cudrv *d = wf_cudrv_open(err, sizeof err);
    if (d) {
      wf_cudrv_release(d);
      snprintf(err, sizeof err, "%s", WF_CUDA_NODRIVER);
    }
    wf_rt_seterr(rt, WEFT_ERRDEVICE, "%s", err);
    return NULL;
  }
  return rt->cuda_ctx;
}

/* Make dev's primary context current (retaining it and creating its
** stream on first use). */
static int use_dev(wf_rt *rt, wf_cudrv *d, int32_t dev) {
  if (dev < 0 || dev >= d->ndev)
    return wf_rt_seterr(rt, WEFT_ERRDEVICE,
                        "weft: device 'cuda:%d' is not available (%d CUDA device%s)", (int)dev,
                        d->ndev, d->ndev == 1 ? "" : "s");
  wf_cudev *v = &d->dev[dev];
  CUresult r;
  if (!v->ctx) {
    if ((r = d->fn.PrimaryCtxRetain(&v->ctx, dev)) != 0) {
      v->ctx = NULL;
      return cuerr(rt, d, r, "context creation");
    }
  }
  if ((r = d->fn.CtxSetCurrent(v->ctx)) != 0) return cuerr(rt, d, r, "cuCtxSetCurrent");
  if (!v->stream && (r = d->fn.StreamCreate(&v->stream, 0)) != 0) {
    v->stream = NULL;
    return cuerr(rt, d, r, "stream creation");
  }
  return WEFT_OK;
}

/* Driver and device in one step, for the FFI entry points. */
static wf_cudrv *enter(wf_rt *rt, int32_t dev) {
  wf_cudrv *d = drv_of(rt);
  if (!d || use_dev(rt, d, dev) != WEFT_OK) return NULL;
  return d;
}

/* ---- streams and events ------------------------------------------------ */
struct wf_custream {
  int64_t refcount; /* __atomic builtins only */
  wf_cudrv *d;      /* a driver reference */
  int32_t dev;
  CUstream s;
};

typedef struct wf_cuevent {
  wf_cudrv *d; /* a driver reference */
  int32_t dev;
  int timing;
  int recorded;
  CUevent e;
} wf_cuevent;

/* The stream work goes to when none is named. */
static CUstream cur_stream(wf_cudev *v) {
  return v->cur ? v->cur->s : v->stream;
}

static void stream_unref(wf_custream *st) {
  if (!st || __atomic_sub_fetch(&st->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  wf_cudrv *d = st->d;
  if (d->dev[st->dev].ctx) {
    d->fn.CtxSetCurrent(d->dev[st->dev].ctx);
    d->fn.StreamDestroy(st->s);
  }
  free(st);
  wf_cudrv_release(d);
}

int wf_cuda_stream_new(wf_rt *rt, int32_t dev, void **out) {
  *out = NULL;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_custream *st = calloc(1, sizeof *st);
  if (!st) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  CUresult r = d->fn.StreamCreate(&st->s, 0);
  if (r) {
    free(st);
    return cuerr(rt, d, r, "stream creation");
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  st->refcount = 1;
  st->d = d;
  st->dev = dev;
  *out = st;
  return WEFT_OK;
}

void wf_cuda_stream_release(void *s) {
  stream_unref(s);
}

int wf_cuda_stream_synchronize(wf_rt *rt, void *s) {
  wf_custream *st = s;
  if (!st) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: synchronize_stream: no stream");
  wf_cudrv *d = enter(rt, st->dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.StreamSynchronize(st->s);
  return r ? cuerr(rt, d, r, "synchronize_stream") : WEFT_OK;
}

int wf_cuda_set_stream(wf_rt *rt, int32_t dev, void *s) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_custream *st = s;
  if (st && st->dev != dev)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: set_stream: the stream is on cuda:%d, not cuda:%d",
                        (int)st->dev, (int)dev);
  if (d->dev[dev].capturing)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: set_stream: cuda:%d is capturing a graph",
                        (int)dev);
  if (st) __atomic_fetch_add(&st->refcount, 1, __ATOMIC_RELAXED);
  wf_custream *old = d->dev[dev].cur;
  d->dev[dev].cur = st;
  stream_unref(old);
  return WEFT_OK;
}

int wf_cuda_event_new(wf_rt *rt, int32_t dev, int timing, void **out) {
  *out = NULL;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_cuevent *ev = calloc(1, sizeof *ev);
  if (!ev) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  /* CU_EVENT_DISABLE_TIMING (2) unless timing is asked for */
  CUresult r = d->fn.EventCreate(&ev->e, timing ? 0 : 2);
  if (r) {
    free(ev);
    return cuerr(rt, d, r, "event creation");
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  ev->d = d;
  ev->dev = dev;
  ev->timing = timing != 0;
  *out = ev;
  return WEFT_OK;
}

void wf_cuda_event_release(void *e) {
  wf_cuevent *ev = e;
  if (!ev) return;
  wf_cudrv *d = ev->d;
  if (d->dev[ev->dev].ctx) {
    d->fn.CtxSetCurrent(d->dev[ev->dev].ctx);
    d->fn.EventDestroy(ev->e);
  }
  free(ev);
  wf_cudrv_release(d);
}

int wf_cuda_event_record(wf_rt *rt, void *e, void *s) {
  wf_cuevent *ev = e;
  wf_custream *st = s;
  if (!ev) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: record_event: no event");
  if (st && st->dev != ev->dev)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: record_event: the event is on cuda:%d, the stream on cuda:%d",
                        (int)ev->dev, (int)st->dev);
  wf_cudrv *d = enter(rt, ev->dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.EventRecord(ev->e, st ? st->s : d->dev[ev->dev].stream);
  if (r) return cuerr(rt, d, r, "record_event");
  ev->recorded = 1;
  return WEFT_OK;
}

int wf_cuda_stream_wait_event(wf_rt *rt, void *s, void *e) {
  wf_custream *st = s;
  wf_cuevent *ev = e;
  if (!ev) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: wait_event: no event");
  wf_cudrv *d = enter(rt, st ? st->dev : ev->dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.StreamWaitEvent(st ? st->s : d->dev[ev->dev].stream, ev->e, 0);
  return r ? cuerr(rt, d, r, "wait_event") : WEFT_OK;
}

int wf_cuda_event_synchronize(wf_rt *rt, void *e) {
  wf_cuevent *ev = e;
  if (!ev) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: synchronize_event: no event");
  wf_cudrv *d = enter(rt, ev->dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.EventSynchronize(ev->e);
  return r ? cuerr(rt, d, r, "synchronize_event") : WEFT_OK;
}

int wf_cuda_event_elapsed(wf_rt *rt, void *start, void *end, float *ms) {
  wf_cuevent *a = start, *b = end;
  *ms = 0;
  if (!a || !b) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: get_event_elapsed_time: no event");
  if (!a->timing || !b->timing)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: get_event_elapsed_time: both events need enable_timing = true");
  if (!a->recorded || !b->recorded)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: get_event_elapsed_time: both events must be recorded first");
  wf_cudrv *d = enter(rt, a->dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.EventElapsedTime(ms, a->e, b->e);
  return r ? cuerr(rt, d, r, "get_event_elapsed_time") : WEFT_OK;
}

/* ---- pinned host memory ------------------------------------------------ */
static void pinned_release(wf_buffer *b) {
  wf_cudrv *d = b->ctx;
  if (!defer_free(d, -1, (CUdeviceptr)(uintptr_t)b->ptr, 1)) {
    /* any context of the process frees it; the first one retained will do */
    for (int i = 0; i < d->ndev; i++)
      if (d->dev[i].ctx) {
        d->fn.CtxSetCurrent(d->dev[i].ctx);
        break;
      }
    d->fn.MemFreeHost(b->ptr);
  }
  free(b);
  wf_cudrv_release(d);
}

int wf_cuda_host_alloc(wf_rt *rt, size_t nbytes, wf_buffer **out) {
  *out = NULL;
  wf_cudrv *d = enter(rt, 0);
  if (!d) return WEFT_ERRDEVICE;
  wf_buffer *b = malloc(sizeof *b);
  if (!b) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  void *p = NULL;
  CUresult r = d->fn.MemAllocHost(&p, nbytes ? nbytes : 1);
  if (r) {
    free(b);
    char e[400];
    wf_cudrv_errstr(d, r, e, sizeof e);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: cannot allocate %zu bytes of pinned memory: %s",
                        nbytes, e);
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  b->refcount = 1;
  b->ptr = p;
  b->nbytes = nbytes;
  b->device = WF_DEVICE_CPU;
  b->flags = WF_BUF_PINNED;
  b->release = pinned_release;
  b->ctx = d;
  *out = b;
  return WEFT_OK;
}

/* ---- the device table ------------------------------------------------ */

static int ops_count(wf_rt *rt) {
  wf_cudrv *d = rt->cuda_ctx;
  return d ? d->ndev : 0;
}

/* Frees device memory and drops the buffer's driver reference; needs no
** runtime (it may run after weft_close). */
static void cuda_buffer_release(wf_buffer *b) {
  wf_cudrv *d = b->ctx;
  if (b->device >= 0 && b->device < d->ndev && d->dev[b->device].ctx) {
    if (!defer_free(d, b->device, (CUdeviceptr)(uintptr_t)b->ptr, 0)) {
      d->fn.CtxSetCurrent(d->dev[b->device].ctx);
      d->fn.MemFree((CUdeviceptr)(uintptr_t)b->ptr);
    }
  }
  free(b);
  wf_cudrv_release(d);
}

static int ops_buffer_new(wf_rt *rt, int32_t dev, size_t nbytes, wf_buffer **out) {
  *out = NULL;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_buffer *b = malloc(sizeof *b);
  if (!b) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  CUdeviceptr p = 0;
  CUresult r = d->fn.MemAlloc(&p, nbytes ? nbytes : 1);
  if (r != 0) {
    free(b);
    char e[400];
    wf_cudrv_errstr(d, r, e, sizeof e);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: cannot allocate %zu bytes on cuda:%d: %s", nbytes,
                        (int)dev, e);
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  b->refcount = 1;
  b->ptr = (void *)(uintptr_t)p;
  b->nbytes = nbytes;
  b->device = dev;
  b->flags = 0;
  b->release = cuda_buffer_release;
  b->ctx = d;
  *out = b;
  return WEFT_OK;
}

/* Copies are ordered after the work queued on the device's stream: the
** stream is a blocking one, and the synchronous copies run on the legacy
** default stream. */
static int ops_copy(wf_rt *rt, int32_t dst_dev, void *dst, int32_t src_dev, const void *src,
                    size_t nbytes) {
  if (nbytes == 0) return WEFT_OK;
  if (dst_dev == WF_DEVICE_CPU && src_dev == WF_DEVICE_CPU) {
    memmove(dst, src, nbytes);
    return WEFT_OK;
  }
  wf_cudrv *d = enter(rt, dst_dev != WF_DEVICE_CPU ? dst_dev : src_dev);
  if (!d) return WEFT_ERRDEVICE;
  CUdeviceptr dp = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
  CUresult r;
  if (src_dev == WF_DEVICE_CPU)
    r = d->fn.MemcpyHtoD(dp, src, nbytes);
  else if (dst_dev == WF_DEVICE_CPU)
    r = d->fn.MemcpyDtoH(dst, sp, nbytes);
  else if (dst_dev == src_dev)
    r = d->fn.MemcpyDtoD(dp, sp, nbytes);
  else {
    if (use_dev(rt, d, src_dev) != WEFT_OK) return WEFT_ERRDEVICE;
    r = d->fn.MemcpyPeer(dp, d->dev[dst_dev].ctx, sp, d->dev[src_dev].ctx, nbytes);
  }
  return r ? cuerr(rt, d, r, "copy") : WEFT_OK;
}

/* Is the elsize-byte pattern made of one repeated unit of `unit` bytes? */
static int periodic(const unsigned char *v, size_t elsize, size_t unit) {
  if (elsize % unit) return 0;
  for (size_t i = unit; i < elsize; i++)
    if (v[i] != v[i % unit]) return 0;
  return 1;
}

/* memset when the pattern allows; otherwise one 2-D memset per 32/16/8-bit
** word of the element (pitch = elsize, one word wide, count rows). */
static int ops_fill(wf_rt *rt, int32_t dev, void *dst, size_t count, const void *value,
                    size_t elsize) {
  if (count == 0) return WEFT_OK;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  const unsigned char *v = value;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)dst;
  size_t total = count * elsize;
  CUresult r = 0;
  if (periodic(v, elsize, 1)) {
    r = d->fn.MemsetD8(p, v[0], total);
  } else if (periodic(v, elsize, 2) && total % 2 == 0 && p % 2 == 0) {
    unsigned short u;
    memcpy(&u, v, 2);
    r = d->fn.MemsetD16(p, u, total / 2);
  } else if (periodic(v, elsize, 4) && total % 4 == 0 && p % 4 == 0) {
    unsigned u;
    memcpy(&u, v, 4);
    r = d->fn.MemsetD32(p, u, total / 4);
  } else if (elsize % 4 == 0 && p % 4 == 0) {
    for (size_t w = 0; w < elsize && !r; w += 4) {
      unsigned u;
      memcpy(&u, v + w, 4);
      r = d->fn.MemsetD2D32(p + w, elsize, u, 1, count);
    }
  } else if (elsize % 2 == 0 && p % 2 == 0) {
    for (size_t w = 0; w < elsize && !r; w += 2) {
      unsigned short u;
      memcpy(&u, v + w, 2);
      r = d->fn.MemsetD2D16(p + w, elsize, u, 1, count);
    }
  } else {
    for (size_t w = 0; w < elsize && !r; w++)
      r = d->fn.MemsetD2D8(p + w, elsize, v[w], 1, count);
  }
  return r ? cuerr(rt, d, r, "fill") : WEFT_OK;
}

static const wf_device_ops cuda_ops = {
    "cuda", ops_count, ops_buffer_new, ops_copy, ops_fill,
};

/* Called once per runtime by src/runtime (rt.c): load the driver, attach
** the table. Returns the device count, or -1 without a driver (the reason
** is left in rt->msg). */
int wf_cuda_attach(wf_rt *rt) {
  char err[512];
  wf_cudrv *d = wf_cudrv_open(err, sizeof err);
  if (!d) {
    wf_rt_seterr(rt, WEFT_ERRDEVICE, "%s", err);
    return -1;
  }
  rt->cuda = &cuda_ops;
  rt->cuda_ctx = d;
  rt->cuda_free = cudrv_free_cb;
  return d->ndev;
}

int wf_cuda_device_count(void *ctx, char *err, size_t n) {
  wf_rt *rt = ctx;
  int c = wf_device_count(rt);
  if (c == 0 && err && n)
    snprintf(err, n, "%s", rt->cuda_ctx ? "no CUDA device" : WF_CUDA_NODRIVER);
  return c;
}

/* ---- FFI entry points ------------------------------------------------- */

int wf_cuda_available(wf_rt *rt) {
  return wf_device_count(rt) > 0;
}

int wf_cuda_device_info(wf_rt *rt, int32_t dev, char *name, size_t namelen, int *cc_major,
                        int *cc_minor, size_t *total_mem) {
  wf_cudrv *d = drv_of(rt);
  if (!d) return WEFT_ERRDEVICE;
  if (dev < 0 || dev >= d->ndev) return use_dev(rt, d, dev);
  CUresult r = d->fn.DeviceGetName(name, (int)namelen, dev);
  if (!r) r = d->fn.DeviceGetAttribute(cc_major, CU_ATTR_CC_MAJOR, dev);
  if (!r) r = d->fn.DeviceGetAttribute(cc_minor, CU_ATTR_CC_MINOR, dev);
  if (!r) r = d->fn.DeviceTotalMem(total_mem, dev);
  return r ? cuerr(rt, d, r, "device query") : WEFT_OK;
}

/* A loaded module holds a driver reference, so a kernel collected after
** weft_close can still unload it (as buffers free their memory). */
typedef struct wf_cumod {
  wf_cudrv *d;
  int32_t dev;
  CUmodule m;
} wf_cumod;

int wf_cuda_module_load(wf_rt *rt, int32_t dev, const void *image, size_t size, void **module) {
  (void)size;
  *module = NULL;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  CUmodule m = NULL;
  CUresult r = d->fn.ModuleLoadData(&m, image);
  if (r) return cuerr(rt, d, r, "module load");
  wf_cumod *w = malloc(sizeof *w);
  if (!w) {
    d->fn.ModuleUnload(m);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  w->d = d;
  w->dev = dev;
  w->m = m;
  *module = w;
  return WEFT_OK;
}

/* Unload and drop the driver reference; needs no runtime. */
static CUresult module_free(wf_cumod *w) {
  wf_cudrv *d = w->d;
  CUresult r = 0;
  if (d->dev[w->dev].ctx) {
    d->fn.CtxSetCurrent(d->dev[w->dev].ctx);
    r = d->fn.ModuleUnload(w->m);
  }
  free(w);
  wf_cudrv_release(d);
  return r;
}

int wf_cuda_module_unload(wf_rt *rt, int32_t dev, void *module) {
  (void)dev;
  if (!module) return WEFT_OK;
  wf_cudrv *d = ((wf_cumod *)module)->d;
  CUresult r = module_free(module);
  return r ? cuerr(rt, d, r, "module unload") : WEFT_OK;
}

void wf_cuda_module_release(void *module) {
  if (module) module_free(module);
}

int wf_cuda_module_function(wf_rt *rt, void *module, const char *name, void **fn) {
  *fn = NULL;
  wf_cudrv *d = drv_of(rt);
  if (!d) return WEFT_ERRDEVICE;
  if (!module) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: CUDA kernel '%s': no module", name);
  CUfunction f = NULL;
  CUresult r = d->fn.ModuleGetFunction(&f, ((wf_cumod *)module)->m, name);
  if (r) {
    char e[400];
    wf_cudrv_errstr(d, r, e, sizeof e);
    return wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: CUDA kernel '%s' not found in module: %s", name,
                        e);
  }
  *fn = f;
  return WEFT_OK;
}

/* The launch dimensions as the kernels read them (see wf_cuda.h). */
typedef struct wf_dims {
  int64_t n;
  int64_t dim[4];
  int64_t div[4];
} wf_dims;
_Static_assert(sizeof(wf_dims) == 72, "struct wf_dims of src/cuda/prelude.cuh");

static int make_dims(wf_rt *rt, int ndim, const int64_t *dims, wf_dims *out) {
  if (ndim < 1 || ndim > 4)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: launch dimension count %d (expected 1 to 4)", ndim);
  out->n = 1;
  for (int k = 0; k < 4; k++) {
    out->dim[k] = k < ndim ? dims[k] : 1;
    if (out->dim[k] < 0)
      return wf_rt_seterr(rt, WEFT_ERRARG, "weft: negative launch dimension %lld",
                          (long long)out->dim[k]);
    out->n *= out->dim[k];
  }
  int64_t acc = 1;
  for (int k = 3; k >= 0; k--) {
    out->div[k] = acc;
    acc *= out->dim[k] ? out->dim[k] : 1;
  }
  return WEFT_OK;
}

/* Queue fn over wd on cs (dev's context is current). */
static int launch_in(wf_rt *rt, wf_cudrv *d, void *fn, const wf_dims *wd, int nargs, void **args,
                     int block_size, CUstream cs) {
  if (block_size <= 0) block_size = 256;
  if (block_size > 1024)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: block size %d is larger than 1024", block_size);
  /* Grid-stride loops cover what a capped grid does not. */
  int64_t blocks = (wd->n + block_size - 1) / block_size;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  void *pstack[32];
  void **params = nargs < 32 ? pstack : malloc(sizeof(void *) * (size_t)(nargs + 1));
  if (!params) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  params[0] = (void *)wd;
  for (int i = 0; i < nargs; i++)
    params[i + 1] = args[i];
  CUresult r = d->fn.LaunchKernel(fn, (unsigned)blocks, 1, 1, (unsigned)block_size, 1, 1, 0, cs,
                                  params, NULL);
  if (params != pstack) free(params);
  return r ? cuerr(rt, d, r, "kernel launch") : WEFT_OK;
}

int wf_cuda_launch(wf_rt *rt, int32_t dev, void *fn, int ndim, const int64_t *dims, int nargs,
                   void **args, int block_size, int verify, void *stream) {
  wf_dims wd;
  int st = make_dims(rt, ndim, dims, &wd);
  if (st != WEFT_OK) return st;
  if (wd.n == 0) return WEFT_OK;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_cudev *v = &d->dev[dev];
  CUstream cs = cur_stream(v);
  if (stream) {
    wf_custream *s = stream;
    if (s->dev != dev)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft: the stream is on cuda:%d, but the launch runs on cuda:%d",
                          (int)s->dev, (int)dev);
    cs = s->s;
  }
  if ((st = launch_in(rt, d, fn, &wd, nargs, args, block_size, cs)) != WEFT_OK) return st;
  CUresult r;
  if (verify && !v->capturing && (r = d->fn.StreamSynchronize(cs)) != 0)
    return cuerr(rt, d, r, "kernel execution (verify_cuda)");
  return WEFT_OK;
}

int wf_cuda_launch_raw(wf_rt *rt, int32_t dev, void *fn, int ndim, const int64_t *dims, int nargs,
                       void **args, int block_size, void *custream) {
  wf_dims wd;
  int st = make_dims(rt, ndim, dims, &wd);
  if (st != WEFT_OK || wd.n == 0) return st;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  return launch_in(rt, d, fn, &wd, nargs, args, block_size, custream);
}

int wf_cuda_memset_raw(wf_rt *rt, int32_t dev, void *ptr, size_t nbytes, void *custream) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.MemsetD8Async((CUdeviceptr)(uintptr_t)ptr, 0, nbytes, custream);
  return r ? cuerr(rt, d, r, "memset") : WEFT_OK;
}

int wf_cuda_dtoh_raw(wf_rt *rt, int32_t dev, void *host, const void *ptr, size_t nbytes,
                     void *custream, void *e) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_cuevent *ev = e;
  CUresult r = d->fn.MemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)ptr, nbytes, custream);
  if (!r && ev && !(r = d->fn.EventRecord(ev->e, custream))) ev->recorded = 1;
  return r ? cuerr(rt, d, r, "copy to the host") : WEFT_OK;
}

int wf_cuda_event_done(wf_rt *rt, void *e) {
  wf_cuevent *ev = e;
  if (!ev->recorded) return 1;
  wf_cudrv *d = enter(rt, ev->dev);
  if (!d) return -1;
  CUresult r = d->fn.EventQuery(ev->e);
  if (r == 600) return 0; /* CUDA_ERROR_NOT_READY */
  return r ? (cuerr(rt, d, r, "event query"), -1) : 1;
}

int wf_cuda_enter(wf_rt *rt, int32_t dev, void **stream) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  *stream = cur_stream(&d->dev[dev]);
  return WEFT_OK;
}

int wf_cuda_stream_sync_raw(wf_rt *rt, int32_t dev, void *stream) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.StreamSynchronize(stream);
  return r ? cuerr(rt, d, r, "synchronize of the producer's stream") : WEFT_OK;
}

int wf_cuda_synchronize(wf_rt *rt, int32_t dev) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.StreamSynchronize(cur_stream(&d->dev[dev]));
  if (!r) r = d->fn.CtxSynchronize();
  return r ? cuerr(rt, d, r, "synchronize") : WEFT_OK;
}

int wf_cuda_capture_begin(wf_rt *rt, int32_t dev) {
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_cudev *v = &d->dev[dev];
  if (v->capturing)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: capture_begin: cuda:%d is already capturing",
                        (int)dev);
  v->cap = cur_stream(v);
  pthread_mutex_lock(&d->mu); /* from here on frees wait */
  v->capturing = 1;
  pthread_mutex_unlock(&d->mu);
  CUresult r = d->fn.StreamBeginCapture(v->cap, CU_CAPTURE_MODE_GLOBAL);
  if (r) {
    pthread_mutex_lock(&d->mu);
    v->capturing = 0;
    pthread_mutex_unlock(&d->mu);
    flush_deferred(d, dev);
    return cuerr(rt, d, r, "capture_begin");
  }
  return WEFT_OK;
}

/* A captured graph ready to launch; holds a driver reference. */
typedef struct wf_cugraph {
  wf_cudrv *d;
  int32_t dev;
  CUgraph graph;
  CUgraphExec exec;
} wf_cugraph;

int wf_cuda_capture_end(wf_rt *rt, int32_t dev, void **graph) {
  *graph = NULL;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  wf_cudev *v = &d->dev[dev];
  if (!v->capturing)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: capture_end: no capture in progress on cuda:%d",
                        (int)dev);
  CUgraph g = NULL;
  CUresult r = d->fn.StreamEndCapture(v->cap, &g);
  pthread_mutex_lock(&d->mu);
  v->capturing = 0;
  pthread_mutex_unlock(&d->mu);
  flush_deferred(d, dev);
  if (r) return cuerr(rt, d, r, "capture_end");
  CUgraphExec ex = NULL;
  if ((r = d->fn.GraphInstantiate(&ex, g, 0)) != 0) {
    d->fn.GraphDestroy(g);
    return cuerr(rt, d, r, "graph instantiation");
  }
  wf_cugraph *cg = malloc(sizeof *cg);
  if (!cg) {
    d->fn.GraphExecDestroy(ex);
    d->fn.GraphDestroy(g);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  }
  __atomic_fetch_add(&d->refcount, 1, __ATOMIC_RELAXED);
  cg->d = d;
  cg->dev = dev;
  cg->graph = g;
  cg->exec = ex;
  *graph = cg;
  return WEFT_OK;
}

int wf_cuda_graph_launch(wf_rt *rt, int32_t dev, void *graph) {
  wf_cugraph *cg = graph;
  if (!cg) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: capture_launch: no graph");
  if (dev < 0) dev = cg->dev;
  wf_cudrv *d = enter(rt, dev);
  if (!d) return WEFT_ERRDEVICE;
  CUresult r = d->fn.GraphLaunch(cg->exec, cur_stream(&d->dev[dev]));
  return r ? cuerr(rt, d, r, "graph launch") : WEFT_OK;
}

void wf_cuda_graph_free(wf_rt *rt, void *graph) {
  (void)rt;
  wf_cugraph *cg = graph;
  if (!cg) return;
  wf_cudrv *d = cg->d;
  if (d->dev[cg->dev].ctx) d->fn.CtxSetCurrent(d->dev[cg->dev].ctx);
  d->fn.GraphExecDestroy(cg->exec);
  d->fn.GraphDestroy(cg->graph);
  free(cg);
  wf_cudrv_release(d);
}
