/*
** buffer.c -- refcounted device buffers and the array helpers the Lua layer
** calls: release, strided copy between devices, fill.
*/
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"

/* ---- buffers ---------------------------------------------------------- */

int wf_buffer_new(wf_rt *rt, int32_t device, size_t nbytes, wf_buffer **out) {
  *out = NULL;
  const wf_device_ops *ops = wf_device_ops_for(rt, device);
  if (!ops) return WEFT_ERRDEVICE;
  return ops->buffer_new(rt, device, nbytes, out);
}

/* A wrapped buffer remembers the owner's release function beside the
** header, so the header can be freed after the owner is told. */
typedef struct wrapped {
  wf_buffer b; /* first: a wf_buffer* is a wrapped* */
  void (*user_release)(wf_buffer *b);
} wrapped;

static void wrapped_release(wf_buffer *b) {
  wrapped *w = (wrapped *)b;
  if (w->user_release) w->user_release(b);
  free(w);
}

int wf_buffer_wrap(wf_rt *rt, int32_t device, void *ptr, size_t nbytes,
                   void (*release_fn)(wf_buffer *), void *ctx, wf_buffer **out) {
  *out = NULL;
  wrapped *w = malloc(sizeof *w);
  if (!w) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory wrapping a buffer");
  w->b.refcount = 1;
  w->b.ptr = ptr;
  w->b.nbytes = nbytes;
  w->b.device = device;
  w->b.flags = 0;
  w->b.release = wrapped_release;
  w->b.ctx = ctx;
  w->user_release = release_fn;
  *out = &w->b;
  return WEFT_OK;
}

void wf_buffer_retain(wf_buffer *b) {
  if (b) __atomic_fetch_add(&b->refcount, 1, __ATOMIC_RELAXED);
}

/* acq_rel: the thread that frees sees every write made by the others
** before they dropped their references. */
void wf_buffer_release(wf_buffer *b) {
  if (!b) return;
  if (__atomic_sub_fetch(&b->refcount, 1, __ATOMIC_ACQ_REL) == 0) b->release(b);
}

/* ---- arrays ----------------------------------------------------------- */

void wf_array_release(wf_array *a) {
  if (!a) return;
  wf_buffer *b = a->buf;
  a->buf = NULL;
  a->data = NULL;
  wf_buffer_release(b);
}

int wf_array_is_contiguous(const wf_array *a) {
  int64_t expect = a->elsize;
  for (int d = a->ndim - 1; d >= 0; d--) {
    if (a->shape[d] == 0) return 1;
    if (a->shape[d] != 1 && a->strides[d] != expect) return 0;
    expect *= a->shape[d];
  }
  return 1;
}

/* Reject headers that cannot be walked safely. */
static int check_array(wf_rt *rt, const wf_array *a, const char *fn, const char *which) {
  if (a->ndim < 1 || a->ndim > WF_MAXDIM)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: %s: %s array has %d dimensions (expected 1 to 4)",
                        fn, which, (int)a->ndim);
  if (!a->data && a->size > 0)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: %s: %s array has been released", fn, which);
  return WEFT_OK;
}

/* Byte offsets of the start of row `o` of the outer dimensions (all but the
** last) in two arrays of the same shape. */
static void row_offsets(const wf_array *a, const wf_array *b, int64_t o, int64_t *oa, int64_t *ob) {
  int64_t ra = 0, rb = 0;
  for (int d = a->ndim - 2; d >= 0; d--) {
    int64_t i = o % a->shape[d];
    o /= a->shape[d];
    ra += i * a->strides[d];
    rb += i * b->strides[d];
  }
  *oa = ra;
  *ob = rb;
}

/* The device table that can move data between the two devices: the CUDA
** one if either side is on a GPU. */
static const wf_device_ops *pair_ops(wf_rt *rt, int32_t d1, int32_t d2) {
  return wf_device_ops_for(rt, d1 != WF_DEVICE_CPU ? d1 : d2);
}

int wf_array_copy(wf_rt *rt, wf_array *dst, const wf_array *src) {
  int st;
  if ((st = check_array(rt, dst, "copy", "destination")) != WEFT_OK) return st;
  if ((st = check_array(rt, src, "copy", "source")) != WEFT_OK) return st;
  int same = dst->ndim == src->ndim && dst->size == src->size;
  for (int d = 0; same && d < dst->ndim; d++)
    same = dst->shape[d] == src->shape[d];
  if (!same) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: copy: shapes differ");
  if (dst->elsize != src->elsize)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: copy: element sizes differ (%d and %d bytes)",
                        (int)dst->elsize, (int)src->elsize);
  if (dst->size == 0) return WEFT_OK;
  const wf_device_ops *ops = pair_ops(rt, dst->device, src->device);
  if (!ops) return WEFT_ERRDEVICE;
  size_t es = (size_t)dst->elsize;
  if (wf_array_is_contiguous(dst) && wf_array_is_contiguous(src))
    return ops->copy(rt, dst->device, dst->data, src->device, src->data, (size_t)dst->size * es);
  int last = dst->ndim - 1;
  int64_t n = dst->shape[last];
  int64_t outer = dst->size / n;
  int inner = dst->strides[last] == (int64_t)es && src->strides[last] == (int64_t)es;
  int host = ops == wf_device_cpu();
  for (int64_t o = 0; o < outer; o++) {
    int64_t od, os;
    row_offsets(dst, src, o, &od, &os);
    char *d = (char *)dst->data + od;
    const char *s = (const char *)src->data + os;
    if (inner) {
      if ((st = ops->copy(rt, dst->device, d, src->device, s, (size_t)n * es)) != WEFT_OK)
        return st;
      continue;
    }
    for (int64_t j = 0; j < n; j++) {
      char *dj = d + j * dst->strides[last];
      const char *sj = s + j * src->strides[last];
      if (host)
        memcpy(dj, sj, es);
      else if ((st = ops->copy(rt, dst->device, dj, src->device, sj, es)) != WEFT_OK)
        return st;
    }
  }
  return WEFT_OK;
}

int wf_array_fill(wf_rt *rt, wf_array *dst, const void *value) {
  int st;
  if ((st = check_array(rt, dst, "fill", "destination")) != WEFT_OK) return st;
  if (dst->size == 0) return WEFT_OK;
  const wf_device_ops *ops = wf_device_ops_for(rt, dst->device);
  if (!ops) return WEFT_ERRDEVICE;
  size_t es = (size_t)dst->elsize;
  if (wf_array_is_contiguous(dst))
    return ops->fill(rt, dst->device, dst->data, (size_t)dst->size, value, es);
  int last = dst->ndim - 1;
  int64_t n = dst->shape[last];
  int64_t outer = dst->size / n;
  int inner = dst->strides[last] == (int64_t)es;
  for (int64_t o = 0; o < outer; o++) {
    int64_t od, unused;
    row_offsets(dst, dst, o, &od, &unused);
    char *d = (char *)dst->data + od;
    if (inner) {
      if ((st = ops->fill(rt, dst->device, d, (size_t)n, value, es)) != WEFT_OK) return st;
      continue;
    }
    for (int64_t j = 0; j < n; j++)
      if ((st = ops->fill(rt, dst->device, d + j * dst->strides[last], 1, value, es)) != WEFT_OK)
        return st;
  }
  return WEFT_OK;
}
