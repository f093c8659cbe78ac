/*
** blas.c -- matrix products on CBLAS (CPU) and cuBLAS (CUDA), both loaded
** with dlopen on first use (blas.h).
**
**   wf_blas (rt->blas, made by the first product, freed by wf_rt_free)
**   +------------------------------------------------------------+
**   | cpu: lib, cblas_sgemm, cblas_dgemm, name | error if missing |
**   | gpu: lib, cublas entry points           | error if missing |
**   |      handle[dev] (made in dev's context, on first use)      |
**   +------------------------------------------------------------+
**
** A library that fails to load is tried once; its message is kept and
** given again to every later product on that kind of device.
*/
#include "runtime/blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt.h"
#include "runtime/wf_cudadrv.h"
#include "runtime/wf_launch.h"

/* CBLAS enums (cblas.h) */
#define CBLAS_ROW_MAJOR 101
#define CBLAS_NO_TRANS 111
#define CBLAS_TRANS 112
/* cuBLAS enums (cublas_api.h) */
#define CUBLAS_OP_N 0
#define CUBLAS_OP_T 1
#define WF_BLAS_MAXDEV 16

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                               const float *, int, float, float *, int);
typedef void (*cblas_dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                               const double *, int, double, double *, int);

/* The cuBLAS entry points: field, type, symbol. */
/* clang-format off */
#define WF_CUBLAS_FUNCS(_) \
  _(Create, int (*)(void **), "cublasCreate_v2") \
  _(Destroy, int (*)(void *), "cublasDestroy_v2") \
  _(SetStream, int (*)(void *, void *), "cublasSetStream_v2") \
  _(Sgemm, int (*)(void *, int, int, int, int, int, const float *, const float *, int, \
                   const float *, int, const float *, float *, int), "cublasSgemm_v2") \
  _(Dgemm, int (*)(void *, int, int, int, int, int, const double *, const double *, int, \
                   const double *, int, const double *, double *, int), "cublasDgemm_v2") \
  _(SgemmB, int (*)(void *, int, int, int, int, int, const float *, const float *, int, \
                    long long, const float *, int, long long, const float *, float *, int, \
                    long long, int), "cublasSgemmStridedBatched") \
  _(DgemmB, int (*)(void *, int, int, int, int, int, const double *, const double *, int, \
                    long long, const double *, int, long long, const double *, double *, int, \
                    long long, int), "cublasDgemmStridedBatched")
/* clang-format on */

typedef struct wf_cublas_fns {
#define WF_CUBLAS_FIELD(f, ty, sym) __typeof__(ty) f;
  WF_CUBLAS_FUNCS(WF_CUBLAS_FIELD)
#undef WF_CUBLAS_FIELD
} wf_cublas_fns;

typedef struct wf_blas_lib {
  int tried;
  void *lib;
  char name[256]; /* the library that loaded */
  char err[512];  /* why none loaded */
} wf_blas_lib;

typedef struct wf_blas {
  wf_blas_lib cpu, gpu;
  cblas_sgemm_fn sgemm;
  cblas_dgemm_fn dgemm;
  wf_cublas_fns cu;
  void *handle[WF_BLAS_MAXDEV];
} wf_blas;

static void blas_free(void *p) {
  wf_blas *bl = p;
  /* cuBLAS handles go while the CUDA contexts still live (wf_rt_free
  ** frees this before the CUDA backend). */
  for (int i = 0; i < WF_BLAS_MAXDEV; i++)
    if (bl->handle[i]) bl->cu.Destroy(bl->handle[i]);
  if (bl->cpu.lib) dlclose(bl->cpu.lib);
  if (bl->gpu.lib) dlclose(bl->gpu.lib);
  free(bl);
}

static wf_blas *blas_of(wf_rt *rt) {
  if (!rt->blas) {
    wf_blas *bl = calloc(1, sizeof *bl);
    if (!bl) return NULL;
    rt->blas = bl;
    rt->blas_free = blas_free;
  }
  return rt->blas;
}

/* dlopen the first of names[] (after $env) that has every symbol in
** syms[]; records the name or the reasons in lib. */
static void *open_first(wf_blas_lib *lib, const char *env, const char *const *names,
                        const char *const *syms) {
  const char *list[8];
  int n = 0;
  const char *e = getenv(env);
  if (e && *e) list[n++] = e; /* set: the only one tried */
  for (int i = 0; names[i] && n < 7 && !(e && *e); i++)
    list[n++] = names[i];
  size_t used = 0;
  lib->err[0] = 0;
  for (int i = 0; i < n; i++) {
    char why[300];
    void *h = dlopen(list[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e2 = dlerror();
      snprintf(why, sizeof why, "%s", e2 ? e2 : list[i]);
    } else {
      for (int s = 0; syms[s]; s++) {
        if (!dlsym(h, syms[s])) {
          snprintf(why, sizeof why, "%s: no symbol %s", list[i], syms[s]);
          dlclose(h);
          h = NULL;
          break;
        }
      }
    }
    if (h) {
      snprintf(lib->name, sizeof lib->name, "%s", list[i]);
      return h;
    }
    if (used < sizeof lib->err) {
      int w = snprintf(lib->err + used, sizeof lib->err - used, "%s%s", used ? "; " : "", why);
      if (w > 0) used += (size_t)w;
    }
  }
  return NULL;
}

static int load_cpu(wf_rt *rt, wf_blas *bl) {
  if (!bl->cpu.tried) {
    static const char *const names[] = {"libopenblas.so.0", "libcblas.so.3", "libblas.so.3", NULL};
    static const char *const syms[] = {"cblas_sgemm", "cblas_dgemm", NULL};
    bl->cpu.tried = 1;
    bl->cpu.lib = open_first(&bl->cpu, "WEFT_LIBBLAS", names, syms);
    if (bl->cpu.lib) {
      *(void **)&bl->sgemm = dlsym(bl->cpu.lib, "cblas_sgemm");
      *(void **)&bl->dgemm = dlsym(bl->cpu.lib, "cblas_dgemm");
    }
  }
  if (!bl->cpu.lib)
    return wf_rt_seterr(rt, WEFT_ERRDEVICE,
                        "weft: no CBLAS library for matrix products on the cpu (install "
                        "OpenBLAS, Debian's libopenblas0, or set WEFT_LIBBLAS): %s",
                        bl->cpu.err);
  return WEFT_OK;
}

static int load_gpu(wf_rt *rt, wf_blas *bl) {
  if (!bl->gpu.tried) {
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                        "libcublas.so", NULL};
    static const char *const syms[] = {
#define WF_CUBLAS_SYM(f, ty, sym) sym,
        WF_CUBLAS_FUNCS(WF_CUBLAS_SYM)
#undef WF_CUBLAS_SYM
            NULL};
    bl->gpu.tried = 1;
    bl->gpu.lib = open_first(&bl->gpu, "WEFT_LIBCUBLAS", names, syms);
    if (bl->gpu.lib) {
#define WF_CUBLAS_LOAD(f, ty, sym) *(void **)&bl->cu.f = dlsym(bl->gpu.lib, sym);
      WF_CUBLAS_FUNCS(WF_CUBLAS_LOAD)
#undef WF_CUBLAS_LOAD
    }
  }
  if (!bl->gpu.lib)
    return wf_rt_seterr(rt, WEFT_ERRDEVICE,
                        "weft: no cuBLAS for matrix products on CUDA devices (libcublas.so.12 "
                        "or .13 from the CUDA toolkit, or set WEFT_LIBCUBLAS): %s",
                        bl->gpu.err);
  return WEFT_OK;
}

static int too_big(int64_t v) {
  return v < 0 || v > 0x7fffffff;
}

/* One product list in row-major terms (blas.h), as the backends take it:
** a pool job on the cpu, batch entries [begin, end). */
typedef struct gemm_job {
  wf_blas *bl;
  int dtype, ta, tb, m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b;
  void *c;
  int64_t sa, sb, sc;
} gemm_job;

static void gemm_range(void *p, int64_t begin, int64_t end) {
  const gemm_job *j = p;
  int oa = j->ta ? CBLAS_TRANS : CBLAS_NO_TRANS, ob = j->tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
  for (int64_t i = begin; i < end; i++) {
    if (j->dtype == 0)
      j->bl->sgemm(CBLAS_ROW_MAJOR, oa, ob, j->m, j->n, j->k, (float)j->alpha,
                   (const float *)j->a + i * j->sa, j->lda, (const float *)j->b + i * j->sb, j->ldb,
                   (float)j->beta, (float *)j->c + i * j->sc, j->ldc);
    else
      j->bl->dgemm(CBLAS_ROW_MAJOR, oa, ob, j->m, j->n, j->k, j->alpha,
                   (const double *)j->a + i * j->sa, j->lda, (const double *)j->b + i * j->sb,
                   j->ldb, j->beta, (double *)j->c + i * j->sc, j->ldc);
  }
}

/* Batches of small products (OpenBLAS runs each on one thread below
** 65536 * 4 multiply-adds) are split over the launch threads: measured
** 64x64 x1000 float32 on 2 cores, serial calls ran at NumPy's speed. */
#define WF_BLAS_SMALL 262144.0

static int cpu_gemm(wf_rt *rt, gemm_job *j, int64_t batch) {
  int small = (double)j->m * j->n * j->k <= WF_BLAS_SMALL;
  wf_pool *pool = batch > 1 && small ? wf_launch_pool(rt) : NULL;
  if (!pool) {
    gemm_range(j, 0, batch);
    return WEFT_OK;
  }
  int64_t grain = batch / (4 * (int64_t)wf_pool_size(pool));
  wf_pool_run(pool, batch, grain < 1 ? 1 : grain, gemm_range, j, NULL);
  return WEFT_OK;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
** gets the operands swapped and the sizes n, m. */
static int gpu_gemm(wf_rt *rt, int32_t dev, const gemm_job *j, int64_t batch) {
  wf_blas *bl = j->bl;
  if (dev >= WF_BLAS_MAXDEV)
    return wf_rt_seterr(rt, WEFT_ERRDEVICE,
                        "weft: matmul: cuda:%d is beyond the %d devices weft's cuBLAS use supports",
                        (int)dev, WF_BLAS_MAXDEV);
  void *stream = NULL;
  int st = wf_cuda_enter(rt, dev, &stream);
  if (st != WEFT_OK) return st;
  if (!bl->handle[dev]) {
    int r = bl->cu.Create(&bl->handle[dev]);
    if (r != 0) {
      bl->handle[dev] = NULL;
      return wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: matmul: cublasCreate failed (status %d)", r);
    }
  }
  void *h = bl->handle[dev];
  int r = bl->cu.SetStream(h, stream);
  int oa = j->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = j->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  int m = j->m, n = j->n, k = j->k, nb = (int)batch;
  if (r == 0 && j->dtype == 0) {
    float fa = (float)j->alpha, fb = (float)j->beta;
    r = nb == 1
            ? bl->cu.Sgemm(h, ob, oa, n, m, k, &fa, j->b, j->ldb, j->a, j->lda, &fb, j->c, j->ldc)
            : bl->cu.SgemmB(h, ob, oa, n, m, k, &fa, j->b, j->ldb, j->sb, j->a, j->lda, j->sa, &fb,
                            j->c, j->ldc, j->sc, nb);
  } else if (r == 0) {
    r = nb == 1 ? bl->cu.Dgemm(h, ob, oa, n, m, k, &j->alpha, j->b, j->ldb, j->a, j->lda, &j->beta,
                               j->c, j->ldc)
                : bl->cu.DgemmB(h, ob, oa, n, m, k, &j->alpha, j->b, j->ldb, j->sb, j->a, j->lda,
                                j->sa, &j->beta, j->c, j->ldc, j->sc, nb);
  }
  if (r != 0) return wf_rt_seterr(rt, WEFT_ERRDEVICE, "weft: matmul: cuBLAS failed (status %d)", r);
  return WEFT_OK;
}

int wf_blas_gemm(wf_rt *rt, int32_t device, int dtype, int64_t batch, int64_t m, int64_t n,
                 int64_t k, double alpha, const void *a, int64_t lda, int64_t sa, int ta,
                 const void *b, int64_t ldb, int64_t sb, int tb, double beta, void *c, int64_t ldc,
                 int64_t sc) {
  if (dtype != 0 && dtype != 1)
    return wf_rt_seterr(rt, WEFT_ERRARG, "weft: matmul: dtype code %d (0 float32, 1 float64)",
                        dtype);
  if (too_big(batch) || too_big(m) || too_big(n) || too_big(k) || too_big(lda) || too_big(ldb) ||
      too_big(ldc))
    return wf_rt_seterr(rt, WEFT_ERRARG,
                        "weft: matmul: sizes must be in 0 .. 2^31-1 (BLAS takes 32-bit ints)");
  if (batch == 0 || m == 0 || n == 0) return WEFT_OK;
  wf_blas *bl = blas_of(rt);
  if (!bl) return wf_rt_seterr(rt, WEFT_ERRMEM, "weft: out of memory");
  int st = device < 0 ? load_cpu(rt, bl) : load_gpu(rt, bl);
  if (st != WEFT_OK) return st;
  gemm_job j = {bl,       dtype, ta != 0, tb != 0, (int)m, (int)n, (int)k, (int)lda, (int)ldb,
                (int)ldc, alpha, beta,    a,       b,      c,      sa,     sb,       sc};
  return device < 0 ? cpu_gemm(rt, &j, batch) : gpu_gemm(rt, device, &j, batch);
}

const char *wf_blas_name(wf_rt *rt, int32_t device) {
  wf_blas *bl = blas_of(rt);
  if (!bl) return "";
  if (device < 0) return load_cpu(rt, bl) == WEFT_OK ? bl->cpu.name : "";
  return load_gpu(rt, bl) == WEFT_OK ? bl->gpu.name : "";
}
