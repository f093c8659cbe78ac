/*
** blas.h -- matrix products through the system's BLAS (FFI).
**
** CPU: a CBLAS library (OpenBLAS from Debian, else another libcblas or
** libblas with cblas_ symbols) loaded with dlopen on the first product,
** so libweft starts where none is installed and fails only when a product
** is asked for. CUDA: cuBLAS, also by dlopen, queued on the device's
** current stream. $WEFT_LIBBLAS / $WEFT_LIBCUBLAS name the library to use
** instead (the only one tried; tests load stand-ins that way).
**
** One entry point, in row-major terms (the Lua layer, lua/weft/linalg.lua,
** turns arrays and their strides into these arguments):
**
**   for i in [0, batch):  C_i = alpha * op(A_i) op(B_i) + beta * C_i
**
** op(X) is X or its transpose (ta, tb); op(A) is m x k, op(B) k x n, C is
** m x n with rows ldc elements apart; A_i starts sa elements after A_{i-1}
** (likewise sb, sc). Leading dimensions count elements and must be at least
** the row length of the matrix as stored (BLAS rules). With beta = 0 the
** old contents of C are not read.
*/
#ifndef WF_BLAS_H
#define WF_BLAS_H

#include <stdint.h>

#include "runtime/wf_rt.h"

/* dtype code: 0 float32, 1 float64 */
WF_FFI int wf_blas_gemm(wf_rt *rt, int32_t device, int dtype, int64_t batch, int64_t m, int64_t n,
                        int64_t k, double alpha, const void *a, int64_t lda, int64_t sa, int ta,
                        const void *b, int64_t ldb, int64_t sb, int tb, double beta, void *c,
                        int64_t ldc, int64_t sc);
/* Which library serves device's products ("" before the first one, or
** when none can be loaded: the runtime message then says why). */
WF_FFI const char *wf_blas_name(wf_rt *rt, int32_t device);

#endif
