/*
** cublas_emu.c -- a cuBLAS stand-in for the emulated CUDA device: the
** entry points weft's blas.c loads (WEFT_LIBCUBLAS points here under
** scripts/cuda-emu), computing the column-major GEMM on the host. Operands
** travel through the emulator's Driver API (it is linked against the same
** libweft_cudaemu.so that weft loads as libcuda), after the handle's
** stream has run, so stream order and device pointers are checked as a
** real library would exercise them.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef unsigned long long CUdeviceptr;
extern int cuStreamSynchronize(void *stream);
extern int cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
extern int cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);

enum { ST_OK = 0, ST_NOT_INIT = 1, ST_ALLOC = 3, ST_INVALID = 7, ST_EXEC = 13 };

typedef struct handle {
  void *stream;
} handle;

EXPORT int cublasCreate_v2(void **h) {
  if (!h) return ST_INVALID;
  *h = calloc(1, sizeof(handle));
  return *h ? ST_OK : ST_ALLOC;
}

EXPORT int cublasDestroy_v2(void *h) {
  if (!h) return ST_NOT_INIT;
  free(h);
  return ST_OK;
}

EXPORT int cublasSetStream_v2(void *h, void *stream) {
  if (!h) return ST_NOT_INIT;
  ((handle *)h)->stream = stream;
  return ST_OK;
}

/* Column-major, as cuBLAS: C = alpha op(A) op(B) + beta C, op(A) m x k. */
static int gemm(handle *h, int es, int ta, int tb, int m, int n, int k, double alpha, CUdeviceptr A,
                int lda, long long sa, CUdeviceptr B, int ldb, long long sb, double beta,
                CUdeviceptr C, int ldc, long long sc, int batch) {
  if (!h) return ST_NOT_INIT;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < (m > 1 ? m : 1) ||
      lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1))
    return ST_INVALID;
  if (cuStreamSynchronize(h->stream) != 0) return ST_EXEC;
  size_t na = (size_t)lda * (size_t)(ta ? m : k), nb = (size_t)ldb * (size_t)(tb ? k : n);
  size_t nc = (size_t)ldc * (size_t)n;
  double *a = malloc(na * sizeof *a + 1), *b = malloc(nb * sizeof *b + 1);
  double *c = malloc(nc * sizeof *c + 1);
  void *raw = malloc((na > nb ? (na > nc ? na : nc) : (nb > nc ? nb : nc)) * (size_t)es + 1);
  int st = (a && b && c && raw) ? ST_OK : ST_ALLOC;
  for (int i = 0; i < batch && st == ST_OK; i++) {
    struct {
      CUdeviceptr p;
      size_t n;
      double *to;
    } io[3] = {{A + (CUdeviceptr)(i * sa * es), na, a},
               {B + (CUdeviceptr)(i * sb * es), nb, b},
               {C + (CUdeviceptr)(i * sc * es), nc, c}};
    for (int t = 0; t < 3 && st == ST_OK; t++) {
      if (t == 2 && beta == 0) {
        memset(c, 0, nc * sizeof *c);
        break;
      }
      if (cuMemcpyDtoH_v2(raw, io[t].p, io[t].n * (size_t)es) != 0) st = ST_EXEC;
      for (size_t e = 0; e < io[t].n && st == ST_OK; e++)
        io[t].to[e] = es == 4 ? ((float *)raw)[e] : ((double *)raw)[e];
    }
    for (int col = 0; col < n && st == ST_OK; col++)
      for (int row = 0; row < m; row++) {
        double s = 0;
        for (int l = 0; l < k; l++) {
          double x = ta ? a[(size_t)row * lda + l] : a[(size_t)l * lda + row];
          double y = tb ? b[(size_t)l * ldb + col] : b[(size_t)col * ldb + l];
          s += x * y;
        }
        double *out = &c[(size_t)col * ldc + row];
        *out = alpha * s + (beta == 0 ? 0 : beta * *out);
      }
    for (size_t e = 0; e < nc && st == ST_OK; e++) {
      if (es == 4)
        ((float *)raw)[e] = (float)c[e];
      else
        ((double *)raw)[e] = c[e];
    }
    if (st == ST_OK && cuMemcpyHtoD_v2(io[2].p, raw, nc * (size_t)es) != 0) st = ST_EXEC;
  }
  free(a);
  free(b);
  free(c);
  free(raw);
  return st;
}

EXPORT int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                          const float *A, int lda, const float *B, int ldb, const float *beta,
                          float *C, int ldc) {
  return gemm(h, 4, ta, tb, m, n, k, *alpha, (CUdeviceptr)A, lda, 0, (CUdeviceptr)B, ldb, 0, *beta,
              (CUdeviceptr)C, ldc, 0, 1);
}

EXPORT int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *alpha,
                          const double *A, int lda, const double *B, int ldb, const double *beta,
                          double *C, int ldc) {
  return gemm(h, 8, ta, tb, m, n, k, *alpha, (CUdeviceptr)A, lda, 0, (CUdeviceptr)B, ldb, 0, *beta,
              (CUdeviceptr)C, ldc, 0, 1);
}

EXPORT int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                     const float *alpha, const float *A, int lda, long long sa,
                                     const float *B, int ldb, long long sb, const float *beta,
                                     float *C, int ldc, long long sc, int batch) {
  return gemm(h, 4, ta, tb, m, n, k, *alpha, (CUdeviceptr)A, lda, sa, (CUdeviceptr)B, ldb, sb,
              *beta, (CUdeviceptr)C, ldc, sc, batch);
}

EXPORT int cublasDgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k,
                                     const double *alpha, const double *A, int lda, long long sa,
                                     const double *B, int ldb, long long sb, const double *beta,
                                     double *C, int ldc, long long sc, int batch) {
  return gemm(h, 8, ta, tb, m, n, k, *alpha, (CUdeviceptr)A, lda, sa, (CUdeviceptr)B, ldb, sb,
              *beta, (CUdeviceptr)C, ldc, sc, batch);
}
