/*
** test_struct_arrays.c -- a C host's buffers inside a weft struct: arrays
** wrapped with weft_wrap (no copy) are assigned to the fields of a struct
** built in Lua (Warp's Model/State pattern), a kernel steps them in place
** through the struct, and a buffer of the wrong type is refused with a
** message.
*/
#include <stdio.h>
#include <string.h>

#include "runtime/wf_launch.h"
#include "weft.h"
#include "wtest.h"

/* Keep the CPU launch entry point, which the Lua layer reaches through
** ffi.C, in the statically linked executable. */
__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;

static const char *setup =
    "State = weft.struct{ {'x', weft.array(weft.float32)}, {'v', weft.array(weft.float32)},\n"
    "                     name = 'CState' }\n"
    "Model = weft.struct{ {'state', State}, {'dt', weft.float32}, name = 'CModel' }\n"
    "step = weft.kernel{ m = Model, function(m)\n"
    "  local i = weft.tid()\n"
    "  m.state.x[i] = m.state.x[i] + m.state.v[i] * m.dt\n"
    "end }\n";

static void test_wrapped_fields(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) return;
  float x[4] = {0, 0, 0, 0}, v[4] = {1, 2, 3, 4};
  double bad[4] = {0};
  int64_t n = 4;
  CHECK_INT(weft_dostring(W, setup), 0);
  CHECK_INT(weft_wrap(W, "x", x, "float32", 1, &n, "cpu"), 0);
  CHECK_INT(weft_wrap(W, "v", v, "float32", 1, &n, "cpu"), 0);
  CHECK_INT(weft_dostring(W, "m = Model{ state = State{ x = x, v = v }, dt = 0.5 }\n"
                             "x, v = nil, nil; collectgarbage(); collectgarbage()\n"
                             "weft.launch(step, 4, { m }); weft.launch(step, 4, { m })"),
            0);
  for (int i = 0; i < 4; i++)
    CHECK(x[i] == v[i]); /* two steps of dt 0.5, written into the host's buffer */
  CHECK_INT(weft_wrap(W, "b", bad, "float64", 1, &n, "cpu"), 0);
  CHECK(weft_dostring(W, "m.state.x = b") != 0);
  CHECK(strstr(weft_errmsg(W), "field 'x' expects array(float32), got array(float64)") != NULL);
  weft_close(W);
}

int main(void) {
  test_wrapped_fields();
  WTEST_DONE();
}
