/* A C host multiplies its own matrices: it wraps them (no copy) and calls
** weft.matmul through weft_call with the arrays named by their globals;
** a shape mismatch is a status and a message. */
#include <stdint.h>
#include <string.h>

#include "runtime/blas.h"
#include "weft.h"
#include "wtest.h"

/* The static library's objects come in only when referenced: keep what the
** Lua layer reaches through ffi.C. */
__attribute__((used)) static void *const keep_blas[] = {(void *)wf_blas_gemm, (void *)wf_blas_name};

static void global_arg(weft_Arg *a, const char *name) {
  memset(a, 0, sizeof *a);
  a->type = WEFT_ARG_GLOBAL;
  a->s = name;
}

static void double_arg(weft_Arg *a, double v) {
  memset(a, 0, sizeof *a);
  a->type = WEFT_ARG_DOUBLE;
  a->d = v;
}

int main(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return 1;
  double a[2 * 3] = {1, 2, 3, 4, 5, 6}, b[3 * 2] = {1, 0, 0, 1, 1, 1};
  double c[2 * 2] = {1, 1, 1, 1}, d[2 * 2] = {0};
  const int64_t sa[2] = {2, 3}, sb[2] = {3, 2}, sc[2] = {2, 2};
  CHECK_INT(weft_wrap(W, "A", a, "float64", 2, sa, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "B", b, "float64", 2, sb, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "C", c, "float64", 2, sc, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "D", d, "float64", 2, sc, "cpu"), 0);
  weft_Arg args[6];
  global_arg(&args[0], "A");
  global_arg(&args[1], "B");
  global_arg(&args[2], "C");
  global_arg(&args[3], "D");
  double_arg(&args[4], 2.0);
  double_arg(&args[5], -1.0);
  int rc = weft_call(W, "weft.matmul", 6, args, 0, NULL);
  if (rc) fprintf(stderr, "%s\n", weft_errmsg(W));
  CHECK_INT(rc, 0);
  /* a @ b = {{4, 5}, {10, 11}}; 2 (a @ b) - c */
  CHECK(d[0] == 7 && d[1] == 9 && d[2] == 19 && d[3] == 21);
  /* b @ b: 3 x 2 @ 3 x 2 does not multiply */
  global_arg(&args[0], "B");
  rc = weft_call(W, "weft.matmul", 4, args, 0, NULL);
  CHECK_INT(rc, WEFT_ERRRUN);
  CHECK(strstr(weft_errmsg(W), "weft.matmul: a is {3, 2} and b is {3, 2}: the columns of a (2) "
                               "must match the rows of b (3)") != NULL);
  weft_close(W);
  WTEST_DONE();
}
