/*
** test_front.c -- the kernel front end driven from C through a weft state:
** kernels compile to IR from string chunks, user errors come back as
** positioned messages, and repeated failing compiles leave the state
** usable (run under valgrind to check nothing leaks on error paths).
*/
#include <stdio.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "weft.h"
#include "wtest.h"

/* core.c reaches the parts through weak symbols, which do not pull objects
** out of the static library this test links: reference the front end. */
void wf_bind_front(lua_State *L, int t);
void (*volatile wf_test_keep_front)(lua_State *, int) = wf_bind_front;

static char errbuf[2048];

/* Compile a kernel from a string chunk; returns the status. */
static int compile(weft_State *W, const char *body) {
  char code[4096];
  snprintf(code, sizeof code,
           "local k = weft.kernel{ x = weft.array(weft.float32), a = weft.float32,\n"
           "function(x, a)\n%s\nend }\nir_text = k:ir()",
           body);
  /* a string chunk named by its text (luaL_loadstring), so the front end
  ** can read the kernel's source; weft_dostring names chunks "=..." */
  lua_State *L = weft_lua(W);
  int st = luaL_loadstring(L, code) || lua_pcall(L, 0, 0, 0);
  snprintf(errbuf, sizeof errbuf, "%s", st ? lua_tostring(L, -1) : "");
  if (st) lua_pop(L, 1);
  return st ? WEFT_ERRRUN : WEFT_OK;
}

static void test_ok(weft_State *W) {
  CHECK_INT(compile(W, "local i = weft.tid()\nx[i] = a * x[i] + 1"), WEFT_OK);
  lua_State *L = weft_lua(W);
  lua_getglobal(L, "ir_text");
  const char *ir = lua_tostring(L, -1);
  CHECK_HAS(ir, "tid 0");
  CHECK_HAS(ir, "store %0");
  lua_pop(L, 1);
}

static void test_errors(weft_State *W) {
  CHECK_INT(compile(W, "x[0] = a + undefined_thing"), WEFT_ERRRUN);
  CHECK_HAS(errbuf, ":3: undefined name 'undefined_thing'");
  CHECK_HAS(errbuf, "x[0] = a + undefined_thing\n           ^");
  CHECK_INT(compile(W, "x[0] = a + weft.int32(1)"), WEFT_ERRRUN);
  CHECK_HAS(errbuf, ":3: cannot add float32 and int32");
  /* a scalar parameter assigned to becomes a local (Lua); an array cannot */
  CHECK_INT(compile(W, "a = a * 2.0\nx[0] = a"), WEFT_OK);
  CHECK_INT(compile(W, "x = 1.0"), WEFT_ERRRUN);
  CHECK_HAS(errbuf, ":3: cannot assign to parameter 'x' of type array<f32,1>");
  CHECK_INT(compile(W, "local v = weft.vec3(1, 2, 3)\nfor i = 0, 10 do\n  v = v + a\nend"),
            WEFT_ERRRUN);
  CHECK_HAS(errbuf, ":5: cannot add vec3f and float32");
}

static void test_repeat(weft_State *W) {
  /* many failing and succeeding compiles: no growth, no crash */
  for (int i = 0; i < 200; i++) {
    compile(W, "local v = weft.vec3(1, 2, 3)\nif a > 0 then v.x = a end\nx[0] = v.x + foo");
    compile(W, "local s = 0.0\nfor j = 0, 9 do if j > 5 then break end s = s + a end\nx[0] = s");
  }
  CHECK_INT(compile(W, "x[0] = a"), WEFT_OK);
}

int main(void) {
  weft_State *W = weft_open();
  CHECK(W != NULL);
  if (!W) WTEST_DONE();
  test_ok(W);
  test_errors(W);
  test_repeat(W);
  weft_close(W);
  WTEST_DONE();
}
