/*
** device.h -- the device abstraction: one table of operations per kind of
** device. "cpu" (device_cpu.c) is always present; a CUDA backend plugs in by
** defining wf_cuda_attach, which fills rt->cuda with its table (and
** rt->cuda_ctx / rt->cuda_free) and returns the device count.
**
** Every operation returns a status and sets the runtime message on failure.
** Buffers made by buffer_new carry their own release function, which must
** not need the runtime: a buffer can outlive it (DLPack exports).
*/
#ifndef WF_DEVICE_H
#define WF_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/wf_rt.h"

typedef struct wf_device_ops {
  const char *kind; /* "cpu", "cuda" */
  /* Number of devices of this kind. */
  int (*count)(wf_rt *rt);
  /* A new buffer of nbytes (>= 1) on device dev, refcount 1. */
  int (*buffer_new)(wf_rt *rt, int32_t dev, size_t nbytes, wf_buffer **out);
  /* Copy nbytes between any two devices this backend can reach (the host
  ** and its own devices). */
  int (*copy)(wf_rt *rt, int32_t dst_dev, void *dst, int32_t src_dev, const void *src,
              size_t nbytes);
  /* Fill count contiguous elements of elsize bytes with *value. */
  int (*fill)(wf_rt *rt, int32_t dev, void *dst, size_t count, const void *value, size_t elsize);
} wf_device_ops;

/* The host's table. */
WF_INTERNAL const wf_device_ops *wf_device_cpu(void);
/* The table serving device dev (a CUDA ordinal or WF_DEVICE_CPU); NULL with
** the message set if the device is not available. */
WF_INTERNAL const wf_device_ops *wf_device_ops_for(wf_rt *rt, int32_t dev);
/* Defined by the CUDA backend (weak here): attach rt->cuda, return the
** number of devices (0 without a driver) or a negative value on failure. */
WF_INTERNAL int wf_cuda_attach(wf_rt *rt);

#endif
