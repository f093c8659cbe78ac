/*
** test_capi_emu.c -- the C API with device arrays on the emulated CUDA
** device (ctest runs it through scripts/cuda-emu; without the emulator it
** skips): launches on cuda:0, weft_wrap of a device pointer, DLPack export
** of a cuda array (kDLCUDA) and import of a hand-built kDLCUDA tensor whose
** deleter runs once, and the emulator's counters (no misuse, no leak).
*/
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interop/interop.h"
#include "weft.h"

#include "wtest.h"

typedef struct counts {
  int64_t allocs_live, bytes_live, leaks, misuse, launches, host_compiles, faults;
} counts;

typedef struct emu {
  void *lib;
  int (*stats)(counts *);
  int (*init)(unsigned);
  int (*retain)(void **, int);
  int (*release)(int);
  int (*set_current)(void *);
  int (*alloc)(unsigned long long *, size_t);
  int (*free_)(unsigned long long);
  int (*htod)(unsigned long long, const void *, size_t);
  int (*dtoh)(void *, unsigned long long, size_t);
} emu;

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) fprintf(stderr, "missing %s\n", name);
  return p;
}

#define BIND(field, name)                                                                          \
  do {                                                                                             \
    void *p_ = sym(e->lib, name);                                                                  \
    if (!p_) return -1;                                                                            \
    memcpy(&e->field, &p_, sizeof p_);                                                             \
  } while (0)

static int emu_open(emu *e, const char *path) {
  if (!(e->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return -1;
  BIND(stats, "wf_cuemu_stats");
  BIND(init, "cuInit");
  BIND(retain, "cuDevicePrimaryCtxRetain");
  BIND(release, "cuDevicePrimaryCtxRelease_v2");
  BIND(set_current, "cuCtxSetCurrent");
  BIND(alloc, "cuMemAlloc_v2");
  BIND(free_, "cuMemFree_v2");
  BIND(htod, "cuMemcpyHtoD_v2");
  BIND(dtoh, "cuMemcpyDtoH_v2");
  return 0;
}

/* A kDLCUDA tensor of 4 floats in device memory, with a counting deleter. */
typedef struct devtensor {
  DLManagedTensor m;
  int64_t shape[1];
  int deleted;
} devtensor;

static void del_dev(DLManagedTensor *m) {
  ((devtensor *)m->manager_ctx)->deleted++;
}

static int run(weft_State *W, const char *code) {
  int rc = weft_dostring(W, code);
  if (rc != 0) fprintf(stderr, "lua: %s\n", weft_errmsg(W));
  return rc;
}

static void test_device_arrays(emu *e) {
  counts c0;
  e->stats(&c0);
  void *ctx = NULL;
  CHECK_INT(e->init(0), 0);
  CHECK_INT(e->retain(&ctx, 0), 0);
  e->set_current(ctx);
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return;
  CHECK_INT(run(W, "k = weft.kernel{ x = weft.array(weft.float32), y = weft.array(weft.float32),"
                   "  a = weft.float32, function(x, y, a) local i = weft.tid();"
                   "  y[i] = a * x[i] + y[i] end }\n"
                   "x = weft.array({1, 2, 3, 4}, weft.float32, { device = 'cuda:0' })\n"
                   "y = weft.full(4, 10, weft.float32, { device = 'cuda:0' })\n"
                   "weft.launch(k, 4, { x, y, 2 }, { device = 'cuda:0' })\n"
                   "weft.synchronize()"),
            0);
  /* export: kDLCUDA, device 0, the data readable through the driver */
  DLManagedTensor *m = weft_export_dlpack(W, "y", 0);
  CHECK(m != NULL);
  if (m) {
    CHECK_INT(m->dl_tensor.device.device_type, WF_kDLCUDA);
    CHECK_INT(m->dl_tensor.device.device_id, 0);
    float h[4] = {0};
    e->set_current(ctx);
    CHECK_INT(e->dtoh(h, (unsigned long long)(uintptr_t)m->dl_tensor.data, sizeof h), 0);
    CHECK(h[0] == 12 && h[3] == 18);
  }
  /* import: memory the host allocated on the device */
  devtensor t;
  memset(&t, 0, sizeof t);
  unsigned long long dp = 0;
  float init[4] = {1, 1, 1, 1};
  e->set_current(ctx);
  CHECK_INT(e->alloc(&dp, sizeof init), 0);
  CHECK_INT(e->htod(dp, init, sizeof init), 0);
  t.shape[0] = 4;
  t.m.dl_tensor = (DLTensor){.data = (void *)(uintptr_t)dp,
                             .device = {WF_kDLCUDA, 0},
                             .ndim = 1,
                             .dtype = {WF_kDLFloat, 32, 1},
                             .shape = t.shape,
                             .strides = NULL,
                             .byte_offset = 0};
  t.m.manager_ctx = &t;
  t.m.deleter = del_dev;
  CHECK_INT(weft_import_dlpack(W, "z", &t.m, 0), 0);
  CHECK_INT(run(W, "assert(z.device == 'cuda:0')\n"
                   "weft.launch(k, 4, { x, z, 1 }, { device = 'cuda:0' })\n"
                   "local t = z:totable()\n"
                   "assert(t[1] == 2 and t[4] == 5, table.concat(t, ' '))\n"
                   "z = nil; collectgarbage(); collectgarbage()"),
            0);
  CHECK_INT(t.deleted, 1);
  /* wrap: no copy, the host keeps the memory */
  int64_t shape[1] = {4};
  CHECK_INT(weft_wrap(W, "w", (void *)(uintptr_t)dp, "float32", 1, shape, "cuda:0"), 0);
  CHECK_INT(run(W, "weft.launch(k, 4, { x, w, 1 }, { device = 'cuda:0' })\n"
                   "local t = w:totable()\n"
                   "assert(t[1] == 3 and t[4] == 9, table.concat(t, ' '))\n"
                   "w = nil; collectgarbage()"),
            0);
  /* the C launch API: a global, device memory wrapped as WEFT_ARG_DATA,
  ** a float; launches naming no device go to the current one */
  CHECK_INT(run(W, "weft.set_device('cuda:0')"), 0);
  weft_Arg args[3];
  memset(args, 0, sizeof args);
  args[0].type = WEFT_ARG_GLOBAL;
  args[0].s = "x";
  args[1].type = WEFT_ARG_DATA;
  args[1].p = (void *)(uintptr_t)dp;
  args[1].s = "float32";
  args[1].ndim = 1;
  args[1].shape[0] = 4;
  args[1].device = 0;
  args[2].type = WEFT_ARG_FLOAT;
  args[2].d = 10;
  int64_t dims[1] = {4};
  CHECK_INT(weft_launch(W, "k", 1, dims, 3, args), 0);
  CHECK_INT(run(W, "weft.synchronize()"), 0);
  float w[4] = {0};
  e->set_current(ctx);
  CHECK_INT(e->dtoh(w, dp, sizeof w), 0);
  CHECK(w[0] == 13 && w[3] == 49); /* 3 + 10 * 1, 9 + 10 * 4 */
  weft_Arg out;
  memset(&out, 0, sizeof out);
  CHECK_INT(weft_get(W, "y", &out), 0);
  CHECK_INT(out.type, WEFT_ARG_ARRAY);
  CHECK_INT(out.device, 0);
  CHECK(m && out.p == m->dl_tensor.data);
  weft_unref(W, out.i);
  weft_close(W);
  if (m) m->deleter(m); /* after weft_close: frees the device memory */
  e->set_current(ctx);
  CHECK_INT(e->free_(dp), 0);
  CHECK_INT(e->release(0), 0);
  counts c1;
  e->stats(&c1);
  CHECK_INT((int)(c1.allocs_live - c0.allocs_live), 0);
  CHECK_INT((int)(c1.misuse - c0.misuse), 0);
  CHECK_INT((int)(c1.leaks - c0.leaks), 0);
  CHECK(c1.launches - c0.launches >= 3);
}

int main(void) {
  const char *path = getenv("WEFT_CUDA_EMU_LIB");
  if (!path || !*path || !getenv("WEFT_LIBCUDA")) {
    printf("SKIP: not under scripts/cuda-emu\n");
    return 0;
  }
  emu e;
  memset(&e, 0, sizeof e);
  CHECK(emu_open(&e, path) == 0);
  if (e.lib) test_device_arrays(&e);
  WTEST_DONE();
}
