/*
** test_capi.c -- the host API without Lua glue: weft_get/weft_set,
** weft_call with tagged arguments and results, weft_launch over host
** buffers, and ownership of DLPack arguments on failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/wf_launch.h"
#include "interop/dlpack.h"
#include "weft.h"
#include "wtest.h"

/* The test links the static library, whose objects come in only when
** something references them: keep the CPU launch entry point, which the
** Lua layer reaches through ffi.C, in the executable. */
__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;

static weft_Arg arg_int(int64_t v) {
  return (weft_Arg){.type = WEFT_ARG_INT, .i = v};
}
static weft_Arg arg_double(double v) {
  return (weft_Arg){.type = WEFT_ARG_DOUBLE, .d = v};
}
static weft_Arg arg_float(float v) {
  return (weft_Arg){.type = WEFT_ARG_FLOAT, .d = v};
}
static weft_Arg arg_string(const char *s) {
  return (weft_Arg){.type = WEFT_ARG_STRING, .s = s};
}
static weft_Arg arg_data(void *p, const char *dtype, int64_t n) {
  return (weft_Arg){
      .type = WEFT_ARG_DATA, .p = p, .s = dtype, .ndim = 1, .shape = {n}, .device = -1};
}

static void test_values(weft_State *W) {
  CHECK(weft_dostring(W, "function f(a, b, s, flag) return a + b, s .. '!', not flag, nil end\n"
                         "function big() return 2LL ^ 40 end\n"
                         "cfg = { sim = { dt = 0.5 } }\n"
                         "arr = weft.array({1, 2, 3}, weft.float64)") == 0);
  weft_Arg args[4] = {
      arg_int(2), arg_double(0.25), arg_string("hi"), {.type = WEFT_ARG_BOOL, .i = 1}};
  weft_Arg res[5];
  CHECK(weft_call(W, "f", 4, args, 5, res) == 0);
  CHECK(res[0].type == WEFT_ARG_DOUBLE && res[0].d == 2.25);
  CHECK(res[1].type == WEFT_ARG_STRING && strcmp(res[1].s, "hi!") == 0);
  CHECK(res[2].type == WEFT_ARG_BOOL && res[2].i == 0);
  CHECK(res[3].type == WEFT_ARG_NIL && res[4].type == WEFT_ARG_NIL);
  CHECK(weft_call(W, "big", 0, NULL, 1, res) == 0);
  CHECK(res[0].type == WEFT_ARG_INT && res[0].i == (int64_t)1 << 40);

  weft_Arg v;
  CHECK(weft_get(W, "cfg.sim.dt", &v) == 0 && v.type == WEFT_ARG_DOUBLE && v.d == 0.5);
  CHECK(weft_get(W, "cfg", &v) == 0 && v.type == WEFT_ARG_REF && strcmp(v.s, "table") == 0);
  weft_Arg dt = arg_float(0.125f);
  CHECK(weft_set(W, "cfg.sim.dt", &dt) == 0);
  CHECK(weft_dostring(W, "assert(cfg.sim.dt == 0.125)") == 0);
  CHECK(weft_set(W, "cfg2", &v) == 0); /* a reference goes back as the same table */
  CHECK(weft_dostring(W, "assert(cfg2 == cfg)") == 0);
  weft_unref(W, v.i);

  CHECK(weft_get(W, "arr", &v) == 0);
  CHECK(v.type == WEFT_ARG_ARRAY && strcmp(v.s, "float64") == 0 && v.ndim == 1);
  CHECK(v.shape[0] == 3 && v.strides[0] == 8 && v.d == 8 && v.device == -1);
  CHECK(v.p && ((double *)v.p)[2] == 3.0);
  /* an array result passes back by reference */
  CHECK(weft_set(W, "arr2", &v) == 0);
  CHECK(weft_dostring(W, "assert(rawequal(arr2, arr))") == 0);
  weft_unref(W, v.i);

  CHECK(weft_call(W, "nope", 0, NULL, 0, NULL) == WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "no function named 'nope'");
  CHECK(weft_get(W, "cfg.sim.dt.x", &v) != 0);
  CHECK_HAS(weft_errmsg(W), "'cfg.sim.dt' is not a table");
  weft_Arg bad = {.type = 99};
  CHECK(weft_call(W, "f", 1, &bad, 0, NULL) != 0);
  CHECK_HAS(weft_errmsg(W), "unknown weft_Arg type 99");
  weft_Arg err[1] = {arg_string("x")};
  CHECK(weft_call(W, "error", 1, err, 0, NULL) == WEFT_ERRRUN);
  CHECK(strncmp(weft_errmsg(W), "x", 1) == 0);
}

/* A DLPack tensor whose deleter counts. */
typedef struct counted {
  DLManagedTensor m;
  int64_t shape[1];
  float data[8];
  int deleted;
} counted;
static void counted_delete(DLManagedTensor *m) {
  ((counted *)m->manager_ctx)->deleted++;
}
static void make_counted(counted *c) {
  memset(c, 0, sizeof *c);
  c->shape[0] = 8;
  c->m.dl_tensor = (DLTensor){.data = c->data,
                              .device = {WF_kDLCPU, 0},
                              .ndim = 1,
                              .dtype = {WF_kDLFloat, 32, 1},
                              .shape = c->shape};
  c->m.manager_ctx = c;
  c->m.deleter = counted_delete;
}

static void test_dlpack_args(weft_State *W) {
  counted c;
  make_counted(&c);
  weft_Arg a = {.type = WEFT_ARG_DLPACK, .p = &c.m};
  weft_Arg res;
  CHECK(weft_call(W, "weft._interop.id", 1, &a, 1, &res) == 0);
  CHECK(res.type == WEFT_ARG_ARRAY && res.p == c.data && res.shape[0] == 8);
  weft_unref(W, res.i);
  CHECK(weft_dostring(W, "collectgarbage(); collectgarbage()") == 0);
  CHECK(c.deleted == 1);

  /* the call fails before the argument reaches Lua: deleted anyway */
  make_counted(&c);
  CHECK(weft_call(W, "no.such.fn", 1, &a, 0, NULL) != 0);
  CHECK(c.deleted == 1);
  make_counted(&c);
  int64_t n = 8;
  CHECK(weft_launch(W, "no_kernel", 1, &n, 1, &a) != 0);
  CHECK_HAS(weft_errmsg(W), "no kernel named 'no_kernel'");
  CHECK(c.deleted == 1);
  /* a later argument fails: the DLPack one after it is deleted too */
  make_counted(&c);
  weft_Arg two[2] = {{.type = 99}, a};
  CHECK(weft_call(W, "print", 2, two, 0, NULL) != 0);
  CHECK(c.deleted == 1);
}

/* Can this build compile and launch a kernel? (A probe launch.) */
static int has_kernels(weft_State *W) {
  weft_Arg v;
  if (weft_dostring(W, "_k, _kerr = pcall(assert(loadstring([[\n"
                       "local k = weft.kernel{ x = weft.array(weft.float32),\n"
                       "  function(x) local i = weft.tid(); x[i] = 1.0 end }\n"
                       "weft.launch(k, 1, { weft.zeros(1) })]])))") != 0)
    return 0;
  int ok = weft_get(W, "_k", &v) == 0 && v.type == WEFT_ARG_BOOL && v.i;
  if (!ok && weft_get(W, "_kerr", &v) == 0 && v.type == WEFT_ARG_STRING)
    printf("test_capi: no kernels: %s\n", v.s);
  return ok;
}

/* A host simulation step: the host owns the buffers, Lua kernels step them. */
static void test_launch(weft_State *W) {
  /* every build has the kernel compiler: a probe that fails is a failure
  ** (it once skipped quietly because the test binary lacked wf_cpu_launch) */
  int ok = has_kernels(W);
  CHECK(ok);
  if (!ok) return;
  /* loadstring keeps the source text the kernel compiler reads */
  CHECK(weft_dostring(W, "assert(loadstring([[\n"
                         "integrate = weft.kernel{ pos = weft.array(weft.vec3),\n"
                         "  vel = weft.array(weft.vec3), dt = weft.float32,\n"
                         "  function(pos, vel, dt)\n"
                         "    local i = weft.tid()\n"
                         "    pos[i] = pos[i] + vel[i] * dt\n"
                         "  end }\n"
                         "]]))()") == 0);
  float pos[3 * 4] = {0}, vel[3 * 4];
  for (int k = 0; k < 12; k++)
    vel[k] = (float)k;
  weft_Arg args[3] = {arg_data(pos, "vec3", 4), arg_data(vel, "vec3", 4), arg_float(0.5f)};
  int64_t n = 4;
  for (int step = 0; step < 3; step++) {
    int st = weft_launch(W, "integrate", 1, &n, 3, args);
    CHECK(st == 0);
    if (st) {
      fprintf(stderr, "launch: %s\n", weft_errmsg(W));
      return;
    }
  }
  CHECK(pos[0] == 0.0f && pos[4] == 6.0f && pos[11] == 16.5f);

  /* the positions go to a consumer through DLPack */
  CHECK(weft_wrap(W, "positions", pos, "vec3", 1, &n, "cpu") == 0);
  DLManagedTensorVersioned *m = weft_export_dlpack(W, "positions", 1);
  CHECK(m && m->dl_tensor.data == pos && m->dl_tensor.shape[1] == 3);
  if (m) m->deleter(m);

  /* a 2-D grid */
  CHECK(weft_dostring(
            W, "assert(loadstring([[\n"
               "fill2 = weft.kernel{ m = weft.array(weft.float32, 2),\n"
               "  function(m) local i, j = weft.tid(); m[i][j] = weft.float32(10 * i + j) end }\n"
               "]]))()") == 0);
  float grid[2][3] = {{0}};
  weft_Arg g = arg_data(grid, "float32", 2);
  g.ndim = 2, g.shape[0] = 2, g.shape[1] = 3;
  int64_t dims[2] = {2, 3};
  CHECK(weft_launch(W, "fill2", 2, dims, 1, &g) == 0);
  CHECK(grid[0][2] == 2.0f && grid[1][0] == 10.0f && grid[1][2] == 12.0f);

  /* wrong argument: a clear message */
  weft_Arg bad[3] = {arg_data(pos, "float32", 12), arg_data(vel, "vec3", 4), arg_float(1)};
  CHECK(weft_launch(W, "integrate", 1, &n, 3, bad) != 0);
  CHECK(strlen(weft_errmsg(W)) > 0);
  CHECK(weft_launch(W, "integrate", 0, &n, 3, args) == WEFT_ERRARG);
  CHECK_HAS(weft_errmsg(W), "1 to 4 dimensions");
}

int main(void) {
  weft_State *W = weft_open();
  if (!W) {
    fprintf(stderr, "test_capi: weft_open failed\n");
    return 1;
  }
  CHECK(keep_launch != NULL);
  test_values(W);
  test_dlpack_args(W);
  test_launch(W);
  weft_close(W);
  CHECK(weft_get(NULL, "x", NULL) == WEFT_ERRARG);
  WTEST_DONE();
}
