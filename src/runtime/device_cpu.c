/*
** device_cpu.c -- the host device: 64-byte-aligned allocation, memcpy and
** pattern fill.
*/
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"

static int cpu_count(wf_rt *rt) {
  (void)rt;
  return 1;
}

/* Frees the block and the header; needs no runtime, so it may run after
** weft_close (a DLPack consumer holding the last reference). */
static void cpu_release(wf_buffer *b) {
  free(b->ptr);
  free(b);
}

static int cpu_buffer_new(wf_rt *rt, int32_t dev, size_t nbytes, wf_buffer **out) {
  (void)dev;
  wf_buffer *b = malloc(sizeof *b);
  void *p = NULL;
  /* Round up so the block covers whole cache lines (vector loads past the
  ** last element stay inside it). */
  size_t n = (nbytes + WF_ALIGN - 1) / WF_ALIGN * WF_ALIGN;
  if (n < nbytes || !b || posix_memalign(&p, WF_ALIGN, n ? n : WF_ALIGN) != 0) {
    free(b);
    return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory allocating %zu bytes on cpu", nbytes);
  }
  b->refcount = 1;
  b->ptr = p;
  b->nbytes = nbytes;
  b->device = WF_DEVICE_CPU;
  b->flags = 0;
  b->release = cpu_release;
  b->ctx = NULL;
  *out = b;
  return WEFT_OK;
}

static int cpu_copy(wf_rt *rt, int32_t dst_dev, void *dst, int32_t src_dev, const void *src,
                    size_t nbytes) {
  (void)rt;
  (void)dst_dev;
  (void)src_dev;
  if (nbytes) memmove(dst, src, nbytes);
  return WEFT_OK;
}

/* Write the pattern once, then double the filled prefix with memcpy: log2
** steps of large copies instead of count small ones. */
static int cpu_fill(wf_rt *rt, int32_t dev, void *dst, size_t count, const void *value,
                    size_t elsize) {
  (void)rt;
  (void)dev;
  if (count == 0) return WEFT_OK;
  unsigned char *d = dst;
  const unsigned char *v = value;
  size_t total = count * elsize;
  int same = 1;
  for (size_t i = 1; i < elsize; i++)
    same &= v[i] == v[0];
  if (same) {
    memset(d, v[0], total);
    return WEFT_OK;
  }
  memcpy(d, v, elsize);
  size_t done = elsize;
  while (done < total) {
    size_t n = done <= total - done ? done : total - done;
    memcpy(d + done, d, n);
    done += n;
  }
  return WEFT_OK;
}

static const wf_device_ops cpu_ops = {
    "cpu", cpu_count, cpu_buffer_new, cpu_copy, cpu_fill,
};

const wf_device_ops *wf_device_cpu(void) {
  return &cpu_ops;
}
