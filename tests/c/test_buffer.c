/*
** test_buffer.c -- buffers and array helpers of the runtime (src/runtime):
** refcounts, aligned allocation, wrapped memory, strided copy, fill,
** devices and thread settings.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"
#include "wtest.h"

static int released; /* counts wrapped-buffer releases */
static void count_release(wf_buffer *b) {
  (void)b;
  released++;
}

/* A compact row-major header over data. */
static wf_array make(void *data, int ndim, const int64_t *shape, int elsize) {
  wf_array a;
  memset(&a, 0, sizeof a);
  a.data = data;
  a.ndim = ndim;
  a.elsize = elsize;
  a.device = WF_DEVICE_CPU;
  a.size = 1;
  int64_t stride = elsize;
  for (int d = ndim - 1; d >= 0; d--) {
    a.shape[d] = shape[d];
    a.strides[d] = stride;
    stride *= shape[d];
    a.size *= shape[d];
  }
  return a;
}

static void test_runtime(void) {
  wf_rt *rt = wf_rt_new();
  CHECK(rt != NULL);
  CHECK_INT(wf_abi_version(), WEFT_ABI_VERSION);
  CHECK(wf_rt_num_threads(rt) >= 1);
  CHECK_INT(wf_rt_set_num_threads(rt, 3), WEFT_OK);
  CHECK_INT(wf_rt_num_threads(rt), 3);
  CHECK_INT(wf_rt_set_num_threads(rt, 100000), WEFT_ERRARG);
  CHECK_STR(wf_rt_errmsg(rt), "weft: thread count 100000 is too large");
  CHECK_INT(wf_rt_set_num_threads(rt, 0), WEFT_OK);
  CHECK(wf_rt_num_threads(rt) >= 1);
  CHECK_STR(wf_device_name(rt, WF_DEVICE_CPU), "cpu");
  CHECK_STR(wf_device_name(rt, 2), "cuda:2");
  int n = wf_device_count(rt);
  CHECK(n >= 0);
  if (n == 0) {
    wf_buffer *b = (wf_buffer *)1;
    CHECK_INT(wf_buffer_new(rt, 0, 16, &b), WEFT_ERRDEVICE);
    CHECK(b == NULL);
    CHECK_STR(wf_rt_errmsg(rt), "weft: device 'cuda:0': CUDA is not available: libcuda.so.1 could "
                                "not be loaded (no NVIDIA driver)");
  }
  wf_rt_free(rt);
  wf_rt_free(NULL);
}

static void test_alloc_refcount(void) {
  wf_rt *rt = wf_rt_new();
  for (size_t n = 0; n < 300; n += 37) {
    wf_buffer *b = NULL;
    CHECK_INT(wf_buffer_new(rt, WF_DEVICE_CPU, n, &b), WEFT_OK);
    CHECK(b && b->ptr);
    CHECK_INT((uintptr_t)b->ptr % WF_ALIGN, 0);
    CHECK_INT(b->refcount, 1);
    CHECK_INT(b->nbytes, n);
    memset(b->ptr, 0xab, n);
    wf_buffer_retain(b);
    CHECK_INT(b->refcount, 2);
    wf_buffer_release(b);
    CHECK_INT(b->refcount, 1);
    wf_buffer_release(b); /* frees; ASan checks it is freed once */
  }
  CHECK_INT(wf_buffer_new(rt, WF_DEVICE_CPU, SIZE_MAX - 8, &(wf_buffer *){NULL}), WEFT_ERRMEM);
  CHECK_HAS(wf_rt_errmsg(rt), "out of memory");
  wf_buffer_release(NULL);
  wf_rt_free(rt);
}

/* A buffer outlives the runtime that made it (DLPack exports). */
static void test_outlives_runtime(void) {
  wf_rt *rt = wf_rt_new();
  wf_buffer *b = NULL;
  CHECK_INT(wf_buffer_new(rt, WF_DEVICE_CPU, 64, &b), WEFT_OK);
  wf_rt_free(rt);
  memset(b->ptr, 1, 64);
  wf_buffer_release(b);
}

static void test_wrap_and_array_release(void) {
  wf_rt *rt = wf_rt_new();
  float mem[4] = {1, 2, 3, 4};
  wf_buffer *b = NULL;
  released = 0;
  CHECK_INT(wf_buffer_wrap(rt, WF_DEVICE_CPU, mem, sizeof mem, count_release, mem, &b), WEFT_OK);
  CHECK(b->ptr == mem && b->ctx == mem);
  int64_t shape[1] = {4};
  wf_array a = make(mem, 1, shape, 4), v = a;
  a.buf = b;
  v.buf = b;
  wf_buffer_retain(b); /* the view's reference */
  wf_array_release(&a);
  CHECK(a.buf == NULL && a.data == NULL);
  wf_array_release(&a); /* idempotent */
  CHECK_INT(released, 0);
  wf_array_release(&v);
  CHECK_INT(released, 1);
  /* no release function: only the header is freed */
  CHECK_INT(wf_buffer_wrap(rt, WF_DEVICE_CPU, mem, sizeof mem, NULL, NULL, &b), WEFT_OK);
  wf_buffer_release(b);
  CHECK_INT(mem[3], 4);
  wf_rt_free(rt);
}

static void test_contiguous(void) {
  int64_t shape[3] = {2, 3, 4};
  wf_array a = make(NULL, 3, shape, 8);
  CHECK(wf_array_is_contiguous(&a));
  a.strides[2] = 16;
  CHECK(!wf_array_is_contiguous(&a));
  a = make(NULL, 3, (int64_t[]){2, 1, 4}, 8);
  a.strides[1] = 999; /* size-1 dimensions do not matter */
  CHECK(wf_array_is_contiguous(&a));
}

static void test_copy_strided(void) {
  wf_rt *rt = wf_rt_new();
  /* src: a transposed view of a 3x4 int32 matrix (shape 4x3, strides 4, 16) */
  int32_t m[12];
  for (int i = 0; i < 12; i++)
    m[i] = i;
  wf_array src = make(m, 2, (int64_t[]){4, 3}, 4);
  src.strides[0] = 4;
  src.strides[1] = 16;
  int32_t out[12] = {0};
  wf_array dst = make(out, 2, (int64_t[]){4, 3}, 4);
  CHECK_INT(wf_array_copy(rt, &dst, &src), WEFT_OK);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      CHECK_INT(out[i * 3 + j], m[j * 4 + i]);
  /* into a strided destination with contiguous rows: every other row of 4x3 */
  int32_t big[24];
  memset(big, 0xff, sizeof big);
  wf_array half = make(big, 2, (int64_t[]){4, 3}, 4);
  half.strides[0] = 24;
  CHECK_INT(wf_array_copy(rt, &half, &dst), WEFT_OK);
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 3; j++)
      CHECK_INT(big[i * 6 + j], out[i * 3 + j]);
    for (int j = 3; j < 6; j++)
      CHECK_INT(big[i * 6 + j], -1);
  }
  /* 4-D with a reversed dimension (negative stride) */
  double d4[16], e4[16];
  for (int i = 0; i < 16; i++)
    d4[i] = i;
  wf_array s4 = make(d4, 4, (int64_t[]){2, 2, 2, 2}, 8);
  s4.data = d4 + 8;
  s4.strides[0] = -64;
  wf_array t4 = make(e4, 4, (int64_t[]){2, 2, 2, 2}, 8);
  CHECK_INT(wf_array_copy(rt, &t4, &s4), WEFT_OK);
  for (int i = 0; i < 8; i++) {
    CHECK_INT(e4[i], d4[8 + i]);
    CHECK_INT(e4[8 + i], d4[i]);
  }
  /* mismatches */
  wf_array small = make(out, 1, (int64_t[]){3}, 4);
  CHECK_INT(wf_array_copy(rt, &small, &src), WEFT_ERRARG);
  CHECK_STR(wf_rt_errmsg(rt), "weft: copy: shapes differ");
  wf_array wide = make(d4, 2, (int64_t[]){4, 3}, 8);
  CHECK_INT(wf_array_copy(rt, &wide, &src), WEFT_ERRARG);
  CHECK_STR(wf_rt_errmsg(rt), "weft: copy: element sizes differ (8 and 4 bytes)");
  wf_array bad = src;
  bad.ndim = 5;
  CHECK_INT(wf_array_copy(rt, &dst, &bad), WEFT_ERRARG);
  CHECK_STR(wf_rt_errmsg(rt), "weft: copy: source array has 5 dimensions (expected 1 to 4)");
  wf_array gone = dst;
  gone.data = NULL;
  CHECK_INT(wf_array_copy(rt, &gone, &src), WEFT_ERRARG);
  CHECK_STR(wf_rt_errmsg(rt), "weft: copy: destination array has been released");
  wf_rt_free(rt);
}

static void test_fill(void) {
  wf_rt *rt = wf_rt_new();
  /* 12-byte elements (vec3f) over a buffer of 100 elements */
  wf_buffer *b = NULL;
  CHECK_INT(wf_buffer_new(rt, WF_DEVICE_CPU, 100 * 12, &b), WEFT_OK);
  wf_array a = make(b->ptr, 1, (int64_t[]){100}, 12);
  a.buf = b;
  float v[3] = {1.5f, -2.0f, 3.0f};
  CHECK_INT(wf_array_fill(rt, &a, v), WEFT_OK);
  float *f = b->ptr;
  int ok = 1;
  for (int i = 0; i < 100; i++)
    ok &= f[3 * i] == 1.5f && f[3 * i + 1] == -2.0f && f[3 * i + 2] == 3.0f;
  CHECK(ok);
  /* one-byte pattern path */
  uint8_t bytes[37];
  wf_array u = make(bytes, 1, (int64_t[]){37}, 1);
  uint8_t seven = 7;
  CHECK_INT(wf_array_fill(rt, &u, &seven), WEFT_OK);
  ok = 1;
  for (int i = 0; i < 37; i++)
    ok &= bytes[i] == 7;
  CHECK(ok);
  /* strided: every other column of a 3x4 int16 matrix */
  int16_t m[12] = {0};
  wf_array cols = make(m, 2, (int64_t[]){3, 2}, 2);
  cols.strides[0] = 8;
  cols.strides[1] = 4;
  int16_t nine = 9;
  CHECK_INT(wf_array_fill(rt, &cols, &nine), WEFT_OK);
  for (int i = 0; i < 12; i++)
    CHECK_INT(m[i], i % 2 == 0 ? 9 : 0);
  /* empty arrays are fine */
  wf_array e = make(NULL, 1, (int64_t[]){0}, 4);
  CHECK_INT(wf_array_fill(rt, &e, v), WEFT_OK);
  wf_array_release(&a);
  wf_rt_free(rt);
}

int main(void) {
  test_runtime();
  test_alloc_refcount();
  test_outlives_runtime();
  test_wrap_and_array_release();
  test_contiguous();
  test_copy_strided();
  test_fill();
  WTEST_DONE();
}
