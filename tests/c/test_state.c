/* C API tests: weft_open/close/lua/dostring/dofile/errmsg (include/weft.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "weft.h"
#include "wtest.h"

static void test_open_close(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  CHECK(weft_lua(W) != NULL);
  CHECK_STR(weft_errmsg(W), "");
  CHECK_STR(weft_version(), WEFT_VERSION);
  weft_close(W);
  weft_close(NULL); /* harmless */
}

static void test_dostring(void) {
  weft_State *W = weft_open();
  CHECK_INT(weft_dostring(W, "x = 40 + 2"), WEFT_OK);
  lua_State *L = weft_lua(W);
  lua_getglobal(L, "x");
  CHECK_INT((int)lua_tointeger(L, -1), 42);
  lua_pop(L, 1);
  /* the weft module is loaded and required */
  CHECK_INT(weft_dostring(
                W, "assert(require('weft') == weft); assert(weft.version == '" WEFT_VERSION "')"),
            WEFT_OK);
  /* runtime errors carry the message and a traceback */
  CHECK_INT(weft_dostring(W, "local t = nil\nreturn t.x"), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "[string \"local t = nil...\"]:2:");
  CHECK_HAS(weft_errmsg(W), "attempt to index");
  CHECK_HAS(weft_errmsg(W), "stack traceback");
  /* syntax errors */
  CHECK_INT(weft_dostring(W, "x = = 1"), WEFT_ERRSYNTAX);
  CHECK_HAS(weft_errmsg(W), "unexpected symbol");
  /* the state is still usable after errors */
  CHECK_INT(weft_dostring(W, "y = 1"), WEFT_OK);
  CHECK_INT(weft_dostring(W, "error({})"), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "table value");
  CHECK_INT(weft_dostring(W, NULL), WEFT_ERRARG);
  weft_close(W);
}

static void test_dofile(void) {
  weft_State *W = weft_open();
  const char *path = "test_state_tmp.lua";
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs("result = 6 * 7\n", f);
  fclose(f);
  CHECK_INT(weft_dofile(W, path), WEFT_OK);
  CHECK_INT(weft_dostring(W, "assert(result == 42)"), WEFT_OK);
  remove(path);
  CHECK_INT(weft_dofile(W, "/nonexistent/file.lua"), WEFT_ERRFILE);
  CHECK_HAS(weft_errmsg(W), "/nonexistent/file.lua");
  weft_close(W);
}

/* Two states are independent: no global mutable state in the library. */
static void test_two_states(void) {
  weft_State *A = weft_open(), *B = weft_open();
  CHECK_INT(weft_dostring(A, "v = 1"), WEFT_OK);
  CHECK_INT(weft_dostring(B, "assert(v == nil)"), WEFT_OK);
  weft_close(A);
  CHECK_INT(weft_dostring(B, "v = 2"), WEFT_OK);
  weft_close(B);
}

int main(void) {
  test_open_close();
  test_dostring();
  test_dofile();
  test_two_states();
  WTEST_DONE();
}
