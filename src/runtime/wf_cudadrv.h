/*
** wf_cudadrv.h -- CUDA devices through the Driver API (device_cuda.c):
** libcuda loaded with dlopen; devices, memory, modules, launches, streams,
** events and graphs (FFI), and the "cuda" device table of the runtime
** (wf_cuda_attach, device.h).
**
** Nothing links against CUDA: libweft loads on machines without a driver.
** The kernels it launches come from src/cuda (CUDA C -> PTX/CUBIN); their
** parameters follow the ABI described in src/cuda/wf_cuda.h.
*/
#ifndef WF_CUDADRV_H
#define WF_CUDADRV_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/wf_rt.h"

typedef struct wf_cudrv wf_cudrv; /* loaded libcuda, refcounted */

/* Load libcuda.so.1 (or $WEFT_LIBCUDA) and call cuInit. Returns NULL with a
** message when there is no driver; never fails loudly. */
WF_INTERNAL wf_cudrv *wf_cudrv_open(char *err, size_t errsize);
WF_INTERNAL void wf_cudrv_release(wf_cudrv *d);
/* Number of devices (0 without a driver; err is then set). */
WF_INTERNAL int wf_cuda_device_count(void *ctx, char *err, size_t n);
/* Make dev's context current on this thread and give its current stream
** (a CUstream), for libraries that queue work there (cuBLAS, blas.c). */
WF_INTERNAL int wf_cuda_enter(wf_rt *rt, int32_t dev, void **stream);
/* "CUDA_ERROR_X: message" for a CUresult. */
WF_INTERNAL void wf_cudrv_errstr(wf_cudrv *d, int res, char *buf, size_t n);

/* The message every use of a cuda device gives without a driver. */
#define WF_CUDA_NODRIVER                                                                           \
  "weft: CUDA is not available: libcuda.so.1 could not be loaded (no NVIDIA driver)"

/* ---- FFI: modules, launches, streams, graphs (declared in cdef.lua) ---- */
WF_FFI int wf_cuda_available(wf_rt *rt);
WF_FFI int wf_cuda_device_info(wf_rt *rt, int32_t dev, char *name, size_t namelen, int *cc_major,
                               int *cc_minor, size_t *total_mem);
WF_FFI int wf_cuda_module_load(wf_rt *rt, int32_t dev, const void *image, size_t size,
                               void **module);
WF_FFI int wf_cuda_module_unload(wf_rt *rt, int32_t dev, void *module);
/* The same without a runtime (a finalizer): each module holds a driver
** reference, so it may outlive weft_close. */
WF_FFI void wf_cuda_module_release(void *module);
WF_FFI int wf_cuda_module_function(wf_rt *rt, void *module, const char *name, void **fn);
/* Launch fn over dims[0..ndim) with args (one pointer per kernel
** parameter, the wf_dims first is made here). block_size 0 = 256.
** stream: a stream of dev from wf_cuda_stream_new, or NULL for the
** device's current stream. */
WF_FFI int wf_cuda_launch(wf_rt *rt, int32_t dev, void *fn, int ndim, const int64_t *dims,
                          int nargs, void **args, int block_size, int verify, void *stream);
/* The same on a CUstream weft did not make (XLA's, src/interop/xla_ffi.c):
** queued, never waited for. */
WF_INTERNAL int wf_cuda_launch_raw(wf_rt *rt, int32_t dev, void *fn, int ndim, const int64_t *dims,
                                   int nargs, void **args, int block_size, void *custream);
/* Zero nbytes of dev's memory at ptr, queued on such a CUstream. */
WF_INTERNAL int wf_cuda_memset_raw(wf_rt *rt, int32_t dev, void *ptr, size_t nbytes,
                                   void *custream);
/* Copy nbytes from dev's memory at ptr to page-locked host memory, queued
** on such a CUstream, then record event e (from wf_cuda_event_new; NULL:
** none) there. */
WF_INTERNAL int wf_cuda_dtoh_raw(wf_rt *rt, int32_t dev, void *host, const void *ptr, size_t nbytes,
                                 void *custream, void *e);
/* 1 when the work before event e's last record is done (or it was never
** recorded), 0 while it is pending, -1 on failure (the message set). */
WF_INTERNAL int wf_cuda_event_done(wf_rt *rt, void *e);
WF_FFI int wf_cuda_synchronize(wf_rt *rt, int32_t dev);
/* Wait for a CUstream that someone else made (1 and 2: the legacy and
** per-thread default streams), e.g. the stream of __cuda_array_interface__. */
WF_FFI int wf_cuda_stream_sync_raw(wf_rt *rt, int32_t dev, void *stream);
WF_FFI int wf_cuda_capture_begin(wf_rt *rt, int32_t dev);
WF_FFI int wf_cuda_capture_end(wf_rt *rt, int32_t dev, void **graph);
WF_FFI int wf_cuda_graph_launch(wf_rt *rt, int32_t dev, void *graph);
WF_FFI void wf_cuda_graph_free(wf_rt *rt, void *graph);
/* Streams and events: refcounted handles, each holding a driver reference
** (usable after weft_close until released). A device's current stream
** (wf_cuda_set_stream; NULL = its own default stream) takes launches,
** captures and graph launches that name no stream. */
WF_FFI int wf_cuda_stream_new(wf_rt *rt, int32_t dev, void **out);
WF_FFI void wf_cuda_stream_release(void *s);
WF_FFI int wf_cuda_stream_synchronize(wf_rt *rt, void *s);
WF_FFI int wf_cuda_stream_wait_event(wf_rt *rt, void *s, void *e);
WF_FFI int wf_cuda_set_stream(wf_rt *rt, int32_t dev, void *s);
WF_FFI int wf_cuda_event_new(wf_rt *rt, int32_t dev, int timing, void **out);
WF_FFI void wf_cuda_event_release(void *e);
/* s NULL (record, wait): the own stream of the event's device */
WF_FFI int wf_cuda_event_record(wf_rt *rt, void *e, void *s);
WF_FFI int wf_cuda_event_synchronize(wf_rt *rt, void *e);
WF_FFI int wf_cuda_event_elapsed(wf_rt *rt, void *start, void *end, float *ms);
/* Page-locked host memory (device -1, flags WF_BUF_PINNED). */
WF_FFI int wf_cuda_host_alloc(wf_rt *rt, size_t nbytes, wf_buffer **out);

#endif
