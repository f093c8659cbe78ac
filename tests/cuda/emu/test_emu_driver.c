/*
** test_emu_driver.c -- the emulated CUDA device's own checks, through the
** Driver API and NVRTC entry points it exports (no weft): a kernel compiled
** by the NVRTC pass-through runs; kernelParams are checked; copies out of
** bounds, double frees and leaks at context destroy are reported; a missing
** event wait between streams reads stale data; calls a capture forbids fail
** and invalidate it; injected faults fail once. Run by ctest through
** scripts/cuda-emu (WEFT_CUDA_EMU_LIB); skips without it.
*/
#define _XOPEN_SOURCE 700 /* nftw */
#include <dlfcn.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wtest.h"

typedef unsigned long long dptr;
typedef struct counts {
  int64_t allocs_live, bytes_live, leaks, misuse, launches, host_compiles, faults;
} counts;

static void *lib;

/* The entry point `name` as a function pointer of type T. */
#define FN(T, name) ((T)dlsym(lib, name))
#define CU(name, ...) FN(int (*)(), #name)(__VA_ARGS__)

static counts stats(void) {
  counts c;
  FN(int (*)(counts *), "wf_cuemu_stats")(&c);
  return c;
}
static const char *last(void) {
  return FN(const char *(*)(void), "wf_cuemu_last")();
}

static const char *src = "extern \"C\" __global__ void twice(float *p, int n) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  if (i < n) p[i] = 2.0f * p[i];\n"
                         "}\n";

/* PTX of src from the pass-through (malloc'd), or NULL. */
static char *compile(void) {
  void *prog = NULL;
  const char *opts[] = {"--gpu-architecture=compute_86"};
  size_t n = 0;
  if (CU(nvrtcCreateProgram, &prog, src, "twice.cu", 0, NULL, NULL) != 0) return NULL;
  char *ptx = NULL;
  if (CU(nvrtcCompileProgram, prog, 1, opts) == 0 && CU(nvrtcGetPTXSize, prog, &n) == 0 &&
      (ptx = malloc(n)) && CU(nvrtcGetPTX, prog, ptx) != 0) {
    free(ptx);
    ptx = NULL;
  }
  CU(nvrtcDestroyProgram, &prog);
  return ptx;
}

static void test_driver(void) {
  void *ctx = NULL, *mod = NULL, *fn = NULL, *s1 = NULL, *s2 = NULL, *ev = NULL;
  CHECK_INT(CU(cuInit, 0u), 0);
  CHECK_INT(CU(cuDevicePrimaryCtxRetain, &ctx, 0), 0);
  CHECK_INT(CU(cuCtxSetCurrent, ctx), 0);
  counts c0 = stats();
  char *ptx = compile();
  CHECK(ptx && strstr(ptx, ".entry twice") && strstr(ptx, "//| "));
  if (!ptx) return;
  CHECK_INT(CU(cuModuleLoadData, &mod, ptx), 0);
  free(ptx);
  CHECK_INT(CU(cuModuleGetFunction, &fn, mod, "twice"), 0);
  CHECK_INT(CU(cuModuleGetFunction, &fn, mod, "nope"), 500);
  CHECK_INT(CU(cuModuleGetFunction, &fn, mod, "twice"), 0);

  /* a launch on a stream; the result after the synchronize */
  float h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8];
  dptr d = 0;
  int n = 8;
  CHECK_INT(CU(cuMemAlloc_v2, &d, sizeof h), 0);
  CHECK_INT(CU(cuMemcpyHtoD_v2, d, h, sizeof h), 0);
  CHECK_INT(CU(cuStreamCreate, &s1, 0u), 0);
  CHECK_INT(CU(cuStreamCreate, &s2, 1u), 0); /* non-blocking */
  void *params[] = {&d, &n};
  CHECK_INT(CU(cuLaunchKernel, fn, 2u, 1u, 1u, 4u, 1u, 1u, 0u, s1, params, NULL), 0);
  CHECK_INT(CU(cuStreamSynchronize, s1), 0);
  CHECK_INT(CU(cuMemcpyDtoH_v2, back, d, sizeof back), 0);
  CHECK(back[0] == 2 && back[7] == 16);
  CHECK_INT((int)(stats().misuse - c0.misuse), 0);

  /* kernelParams: missing, pointing at device memory, a host array */
  int64_t m0 = stats().misuse;
  CHECK_INT(CU(cuLaunchKernel, fn, 1u, 1u, 1u, 8u, 1u, 1u, 0u, s1, NULL, NULL), 1);
  void *bad1[] = {(void *)(uintptr_t)d, &n};
  CHECK_INT(CU(cuLaunchKernel, fn, 1u, 1u, 1u, 8u, 1u, 1u, 0u, s1, bad1, NULL), 1);
  CHECK_HAS(last(), "points into device memory");
  float *hostp = h;
  void *bad2[] = {&hostp, &n};
  CHECK_INT(CU(cuLaunchKernel, fn, 1u, 1u, 1u, 8u, 1u, 1u, 0u, s1, bad2, NULL), 700);
  CHECK_HAS(last(), "is host memory");
  CHECK_INT(CU(cuLaunchKernel, fn, 1u, 1u, 1u, 2048u, 1u, 1u, 0u, s1, params, NULL), 1);
  CHECK_INT((int)(stats().misuse - m0), 4);

  /* copies out of bounds, double free, a free of a host pointer */
  CHECK_INT(CU(cuMemcpyHtoD_v2, d + 4, h, sizeof h), 1);
  CHECK_HAS(last(), "runs past the end of its allocation");
  CHECK_INT(CU(cuMemcpyDtoH_v2, back, d + 4096 * 16, 4), 1);
  CHECK_INT(CU(cuMemcpyHtoD_v2, d, (void *)(uintptr_t)d, 4), 1);
  CHECK_HAS(last(), "is device memory, where host memory is expected");
  dptr d2 = 0;
  CHECK_INT(CU(cuMemAlloc_v2, &d2, 100), 0);
  CHECK_INT(CU(cuMemFree_v2, d2), 0);
  CHECK_INT(CU(cuMemFree_v2, d2), 1);
  CHECK_HAS(last(), "double free");
  CHECK_INT(CU(cuMemFree_v2, (dptr)(uintptr_t)h), 1);

  /* a missing wait: the copy on s2 runs before the late kernel on s1 */
  CHECK_INT(CU(cuMemcpyHtoD_v2, d, h, sizeof h), 0);
  CHECK_INT(CU(cuEventCreate, &ev, 0u), 0);
  setenv("WEFT_CUDA_EMU_DELAY_MS", "150", 1);
  CHECK_INT(CU(cuLaunchKernel, fn, 2u, 1u, 1u, 4u, 1u, 1u, 0u, s1, params, NULL), 0);
  unsetenv("WEFT_CUDA_EMU_DELAY_MS");
  CHECK_INT(CU(cuEventRecord, ev, s1), 0);
  CHECK_INT(CU(cuEventQuery, ev), 600); /* not ready */
  CHECK_INT(CU(cuMemcpyDtoHAsync_v2, back, d, sizeof back, s2), 0);
  CHECK_INT(CU(cuStreamSynchronize, s2), 0);
  CHECK(back[0] == 1); /* stale */
  CHECK_INT(CU(cuStreamWaitEvent, s2, ev, 0u), 0);
  CHECK_INT(CU(cuMemcpyDtoHAsync_v2, back, d, sizeof back, s2), 0);
  CHECK_INT(CU(cuStreamSynchronize, s2), 0);
  CHECK(back[0] == 2); /* after the wait */
  CHECK_INT(CU(cuEventQuery, ev), 0);

  /* capture: an allocation inside fails and invalidates it */
  void *graph = (void *)1;
  dptr d3 = 0;
  CHECK_INT(CU(cuStreamBeginCapture_v2, s1, 0), 0);
  CHECK_INT(CU(cuLaunchKernel, fn, 2u, 1u, 1u, 4u, 1u, 1u, 0u, s1, params, NULL), 0);
  CHECK_INT(CU(cuMemAlloc_v2, &d3, 64), 900);
  CHECK_INT(CU(cuStreamEndCapture, s1, &graph), 901);
  CHECK(graph == NULL);
  /* a good capture replays twice */
  void *exec = NULL;
  CHECK_INT(CU(cuStreamBeginCapture_v2, s1, 0), 0);
  CHECK_INT(CU(cuLaunchKernel, fn, 2u, 1u, 1u, 4u, 1u, 1u, 0u, s1, params, NULL), 0);
  CHECK_INT(CU(cuStreamEndCapture, s1, &graph), 0);
  CHECK_INT(CU(cuGraphInstantiateWithFlags, &exec, graph, 0ULL), 0);
  CHECK_INT(CU(cuGraphLaunch, exec, s1), 0);
  CHECK_INT(CU(cuGraphLaunch, exec, s1), 0);
  CHECK_INT(CU(cuStreamSynchronize, s1), 0);
  CHECK_INT(CU(cuMemcpyDtoH_v2, back, d, sizeof back), 0);
  CHECK(back[0] == 8 && back[7] == 64);
  CHECK_INT(CU(cuGraphExecDestroy, exec), 0);
  CHECK_INT(CU(cuGraphDestroy, graph), 0);
  CHECK_INT(CU(cuGraphDestroy, graph), 400);

  /* faults: the Nth call fails once */
  setenv("WEFT_CUDA_EMU_FAIL_ALLOC", "2", 1);
  CHECK_INT(CU(cuMemAlloc_v2, &d3, 64), 0);
  dptr d4 = 0;
  CHECK_INT(CU(cuMemAlloc_v2, &d4, 64), 2);
  CHECK_INT(CU(cuMemAlloc_v2, &d4, 64), 0);
  unsetenv("WEFT_CUDA_EMU_FAIL_ALLOC");
  CHECK_INT(CU(cuMemFree_v2, d4), 0);

  /* a leak at context destroy: d3 is never freed */
  int64_t leaks = stats().leaks;
  CHECK_INT(CU(cuEventDestroy_v2, ev), 0);
  CHECK_INT(CU(cuStreamDestroy_v2, s1), 0);
  CHECK_INT(CU(cuStreamDestroy_v2, s2), 0);
  CHECK_INT(CU(cuStreamDestroy_v2, s2), 400);
  CHECK_INT(CU(cuModuleUnload, mod), 0);
  CHECK_INT(CU(cuMemFree_v2, d), 0);
  CHECK_INT(CU(cuDevicePrimaryCtxRelease_v2, 0), 0);
  CHECK_INT((int)(stats().leaks - leaks), 1);
  CHECK_HAS(last(), "still allocated (leak)");
  CHECK_INT((int)stats().allocs_live, 0);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  return remove(p);
}

int main(void) {
  const char *path = getenv("WEFT_CUDA_EMU_LIB");
  if (!path || !*path) {
    printf("SKIP: not under scripts/cuda-emu\n");
    return 0;
  }
  /* host builds go under a $WEFT_CACHE_DIR that does not exist yet, as in
  ** a fresh build tree: the emulator makes it and its parents */
  char top[64], cache[96];
  snprintf(top, sizeof top, "/tmp/weft-emu-driver-%d", (int)getpid());
  snprintf(cache, sizeof cache, "%s/fresh/test-cache", top);
  setenv("WEFT_CACHE_DIR", cache, 1);
  unsetenv("WEFT_CUDA_EMU_CACHE");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL);
  if (lib) test_driver();
  nftw(top, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
  WTEST_DONE();
}
