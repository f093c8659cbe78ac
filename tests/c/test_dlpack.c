/*
** test_dlpack.c -- DLPack export and import: layouts, flags, byte_offset,
** ownership (deleters run exactly once, exports outlive weft_close) and the
** errors of bad tensors.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop/interop.h"
#include "runtime/rt.h"
#include "interop/state.h"
#include "weft.h"

#include "wtest.h"

/* ---- a producer: tensors made here, with deleters that count ---------- */

typedef struct producer {
  DLManagedTensorVersioned v;
  DLManagedTensor legacy;
  int64_t shape[6], strides[6];
  float data[64];
  int deleted; /* times a deleter ran */
} producer;

static void del_versioned(DLManagedTensorVersioned *m) {
  ((producer *)m->manager_ctx)->deleted++;
}
static void del_legacy(DLManagedTensor *m) {
  ((producer *)m->manager_ctx)->deleted++;
}

/* A float32 CPU tensor of the given shape (compact unless strides given). */
static void make_tensor(producer *p, int ndim, const int64_t *shape, const int64_t *strides) {
  memset(p, 0, sizeof *p);
  for (int k = 0; k < 64; k++)
    p->data[k] = (float)k;
  for (int k = 0; k < ndim; k++) {
    p->shape[k] = shape[k];
    if (strides) p->strides[k] = strides[k];
  }
  DLTensor t = {.data = p->data,
                .device = {WF_kDLCPU, 0},
                .ndim = ndim,
                .dtype = {WF_kDLFloat, 32, 1},
                .shape = p->shape,
                .strides = strides ? p->strides : NULL,
                .byte_offset = 0};
  p->v.version.major = 1;
  p->v.version.minor = 0;
  p->v.manager_ctx = p;
  p->v.deleter = del_versioned;
  p->v.dl_tensor = t;
  p->legacy.dl_tensor = t;
  p->legacy.manager_ctx = p;
  p->legacy.deleter = del_legacy;
}

/* ---- buffers whose release we can see --------------------------------- */

typedef struct owned {
  float data[32];
  int released;
} owned;

static void owned_release(wf_buffer *b) {
  ((owned *)b->ctx)->released++;
}

/* A 2-D float32 array (rows x cols, compact) over o->data. */
static wf_array owned_array(wf_rt *rt, owned *o, int rows, int cols) {
  wf_array a;
  memset(&a, 0, sizeof a);
  memset(o, 0, sizeof *o);
  for (int k = 0; k < 32; k++)
    o->data[k] = (float)k * 0.5f;
  wf_buffer *b = NULL;
  CHECK(wf_buffer_wrap(rt, WF_DEVICE_CPU, o->data, sizeof o->data, owned_release, o, &b) == 0);
  a.data = o->data;
  a.buf = b;
  a.ndim = 2;
  a.shape[0] = rows, a.shape[1] = cols;
  a.strides[0] = cols * 4, a.strides[1] = 4;
  a.size = rows * cols;
  a.elsize = 4;
  a.device = WF_DEVICE_CPU;
  return a;
}

/* ---- export ------------------------------------------------------------ */

static void test_export_layouts(wf_rt *rt) {
  owned o;
  wf_array a = owned_array(rt, &o, 3, 4);
  void *p = NULL;
  CHECK(wf_dlpack_export(rt, &a, 0, WF_kDLFloat, 32, 0, NULL, 0, &p) == 0);
  DLManagedTensor *m = p;
  CHECK(m->dl_tensor.data == o.data);
  CHECK(m->dl_tensor.ndim == 2);
  CHECK(m->dl_tensor.shape[0] == 3 && m->dl_tensor.shape[1] == 4);
  CHECK(m->dl_tensor.strides[0] == 4 && m->dl_tensor.strides[1] == 1); /* elements */
  CHECK(m->dl_tensor.byte_offset == 0);
  CHECK(m->dl_tensor.device.device_type == WF_kDLCPU && m->dl_tensor.device.device_id == 0);
  CHECK(m->dl_tensor.dtype.code == WF_kDLFloat && m->dl_tensor.dtype.bits == 32 &&
        m->dl_tensor.dtype.lanes == 1);

  /* versioned, read-only array, as 4 vec3... no: as rows of 2 x vec2 */
  a.flags |= WF_ARR_READONLY;
  a.shape[1] = 2, a.elsize = 8, a.strides[0] = 16, a.strides[1] = 8, a.size = 6;
  int64_t trail[1] = {2};
  CHECK(wf_dlpack_export(rt, &a, 1, WF_kDLFloat, 32, 1, trail, WF_DLPACK_FLAG_IS_COPIED, &p) == 0);
  DLManagedTensorVersioned *v = p;
  CHECK(v->version.major == 1);
  CHECK(v->flags == (WF_DLPACK_FLAG_READ_ONLY | WF_DLPACK_FLAG_IS_COPIED));
  CHECK(v->dl_tensor.ndim == 3);
  CHECK(v->dl_tensor.shape[0] == 3 && v->dl_tensor.shape[1] == 2 && v->dl_tensor.shape[2] == 2);
  CHECK(v->dl_tensor.strides[0] == 4 && v->dl_tensor.strides[1] == 2 &&
        v->dl_tensor.strides[2] == 1);

  /* the exports hold the buffer: dropping the array frees nothing */
  wf_array_release(&a);
  CHECK(o.released == 0);
  m->deleter(m);
  CHECK(o.released == 0);
  v->deleter(v);
  CHECK(o.released == 1);
}

static void test_export_errors(wf_rt *rt) {
  owned o;
  wf_array a = owned_array(rt, &o, 2, 2);
  void *p = (void *)&o;
  int64_t trail[1] = {3};
  /* element size 4 is not 3 floats */
  CHECK(wf_dlpack_export(rt, &a, 1, WF_kDLFloat, 32, 1, trail, 0, &p) != 0);
  CHECK(p == NULL);
  CHECK_HAS(wf_rt_errmsg(rt), "element size");
  a.strides[0] = 6; /* not a whole number of float32 */
  CHECK(wf_dlpack_export(rt, &a, 0, WF_kDLFloat, 32, 0, NULL, 0, &p) != 0);
  CHECK_HAS(wf_rt_errmsg(rt), "not a whole number");
  wf_array_release(&a);
  CHECK(o.released == 1);
}

/* ---- import ------------------------------------------------------------ */

static void test_import_roundtrip(wf_rt *rt) {
  owned o;
  wf_array a = owned_array(rt, &o, 4, 2);
  void *p = NULL;
  CHECK(wf_dlpack_export(rt, &a, 1, WF_kDLFloat, 32, 0, NULL, 0, &p) == 0);
  wf_array_release(&a);
  wf_array b;
  const char *scalar = NULL;
  int64_t trail[1] = {2};
  CHECK(wf_dlpack_import(rt, p, 1, 1, trail, &b, &scalar) == 0); /* as 4 vec2 */
  CHECK(strcmp(scalar, "float32") == 0);
  CHECK(b.data == o.data && b.ndim == 1 && b.shape[0] == 4 && b.strides[0] == 8);
  CHECK(b.elsize == 8 && b.size == 4 && b.flags == 0 && b.device == WF_DEVICE_CPU);
  CHECK(o.released == 0);
  wf_buffer_retain(b.buf); /* a second user (a view) */
  wf_buffer *keep = b.buf;
  wf_array_release(&b);
  CHECK(o.released == 0);
  wf_buffer_release(keep); /* the last user: the export's deleter, then ours */
  CHECK(o.released == 1);
}

static void test_import_layouts(wf_rt *rt) {
  producer p;
  const char *scalar;
  wf_array a;
  /* NULL strides = compact; legacy; byte_offset honoured */
  int64_t shape[2] = {3, 5};
  make_tensor(&p, 2, shape, NULL);
  p.legacy.dl_tensor.byte_offset = 8;
  CHECK(wf_dlpack_import(rt, &p.legacy, 0, 0, NULL, &a, &scalar) == 0);
  CHECK(a.data == (char *)p.data + 8);
  CHECK(a.strides[0] == 20 && a.strides[1] == 4 && a.size == 15);
  CHECK(((float *)a.data)[0] == 2.0f);
  CHECK(p.deleted == 0);
  wf_array_release(&a);
  CHECK(p.deleted == 1);

  /* strides in elements become bytes; READ_ONLY becomes the array flag */
  int64_t strides[2] = {1, 3}; /* a transposed view */
  make_tensor(&p, 2, shape, strides);
  p.v.flags = WF_DLPACK_FLAG_READ_ONLY;
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.strides[0] == 4 && a.strides[1] == 12);
  CHECK(a.flags & WF_ARR_READONLY);
  CHECK(a.buf->nbytes == (size_t)((2 * 4 + 4 * 12) + 4));
  wf_array_release(&a);
  CHECK(p.deleted == 1);

  /* a 0-d tensor is a one-element array */
  make_tensor(&p, 0, shape, NULL);
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.ndim == 1 && a.shape[0] == 1 && a.size == 1);
  wf_array_release(&a);
  CHECK(p.deleted == 1);

  /* other dtypes map to weft scalar names */
  make_tensor(&p, 1, shape, NULL);
  p.v.dl_tensor.dtype = (DLDataType){WF_kDLUInt, 8, 1};
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(strcmp(scalar, "uint8") == 0 && a.elsize == 1);
  wf_array_release(&a);
  make_tensor(&p, 1, shape, NULL);
  p.v.dl_tensor.dtype = (DLDataType){WF_kDLBool, 8, 1};
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(strcmp(scalar, "bool") == 0);
  wf_array_release(&a);
  make_tensor(&p, 1, shape, NULL);
  p.v.dl_tensor.dtype = (DLDataType){WF_kDLFloat, 16, 1};
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(strcmp(scalar, "float16") == 0);
  wf_array_release(&a);
  CHECK(p.deleted == 1);
}

/* Import must fail with `sub` in the message and run the deleter once. */
static void expect_import_error(wf_rt *rt, producer *p, int versioned, int ntrail,
                                const int64_t *trail, const char *sub) {
  wf_array a;
  const char *scalar;
  p->deleted = 0;
  void *m = versioned ? (void *)&p->v : (void *)&p->legacy;
  CHECK(wf_dlpack_import(rt, m, versioned, ntrail, trail, &a, &scalar) != 0);
  CHECK(a.buf == NULL && a.data == NULL);
  CHECK(p->deleted == 1);
  CHECK_HAS(wf_rt_errmsg(rt), sub);
}

static void test_import_errors(wf_rt *rt) {
  producer p;
  int64_t shape[5] = {2, 2, 2, 2, 2};
  make_tensor(&p, 2, shape, NULL);
  p.v.version.major = 2;
  p.v.version.minor = 3;
  expect_import_error(rt, &p, 1, 0, NULL, "DLPack version 2.3 is not supported");

  make_tensor(&p, 2, shape, NULL);
  p.v.dl_tensor.dtype = (DLDataType){WF_kDLBfloat, 16, 1};
  expect_import_error(rt, &p, 1, 0, NULL, "dtype bfloat16 is not supported");
  p.legacy.dl_tensor.dtype = (DLDataType){WF_kDLComplex, 64, 1};
  expect_import_error(rt, &p, 0, 0, NULL, "dtype complex64 is not supported");
  p.legacy.dl_tensor.dtype = (DLDataType){WF_kDLFloat, 32, 4};
  expect_import_error(rt, &p, 0, 0, NULL, "lanes = 4");

  make_tensor(&p, 5, shape, NULL);
  expect_import_error(rt, &p, 1, 0, NULL, "5 dimensions (weft arrays have 1 to 4)");

  make_tensor(&p, 2, shape, NULL);
  p.v.dl_tensor.device.device_type = WF_kDLVulkan;
  expect_import_error(rt, &p, 1, 0, NULL, "device type 7 is not supported");

  int64_t trail3[1] = {3};
  make_tensor(&p, 2, shape, NULL);
  expect_import_error(rt, &p, 1, 1, trail3, "dimension 1 has size 2, the element type needs 3");

  /* vec2 components that are not adjacent cannot be shared */
  int64_t trail2[1] = {2};
  int64_t strides[2] = {1, 2};
  make_tensor(&p, 2, shape, strides);
  expect_import_error(rt, &p, 1, 1, trail2, "not contiguous");

  /* 5-d folded into 4-d with a vec2 element is fine */
  make_tensor(&p, 5, shape, NULL);
  wf_array a;
  const char *scalar;
  p.deleted = 0;
  CHECK(wf_dlpack_import(rt, &p.v, 1, 1, trail2, &a, &scalar) == 0);
  CHECK(a.ndim == 4 && a.elsize == 8 && a.strides[3] == 8 && a.strides[0] == 64);
  wf_array_release(&a);
  CHECK(p.deleted == 1);
}

/* Malformed tensors of issue 10 (each was a crash or silent aliasing):
** every one is rejected with a message naming the fault, and the deleter
** runs exactly once, legacy and versioned alike. */
static void test_import_validation(wf_rt *rt) {
  producer p;
  int64_t shape[2] = {2, 3};
  for (int v = 0; v <= 1; v++) {
    make_tensor(&p, 2, shape, NULL);
    DLTensor *t = v ? &p.v.dl_tensor : &p.legacy.dl_tensor;
    t->shape = NULL;
    expect_import_error(rt, &p, v, 0, NULL, "shape is NULL for a tensor of 2 dimensions");

    make_tensor(&p, 2, shape, NULL);
    t->ndim = -1;
    expect_import_error(rt, &p, v, 0, NULL, "ndim -1 is out of range");
    t->ndim = 1000;
    expect_import_error(rt, &p, v, 0, NULL, "ndim 1000 is out of range");

    int64_t big[2] = {(int64_t)1 << 62, 1};
    make_tensor(&p, 2, shape, big);
    t = v ? &p.v.dl_tensor : &p.legacy.dl_tensor;
    expect_import_error(rt, &p, v, 0, NULL, "stride 4611686018427387904 of dimension 0 overflows");
    int64_t mid[2] = {(int64_t)1 << 59, 1}; /* fits in bytes, the extent does not */
    int64_t tall[2] = {64, 3};
    make_tensor(&p, 2, tall, mid);
    expect_import_error(rt, &p, v, 0, NULL, "the extent of dimension 0");

    make_tensor(&p, 2, shape, NULL);
    t->byte_offset = (uint64_t)1 << 63;
    expect_import_error(rt, &p, v, 0, NULL, "byte_offset 9223372036854775808 is out of range");
    t->byte_offset = UINT64_MAX - 3;
    expect_import_error(rt, &p, v, 0, NULL, "is out of range");
    t->data = (void *)(UINTPTR_MAX - 63); /* data + offset wraps around */
    t->byte_offset = 128;
    expect_import_error(rt, &p, v, 0, NULL, "runs outside the address space");
    int64_t back[2] = {-4, 1}; /* row 1 of 2 would start below address 0 */
    make_tensor(&p, 2, shape, back);
    t->data = NULL;
    t->byte_offset = 0;
    expect_import_error(rt, &p, v, 0, NULL, "data is NULL");
    t->data = (void *)(uintptr_t)8;
    expect_import_error(rt, &p, v, 0, NULL, "runs outside the address space");

    make_tensor(&p, 2, shape, NULL);
    t->data = NULL;
    expect_import_error(rt, &p, v, 0, NULL, "data is NULL for a tensor of 6 elements");

    make_tensor(&p, 2, shape, NULL);
    p.shape[1] = -3;
    expect_import_error(rt, &p, v, 0, NULL, "dimension 1 has negative size -3");
    p.shape[0] = p.shape[1] = (int64_t)1 << 40;
    expect_import_error(rt, &p, v, 0, NULL, "the element count overflows 64 bits");
    p.shape[0] = 0, p.shape[1] = (int64_t)1 << 62; /* empty, but 2^62 * 4 bytes per row */
    expect_import_error(rt, &p, v, 0, NULL, "the compact strides overflow 64 bits");

    make_tensor(&p, 2, shape, NULL);
    t->byte_offset = 2; /* float32 at an odd address */
    expect_import_error(rt, &p, v, 0, NULL, "is not aligned to its 4-byte scalars");

    make_tensor(&p, 2, shape, NULL);
    t->device = (DLDevice){WF_kDLCUDA, -2};
    expect_import_error(rt, &p, v, 0, NULL, "CUDA device id -2 is negative");
    t->device = (DLDevice){99, 0};
    expect_import_error(rt, &p, v, 0, NULL, "device type 99 is not supported");
    make_tensor(&p, 2, shape, NULL);
    t->dtype = (DLDataType){WF_kDLFloat, 0, 1};
    expect_import_error(rt, &p, v, 0, NULL, "dtype float0 is not supported");
    t->dtype = (DLDataType){200, 32, 1};
    expect_import_error(rt, &p, v, 0, NULL, "dtype code32 is not supported");
    t->dtype = (DLDataType){WF_kDLFloat, 32, 0};
    expect_import_error(rt, &p, v, 0, NULL, "lanes = 0");
  }
  /* a versioned header with major 0 is no versioned tensor */
  make_tensor(&p, 2, shape, NULL);
  p.v.version.major = 0;
  expect_import_error(rt, &p, 1, 0, NULL, "DLPack version 0.0 is not supported");

  /* what is legal still imports: empty tensors with a NULL data pointer,
  ** negative strides inside the buffer, a 0-d tensor without a shape */
  wf_array a;
  const char *scalar;
  make_tensor(&p, 2, shape, NULL);
  p.shape[0] = 0;
  p.v.dl_tensor.data = NULL;
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.size == 0);
  wf_array_release(&a);
  /* empty tensors address nothing (found by fuzz_dlpack): NULL data with a
  ** byte_offset, huge strides or sizes beside the 0 are no arithmetic on
  ** the pointer, and sizes whose product overflows are still refused */
  make_tensor(&p, 2, shape, NULL);
  p.shape[1] = 0;
  p.v.dl_tensor.data = NULL;
  p.v.dl_tensor.byte_offset = 64;
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.size == 0 && a.data == NULL);
  wf_array_release(&a);
  int64_t wide[2] = {(int64_t)1 << 62, 0}, zero_strides[2] = {0, 1};
  make_tensor(&p, 2, wide, zero_strides);
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.size == 0 && a.shape[0] == (int64_t)1 << 62 && a.shape[1] == 0);
  wf_array_release(&a);
  int64_t over[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
  make_tensor(&p, 3, over, NULL);
  expect_import_error(rt, &p, 1, 0, NULL, "the element count overflows 64 bits");
  int64_t neg[1] = {-1};
  int64_t four[1] = {4};
  make_tensor(&p, 1, four, neg);
  p.v.dl_tensor.byte_offset = 3 * sizeof(float);
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.size == 4 && ((float *)a.data)[0] == 3.0f && a.strides[0] == -4);
  CHECK(a.buf && a.buf->ptr == (void *)p.data && a.buf->nbytes == 16);
  wf_array_release(&a);
  make_tensor(&p, 0, NULL, NULL);
  p.v.dl_tensor.shape = NULL;
  p.deleted = 0;
  CHECK(wf_dlpack_import(rt, &p.v, 1, 0, NULL, &a, &scalar) == 0);
  CHECK(a.size == 1 && a.ndim == 1);
  wf_array_release(&a);
  CHECK(p.deleted == 1);
  /* the validator alone keeps no ownership */
  CHECK(wf_dlpack_validate(rt, NULL, 1) != 0);
  CHECK_HAS(wf_rt_errmsg(rt), "NULL tensor");
  make_tensor(&p, 2, shape, NULL);
  p.v.dl_tensor.shape = NULL;
  CHECK(wf_dlpack_validate(rt, &p.v, 1) != 0 && p.deleted == 0);
  p.v.dl_tensor.shape = p.shape;
  CHECK(wf_dlpack_validate(rt, &p.v, 1) == 0 && p.deleted == 0);
}

/* ---- through weft_State ------------------------------------------------ */

static void test_state_export_outlives_close(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return;
  CHECK(weft_dostring(W, "x = weft.zeros({4}, weft.vec3); for i = 0, 3 do "
                         "x[i] = weft.vec3(i, 2*i, 3*i) end") == 0);
  DLManagedTensorVersioned *v = weft_export_dlpack(W, "x", 1);
  DLManagedTensor *m = weft_export_dlpack(W, "x", 0);
  CHECK(v != NULL && m != NULL);
  if (!v || !m) {
    fprintf(stderr, "export: %s\n", weft_errmsg(W));
    weft_close(W);
    return;
  }
  CHECK(v->dl_tensor.ndim == 2 && v->dl_tensor.shape[0] == 4 && v->dl_tensor.shape[1] == 3);
  CHECK(v->dl_tensor.strides[0] == 3 && v->dl_tensor.strides[1] == 1);
  CHECK(v->flags == 0);
  CHECK(m->dl_tensor.data == v->dl_tensor.data);
  /* the runtime and the Lua state go away; the tensors stay valid */
  CHECK(weft_dostring(W, "x = nil; collectgarbage(); collectgarbage()") == 0);
  weft_close(W);
  float *f = v->dl_tensor.data;
  CHECK(f[3 * 3 + 1] == 6.0f && f[2 * 3 + 2] == 6.0f);
  m->deleter(m);
  CHECK(f[3] == 1.0f);
  v->deleter(v);
}

static void test_state_import(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return;
  producer p;
  int64_t shape[2] = {4, 3};
  make_tensor(&p, 2, shape, NULL);
  CHECK(weft_import_dlpack(W, "y", &p.v, 1) == 0);
  CHECK(weft_dostring(W, "assert(y.dtype == weft.float32 and y.shape[1] == 4 and y.shape[2] == 3)\n"
                         "assert(y[1][2] == 5)\n"
                         "y[2][0] = -1") == 0);
  CHECK(p.data[6] == -1.0f);
  CHECK(weft_dostring(W, "y = nil; collectgarbage(); collectgarbage()") == 0);
  CHECK(p.deleted == 1);

  /* with an element type: 4 vec3 */
  make_tensor(&p, 2, shape, NULL);
  weft_Arg a;
  memset(&a, 0, sizeof a);
  a.type = WEFT_ARG_DLPACK_VERSIONED;
  a.p = &p.v;
  a.s = "vec3";
  CHECK(weft_set(W, "v", &a) == 0);
  CHECK(weft_dostring(W, "assert(v.dtype == weft.vec3 and #v == 4, tostring(v))\n"
                         "assert(v[1].y == 4)") == 0);
  /* the array is alive as long as Lua holds it, also in a view */
  CHECK(weft_dostring(W, "row = weft.zeros({2, 2}); v = nil; collectgarbage()") == 0);
  CHECK(p.deleted == 1);

  /* read-only imports carry the flag */
  make_tensor(&p, 1, shape, NULL);
  p.v.flags = WF_DLPACK_FLAG_READ_ONLY;
  CHECK(weft_import_dlpack(W, "r", &p.v, 1) == 0);
  CHECK(weft_dostring(W, "assert(bit.band(r.h.flags, 4) ~= 0)") == 0);

  /* a versioned export of a read-only array says so */
  DLManagedTensorVersioned *e = weft_export_dlpack(W, "r", 1);
  CHECK(e && (e->flags & WF_DLPACK_FLAG_READ_ONLY));
  if (e) e->deleter(e);

  /* failures: message, status, deleter ran once */
  producer q;
  make_tensor(&q, 1, shape, NULL);
  q.v.dl_tensor.dtype = (DLDataType){WF_kDLBfloat, 16, 1};
  CHECK(weft_import_dlpack(W, "z", &q.v, 1) != 0);
  CHECK_HAS(weft_errmsg(W), "bfloat16 is not supported");
  CHECK(q.deleted == 1);
  make_tensor(&q, 1, shape, NULL);
  a.p = &q.v;
  a.s = "no_such_type";
  CHECK(weft_set(W, "z", &a) != 0);
  CHECK_HAS(weft_errmsg(W), "no_such_type");
  CHECK(q.deleted == 1);
  make_tensor(&q, 2, shape, NULL);
  a.s = "vec3d"; /* float64 elements over float32 data */
  CHECK(weft_set(W, "z", &a) != 0);
  CHECK_HAS(weft_errmsg(W), "float32 values, vec3d needs float64");
  CHECK(q.deleted == 1);
  make_tensor(&q, 1, shape, NULL);
  CHECK(weft_import_dlpack(W, "bad.path", &q.legacy, 0) != 0); /* 'bad' is nil */
  CHECK_HAS(weft_errmsg(W), "'bad' is not a table");
  CHECK(weft_dostring(W, "collectgarbage(); collectgarbage()") == 0); /* the orphan array */
  CHECK(q.deleted == 1);
  CHECK(weft_import_dlpack(NULL, "x", &q.legacy, 0) != 0);
  CHECK(q.deleted == 2);

  /* exports of things that are not arrays */
  CHECK(weft_export_dlpack(W, "nothing", 0) == NULL);
  CHECK_HAS(weft_errmsg(W), "only arrays can be exported");

  /* closing the state drops the last references: r's deleter runs */
  CHECK(p.deleted == 0);
  weft_close(W);
  CHECK(p.deleted == 1);
}

/* weft_wrap: the host's buffer seen and written by Lua, no copy. */
static void test_wrap(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return;
  float pos[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[1] = {2};
  CHECK(weft_wrap(W, "pos", pos, "vec3", 1, shape, "cpu") == 0);
  CHECK(weft_dostring(W, "assert(#pos == 2 and pos[1].z == 6); pos[0] = weft.vec3(7, 8, 9)") == 0);
  CHECK(pos[0] == 7 && pos[2] == 9);
  CHECK(weft_wrap(W, "bad", pos, "vec9", 1, shape, NULL) != 0);
  CHECK_HAS(weft_errmsg(W), "unknown dtype 'vec9'");
  CHECK(weft_wrap(W, "bad", pos, "float32", 5, shape, NULL) == WEFT_ERRARG);
  CHECK(weft_wrap(W, "bad", pos, "float32", 1, shape, "tpu") == WEFT_ERRARG);
  CHECK_HAS(weft_errmsg(W), "unknown device 'tpu'");
  /* export of wrapped memory views the host buffer */
  DLManagedTensor *m = weft_export_dlpack(W, "pos", 0);
  CHECK(m && m->dl_tensor.data == pos && m->dl_tensor.shape[1] == 3);
  if (m) m->deleter(m);
  weft_close(W);
}

/* The header-only import of the launch fast path: validates and fills the
** header, but makes no buffer and never deletes the tensor. */
static void test_header_only(wf_rt *rt) {
  CHECK(wf_dlpack_scalar_index(WF_kDLFloat, 32) == 10);
  CHECK(strcmp(wf_dlpack_scalars[wf_dlpack_scalar_index(WF_kDLUInt, 16)], "uint16") == 0);
  CHECK(strcmp(wf_dlpack_scalars[wf_dlpack_scalar_index(WF_kDLBool, 8)], "bool") == 0);
  CHECK(wf_dlpack_scalar_index(WF_kDLFloat, 8) == -1);
  CHECK(wf_dlpack_scalar_index(WF_kDLBfloat, 16) == -1);

  static producer p;
  int64_t shape[2] = {4, 3};
  make_tensor(&p, 2, shape, NULL);
  p.v.flags = WF_DLPACK_FLAG_READ_ONLY;
  wf_array a;
  int k = -1;
  CHECK(wf_dlpack_header(rt, &p.v, 1, 1, (int64_t[]){3, 0}, &a, &k) == WEFT_OK);
  CHECK(k == 10 && a.buf == NULL && a.data == p.data && a.ndim == 1 && a.shape[0] == 4);
  CHECK(a.elsize == 12 && a.strides[0] == 12 && (a.flags & WF_ARR_READONLY));
  CHECK(p.deleted == 0);

  p.v.dl_tensor.dtype.code = WF_kDLComplex;
  CHECK(wf_dlpack_header(rt, &p.v, 1, 0, NULL, &a, &k) == WEFT_ERRARG);
  CHECK_HAS(wf_rt_errmsg(rt), "dtype complex32 is not supported");
  CHECK(p.deleted == 0 && a.data == NULL && k == -1);

  /* the owning import hands the tensor back at the last release */
  p.v.dl_tensor.dtype.code = WF_kDLFloat;
  CHECK(wf_dlpack_import_k(rt, &p.legacy, 0, 0, NULL, &a, &k) == WEFT_OK);
  CHECK(k == 10 && a.buf != NULL && a.ndim == 2 && p.deleted == 0);
  wf_array_release(&a);
  CHECK(p.deleted == 1);
}

int main(void) {
  wf_rt *rt = wf_rt_new();
  test_header_only(rt);
  test_export_layouts(rt);
  test_export_errors(rt);
  test_import_roundtrip(rt);
  test_import_layouts(rt);
  test_import_errors(rt);
  test_import_validation(rt);
  wf_rt_free(rt);
  test_state_export_outlives_close();
  test_state_import();
  test_wrap();
  WTEST_DONE();
}
