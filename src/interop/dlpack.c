/*
** dlpack.c -- DLPack export (wf_array -> DLManagedTensor[Versioned]) and
** import (DLManagedTensor[Versioned] -> wf_buffer + wf_array).
*/
#include <stdlib.h>
#include <string.h>

#include "interop/interop.h"
#include "runtime/rt.h"

/* ---- export ----------------------------------------------------------- */

/* One allocation per export: the managed tensor, its shape and strides,
** and the buffer reference it holds. manager_ctx points back to it. */
typedef struct wf_export {
  union {
    DLManagedTensor legacy;
    DLManagedTensorVersioned v;
  } m;
  wf_buffer *buf;
  int64_t shape[WF_MAXDIM + 2];
  int64_t strides[WF_MAXDIM + 2];
} wf_export;

/* Deleters: plain C, no runtime needed, callable from any thread. */
static void export_free(wf_export *e) {
  wf_buffer_release(e->buf);
  free(e);
}
static void export_delete_legacy(DLManagedTensor *m) {
  export_free((wf_export *)m->manager_ctx);
}
static void export_delete_versioned(DLManagedTensorVersioned *m) {
  export_free((wf_export *)m->manager_ctx);
}

/* DLPack device of a weft device ordinal. */
static DLDevice device_of(int32_t dev) {
  DLDevice d;
  d.device_type = dev == WF_DEVICE_CPU ? WF_kDLCPU : WF_kDLCUDA;
  d.device_id = dev == WF_DEVICE_CPU ? 0 : dev;
  return d;
}

/* Fill the shape and element strides of the export from the array (strides
** in bytes -> elements of the scalar type) plus the trailing element dims. */
static int export_layout(wf_rt *rt, const wf_array *a, int bytes, int ntrail, const int64_t *trail,
                         wf_export *e) {
  int64_t inner = 1;
  for (int k = ntrail - 1; k >= 0; k--) {
    e->shape[a->ndim + k] = trail[k];
    e->strides[a->ndim + k] = inner;
    inner *= trail[k];
  }
  if ((int64_t)a->elsize != inner * bytes)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: to_dlpack: element size %d does not match %lld scalars of %d bytes",
                        (int)a->elsize, (long long)inner, bytes);
  for (int d = 0; d < a->ndim; d++) {
    if (a->strides[d] % bytes != 0)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft: to_dlpack: stride %lld bytes of dimension %d is not a whole "
                          "number of elements",
                          (long long)a->strides[d], d);
    e->shape[d] = a->shape[d];
    e->strides[d] = a->strides[d] / bytes;
  }
  return WEFT_OK;
}

int wf_dlpack_export(wf_rt *rt, const wf_array *a, int versioned, int code, int bits, int ntrail,
                     const int64_t *trail, uint64_t flags, void **out) {
  *out = NULL;
  if (a->ndim < 1 || a->ndim > WF_MAXDIM || ntrail < 0 || ntrail > 2)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: to_dlpack: bad array header (%d dimensions)",
                        (int)a->ndim);
  if (!a->data && a->size > 0)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: to_dlpack: the array has been released");
  if (bits <= 0 || bits % 8 != 0)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: to_dlpack: bad scalar width %d bits", bits);
  wf_export *e = calloc(1, sizeof *e);
  if (!e) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: to_dlpack: out of memory");
  int st = export_layout(rt, a, bits / 8, ntrail, trail, e);
  if (st != WEFT_OK) {
    free(e);
    return st;
  }
  DLTensor *t = versioned ? &e->m.v.dl_tensor : &e->m.legacy.dl_tensor;
  t->data = a->data;
  t->device = device_of(a->device);
  t->ndim = a->ndim + ntrail;
  t->dtype.code = (uint8_t)code;
  t->dtype.bits = (uint8_t)bits;
  t->dtype.lanes = 1;
  t->shape = e->shape;
  t->strides = e->strides;
  t->byte_offset = 0;
  e->buf = a->buf;
  wf_buffer_retain(e->buf);
  if (versioned) {
    e->m.v.version.major = WF_DLPACK_MAJOR;
    e->m.v.version.minor = WF_DLPACK_MINOR;
    e->m.v.manager_ctx = e;
    e->m.v.deleter = export_delete_versioned;
    if (a->flags & WF_ARR_READONLY) flags |= WF_DLPACK_FLAG_READ_ONLY;
    e->m.v.flags = flags & (WF_DLPACK_FLAG_READ_ONLY | WF_DLPACK_FLAG_IS_COPIED);
  } else {
    e->m.legacy.manager_ctx = e;
    e->m.legacy.deleter = export_delete_legacy;
  }
  *out = &e->m;
  return WEFT_OK;
}

/* ---- import ----------------------------------------------------------- */

void wf_dlpack_delete(void *managed, int versioned) {
  if (!managed) return;
  if (versioned) {
    DLManagedTensorVersioned *m = managed;
    if (m->deleter) m->deleter(m);
  } else {
    DLManagedTensor *m = managed;
    if (m->deleter) m->deleter(m);
  }
}

/* Buffer release functions: the last reference hands the tensor back. */
static void import_release_legacy(wf_buffer *b) {
  wf_dlpack_delete(b->ctx, 0);
}
static void import_release_versioned(wf_buffer *b) {
  wf_dlpack_delete(b->ctx, 1);
}

/* The weft scalar types in the order of their indices (interop.h). */
const char *const wf_dlpack_scalars[WF_NSCALARS] = {"bool",   "int8",    "int16",   "int32",
                                                    "int64",  "uint8",   "uint16",  "uint32",
                                                    "uint64", "float16", "float32", "float64"};

int wf_dlpack_scalar_index(int code, int bits) {
  int k = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : bits == 64 ? 3 : -1;
  switch (code) {
  case WF_kDLInt: return k >= 0 ? 1 + k : -1;
  case WF_kDLUInt: return k >= 0 ? 5 + k : -1;
  case WF_kDLFloat: return k >= 1 ? 8 + k : -1;
  case WF_kDLBool: return bits == 8 ? 0 : -1;
  default: return -1;
  }
}

static const char *dtype_code_name(int code) {
  switch (code) {
  case WF_kDLInt: return "int";
  case WF_kDLUInt: return "uint";
  case WF_kDLFloat: return "float";
  case WF_kDLOpaqueHandle: return "opaque";
  case WF_kDLBfloat: return "bfloat";
  case WF_kDLComplex: return "complex";
  case WF_kDLBool: return "bool";
  default: return "code";
  }
}

/* The weft device of a DLPack device, or the status with the message. */
static int import_device(wf_rt *rt, DLDevice d, int32_t *dev) {
  switch (d.device_type) {
  case WF_kDLCPU:
  case WF_kDLCUDAHost: *dev = WF_DEVICE_CPU; return WEFT_OK;
  case WF_kDLCUDA:
  case WF_kDLCUDAManaged:
    if (d.device_id < 0)
      return wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: from_dlpack: CUDA device id %d is negative",
                          (int)d.device_id);
    *dev = d.device_id;
    return WEFT_OK;
  default:
    return wf_rt_seterr(rt, WEFT_ERRDEVICE,
                        "weft: from_dlpack: device type %d is not supported (weft takes CPU "
                        "and CUDA memory)",
                        (int)d.device_type);
  }
}

/* ---- validation ----------------------------------------------------------
** Nothing a producer hands over is trusted: every field is checked, and all
** extent arithmetic is done with overflow checks, before any of it is used
** to address memory. The bytes a tensor spans are
**
**   data + byte_offset + sum_d (shape[d] - 1) * stride[d] * scalar_bytes
**
** over negative and positive strides separately (min and max), plus one
** element; each product and sum must fit int64 and the ends must stay
** inside the address space. */

#define FAIL(...) wf_rt_seterr(rt, WEFT_ERRARG, "weft: from_dlpack: " __VA_ARGS__)

/* The tensor inside a managed tensor (the layouts differ in where). */
static const DLTensor *tensor_of(const void *managed, int versioned) {
  return versioned ? &((const DLManagedTensorVersioned *)managed)->dl_tensor
                   : &((const DLManagedTensor *)managed)->dl_tensor;
}

/* Shape, strides and offset: sizes, extents and the address range. */
static int validate_layout(wf_rt *rt, const DLTensor *t) {
  int64_t sb = t->dtype.bits / 8, size = 1, compact = sb, lo = 0, hi = 0, nonzero = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d], sbytes = compact, ext;
    if (n < 0) return FAIL("dimension %d has negative size %lld", d, (long long)n);
    /* an empty tensor's other sizes must still multiply without overflow:
    ** weft computes with shapes (views, reshapes, launch dims) */
    if (__builtin_mul_overflow(size, n, &size) ||
        (n > 0 && __builtin_mul_overflow(nonzero, n, &nonzero)))
      return FAIL("the element count overflows 64 bits at dimension %d (size %lld)", d,
                  (long long)n);
    if (t->strides && __builtin_mul_overflow(t->strides[d], sb, &sbytes))
      return FAIL("stride %lld of dimension %d overflows 64 bits in bytes",
                  (long long)t->strides[d], d);
    if (!t->strides && __builtin_mul_overflow(compact, n, &compact))
      return FAIL("the compact strides overflow 64 bits at dimension %d (size %lld)", d,
                  (long long)n);
    if (n > 1 &&
        (__builtin_mul_overflow(n - 1, sbytes, &ext) ||
         (ext < 0 ? __builtin_add_overflow(lo, ext, &lo) : __builtin_add_overflow(hi, ext, &hi))))
      return FAIL("the extent of dimension %d (size %lld, stride %lld) overflows 64 bits", d,
                  (long long)n, (long long)(t->strides ? t->strides[d] : sbytes / sb));
  }
  int64_t span;
  if (__builtin_mul_overflow(size, sb, &span))
    return FAIL("%lld elements of %lld bytes overflow 64 bits", (long long)size, (long long)sb);
  if (t->byte_offset > (uint64_t)INT64_MAX)
    return FAIL("byte_offset %llu is out of range", (unsigned long long)t->byte_offset);
  if (size == 0) return WEFT_OK; /* nothing is ever addressed */
  if (!t->data) return FAIL("data is NULL for a tensor of %lld elements", (long long)size);
  uintptr_t base, below = (uintptr_t)0 - (uintptr_t)lo, above = (uintptr_t)hi + (uintptr_t)sb - 1;
  if (__builtin_sub_overflow(hi, lo, &span) || __builtin_add_overflow(span, sb, &span) ||
      __builtin_add_overflow((uintptr_t)t->data, (uintptr_t)t->byte_offset, &base) ||
      below > base || UINTPTR_MAX - base < above)
    return FAIL("data %p + byte_offset %llu with these strides runs outside the address space",
                t->data, (unsigned long long)t->byte_offset);
  if (base % (uintptr_t)sb != 0)
    return FAIL("data %p + byte_offset %llu is not aligned to its %d-byte scalars", t->data,
                (unsigned long long)t->byte_offset, (int)sb);
  return WEFT_OK;
}

int wf_dlpack_validate(wf_rt *rt, const void *managed, int versioned) {
  if (!managed) return wf_rt_seterr(rt, WEFT_ERRARG, "weft: from_dlpack: NULL tensor");
  if (versioned) {
    const DLManagedTensorVersioned *m = managed;
    if (m->version.major != WF_DLPACK_MAJOR)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft: from_dlpack: DLPack version %u.%u is not supported (weft "
                          "reads major version %d)",
                          m->version.major, m->version.minor, WF_DLPACK_MAJOR);
  }
  const DLTensor *t = tensor_of(managed, versioned);
  if (t->ndim < 0 || t->ndim > WF_MAXDIM + 2)
    return FAIL("ndim %d is out of range (weft arrays have 1 to 4 dimensions)", (int)t->ndim);
  if (t->ndim > 0 && !t->shape)
    return FAIL("shape is NULL for a tensor of %d dimensions", (int)t->ndim);
  if (t->dtype.lanes != 1)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: from_dlpack: vector dtypes (lanes = %d) are not supported",
                        (int)t->dtype.lanes);
  if (wf_dlpack_scalar_index(t->dtype.code, t->dtype.bits) < 0)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: from_dlpack: dtype %s%d is not supported",
                        dtype_code_name(t->dtype.code), (int)t->dtype.bits);
  int32_t dev;
  int st = import_device(rt, t->device, &dev);
  if (st != WEFT_OK) return st;
  return validate_layout(rt, t);
}
#undef FAIL

/* Check the trailing element dimensions and return the element's number of
** scalars; they must match trail[] and be compact. */
static int check_trailing(wf_rt *rt, const DLTensor *t, int ntrail, const int64_t *trail) {
  int base = t->ndim - ntrail;
  int64_t inner = 1;
  for (int k = ntrail - 1; k >= 0; k--) {
    int64_t n = t->shape[base + k];
    if (n != trail[k])
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft: from_dlpack: dimension %d has size %lld, the element type "
                          "needs %lld",
                          base + k, (long long)n, (long long)trail[k]);
    if (t->strides && n > 1 && t->strides[base + k] != inner)
      return wf_rt_seterr(rt, WEFT_ERRARG,
                          "weft: from_dlpack: cannot share a layout whose element components "
                          "are not contiguous (dimension %d has stride %lld, expected %lld)",
                          base + k, (long long)t->strides[base + k], (long long)inner);
    inner *= n;
  }
  return WEFT_OK;
}

/* Validate the tensor and fill the array header (buffer not yet made). */
static int import_header(wf_rt *rt, const DLTensor *t, int ntrail, const int64_t *trail,
                         wf_array *a, int *scalar) {
  int st;
  if (t->dtype.lanes != 1)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: from_dlpack: vector dtypes (lanes = %d) are not supported",
                        (int)t->dtype.lanes);
  *scalar = wf_dlpack_scalar_index(t->dtype.code, t->dtype.bits);
  if (*scalar < 0)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: from_dlpack: dtype %s%d is not supported",
                        dtype_code_name(t->dtype.code), (int)t->dtype.bits);
  if ((st = import_device(rt, t->device, &a->device)) != WEFT_OK) return st;
  if (t->ndim < 0 || ntrail < 0 || ntrail > 2 || t->ndim < ntrail)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: from_dlpack: a tensor of %d dimensions cannot hold elements of "
                        "%d dimensions",
                        (int)t->ndim, ntrail);
  if ((st = check_trailing(rt, t, ntrail, trail)) != WEFT_OK) return st;
  int nd = t->ndim - ntrail;
  if (nd > WF_MAXDIM)
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: from_dlpack: %d dimensions (weft arrays have 1 to 4)", nd);
  int64_t sb = t->dtype.bits / 8, inner = 1;
  for (int k = 0; k < ntrail; k++)
    inner *= trail[k];
  a->elsize = (int32_t)(sb * inner);
  a->ndim = nd > 0 ? nd : 1; /* 0-d tensors become one-element arrays */
  a->shape[0] = 1;
  a->strides[0] = a->elsize;
  int64_t compact = a->elsize;
  for (int d = nd - 1; d >= 0; d--) {
    a->shape[d] = t->shape[d];
    a->strides[d] = t->strides ? t->strides[d] * sb : compact;
    /* used only without strides, where validate_layout checked it */
    if (__builtin_mul_overflow(compact, t->shape[d], &compact)) compact = 0;
  }
  for (int d = a->ndim; d < WF_MAXDIM; d++)
    a->shape[d] = 1, a->strides[d] = 0;
  /* An empty tensor's other dimensions may be anything validate_layout let
  ** through (their product need not fit, data may be NULL): it addresses no
  ** memory, so it keeps its data pointer as given and no offset is added. */
  a->size = 1;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] == 0) a->size = 0;
  for (int d = 0; a->size && d < a->ndim; d++)
    a->size *= a->shape[d];
  a->data = a->size ? (char *)t->data + t->byte_offset : (char *)t->data;
  return WEFT_OK;
}

/* The bytes the array spans, and its lowest address. */
static void span_of(const wf_array *a, char **lo, size_t *nbytes) {
  int64_t min = 0, max = 0;
  if (a->size == 0) { /* nothing addressed; extents may not even fit */
    *lo = (char *)a->data;
    *nbytes = 0;
    return;
  }
  for (int d = 0; d < a->ndim; d++) {
    int64_t ext = (a->shape[d] - 1) * a->strides[d];
    if (ext < 0)
      min += ext;
    else
      max += ext;
  }
  *lo = (char *)a->data + min;
  *nbytes = a->size == 0 ? 0 : (size_t)(max - min + a->elsize);
}

int wf_dlpack_header(wf_rt *rt, void *managed, int versioned, int ntrail, const int64_t *trail,
                     wf_array *out, int *scalar) {
  memset(out, 0, sizeof *out);
  *scalar = -1;
  int st = wf_dlpack_validate(rt, managed, versioned);
  if (st != WEFT_OK) return st;
  const DLTensor *t = tensor_of(managed, versioned);
  int readonly =
      versioned && (((DLManagedTensorVersioned *)managed)->flags & WF_DLPACK_FLAG_READ_ONLY) != 0;
  st = import_header(rt, t, ntrail, trail, out, scalar);
  if (st != WEFT_OK) {
    memset(out, 0, sizeof *out);
    return st;
  }
  out->flags = readonly ? WF_ARR_READONLY : 0;
  return WEFT_OK;
}

int wf_dlpack_import_k(wf_rt *rt, void *managed, int versioned, int ntrail, const int64_t *trail,
                       wf_array *out, int *scalar) {
  int st = wf_dlpack_header(rt, managed, versioned, ntrail, trail, out, scalar);
  wf_buffer *buf = NULL;
  if (st == WEFT_OK) {
    char *lo;
    size_t nbytes;
    span_of(out, &lo, &nbytes);
    st =
        wf_buffer_wrap(rt, out->device, lo, nbytes,
                       versioned ? import_release_versioned : import_release_legacy, managed, &buf);
  }
  if (st != WEFT_OK) {
    wf_dlpack_delete(managed, versioned);
    memset(out, 0, sizeof *out);
    return st;
  }
  out->buf = buf;
  return WEFT_OK;
}

int wf_dlpack_import(wf_rt *rt, void *managed, int versioned, int ntrail, const int64_t *trail,
                     wf_array *out, const char **scalar) {
  int k = -1;
  int st = wf_dlpack_import_k(rt, managed, versioned, ntrail, trail, out, &k);
  *scalar = st == WEFT_OK ? wf_dlpack_scalars[k] : NULL;
  return st;
}
