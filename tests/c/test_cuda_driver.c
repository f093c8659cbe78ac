/*
** test_cuda_driver.c -- the Driver API loader on a machine without a driver:
** no device, clear messages on every cuda entry point, nothing linked
** against libcuda; the toolkit's stub library (forced with WEFT_LIBCUDA)
** fails cuInit with CUDA_ERROR_STUB_LIBRARY, which reaches the message.
** On a machine with a GPU the first part checks the device count instead.
*/
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/rt.h"
#include "runtime/wf_cudadrv.h"
#include "wtest.h"

static int have_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != NULL;
}

static void test_no_driver(void) {
  wf_rt *rt = wf_rt_new();
  CHECK(rt != NULL);
  CHECK_INT(wf_device_count(rt), 0);
  CHECK_INT(wf_cuda_available(rt), 0);
  char err[256];
  CHECK_INT(wf_cuda_device_count(rt, err, sizeof err), 0);
  CHECK_STR(err, WF_CUDA_NODRIVER);
  CHECK_INT(wf_cuda_synchronize(rt, 0), WEFT_ERRDEVICE);
  CHECK_STR(wf_rt_errmsg(rt), WF_CUDA_NODRIVER);
  void *mod = (void *)1, *graph = (void *)1;
  CHECK_INT(wf_cuda_module_load(rt, 0, "", 1, &mod), WEFT_ERRDEVICE);
  CHECK(mod == NULL);
  CHECK_STR(wf_rt_errmsg(rt), WF_CUDA_NODRIVER);
  CHECK_INT(wf_cuda_capture_begin(rt, 0), WEFT_ERRDEVICE);
  CHECK_INT(wf_cuda_capture_end(rt, 0, &graph), WEFT_ERRDEVICE);
  CHECK(graph == NULL);
  int64_t dims[1] = {10};
  CHECK_INT(wf_cuda_launch(rt, 0, NULL, 1, dims, 0, NULL, 0, 0, NULL), WEFT_ERRDEVICE);
  /* streams, events, pinned memory: the same message, nothing allocated */
  void *st = (void *)1, *ev = (void *)1;
  CHECK_INT(wf_cuda_stream_new(rt, 0, &st), WEFT_ERRDEVICE);
  CHECK(st == NULL);
  CHECK_STR(wf_rt_errmsg(rt), WF_CUDA_NODRIVER);
  CHECK_INT(wf_cuda_event_new(rt, 0, 1, &ev), WEFT_ERRDEVICE);
  CHECK(ev == NULL);
  CHECK_INT(wf_cuda_set_stream(rt, 0, NULL), WEFT_ERRDEVICE);
  CHECK_INT(wf_cuda_stream_synchronize(rt, NULL), WEFT_ERRARG);
  CHECK_INT(wf_cuda_event_record(rt, NULL, NULL), WEFT_ERRARG);
  float ms = -1;
  CHECK_INT(wf_cuda_event_elapsed(rt, NULL, NULL, &ms), WEFT_ERRARG);
  CHECK(ms == 0);
  wf_cuda_stream_release(NULL);
  wf_cuda_event_release(NULL);
  wf_buffer *pb = (wf_buffer *)1;
  CHECK_INT(wf_cuda_host_alloc(rt, 64, &pb), WEFT_ERRDEVICE);
  CHECK(pb == NULL);
  CHECK_STR(wf_rt_errmsg(rt), WF_CUDA_NODRIVER);
  /* buffers on cuda:0 go through the runtime's device table */
  wf_buffer *b = (wf_buffer *)1;
  CHECK(wf_buffer_new(rt, 0, 64, &b) != WEFT_OK);
  CHECK(b == NULL);
  CHECK_HAS(wf_rt_errmsg(rt), "cuda:0");
  /* the host still works */
  CHECK_INT(wf_buffer_new(rt, WF_DEVICE_CPU, 64, &b), WEFT_OK);
  wf_buffer_release(b);
  wf_rt_free(rt);
}

static void test_stub_library(void) {
  const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0) {
    printf("SKIP stub: %s not found\n", stub);
    return;
  }
  setenv("WEFT_LIBCUDA", stub, 1);
  char err[512];
  wf_cudrv *d = wf_cudrv_open(err, sizeof err);
  CHECK(d == NULL);
  CHECK_STR(err, "weft: CUDA is not available: CUDA_ERROR_STUB_LIBRARY (CUresult 34)");
  wf_rt *rt = wf_rt_new();
  CHECK_INT(wf_device_count(rt), 0);
  CHECK_INT(wf_cuda_synchronize(rt, 0), WEFT_ERRDEVICE);
  CHECK_HAS(wf_rt_errmsg(rt), "CUDA_ERROR_STUB_LIBRARY");
  wf_rt_free(rt);
  unsetenv("WEFT_LIBCUDA");
}

static void test_errstr(void) {
  char buf[128];
  wf_cudrv_errstr(NULL, 700, buf, sizeof buf);
  CHECK_STR(buf, "CUDA_ERROR_ILLEGAL_ADDRESS (CUresult 700)");
  wf_cudrv_errstr(NULL, 12345, buf, sizeof buf);
  CHECK_STR(buf, "CUDA_ERROR_12345: unknown CUDA error");
}

int main(void) {
  if (have_driver()) {
    printf("driver present: checking enumeration only\n");
    wf_rt *rt = wf_rt_new();
    CHECK(wf_device_count(rt) >= 0);
    wf_rt_free(rt);
  } else {
    test_no_driver();
    test_stub_library();
  }
  test_errstr();
  WTEST_DONE();
}
