/* C API tests for embedding: weft_interrupt (runaway kernels and Lua
** loops), weft_open_ex (os.exit sandbox, memory limit, the reason of a
** failure), out-of-memory statuses, weft_close with many live arrays,
** kernels in chunks a host loads from buffers (weft_dobuffer,
** weft_register_source), weft_compile, and messages without weft's own
** traceback frames. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "runtime/wf_launch.h"
#include "weft.h"
#include "wtest.h"

/* The static library's objects come in only when referenced: keep the
** launch entry point the Lua layer reaches through ffi.C (as test_capi). */
__attribute__((used)) static int (*const keep_launch)(wf_rt *, void *, int, const int64_t *,
                                                      const void *, int64_t) = wf_cpu_launch;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A thread that interrupts W after delay_ms. */
typedef struct stopper {
  weft_State *W;
  int delay_ms;
  pthread_t th;
} stopper;

static void *stopper_main(void *arg) {
  stopper *s = arg;
  usleep((useconds_t)s->delay_ms * 1000);
  weft_interrupt(s->W);
  return NULL;
}

static void stop_after(stopper *s, weft_State *W, int delay_ms) {
  s->W = W;
  s->delay_ms = delay_ms;
  CHECK_INT(pthread_create(&s->th, NULL, stopper_main, s), 0);
}

/* Kernels that never end: x[i] grows to 2^24 and stays there (float), so
** the while loop runs forever; the nested for loops of `nest` are bounded
** but take hours. */
static const char *kernels =
    "forever = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
    "  local i = weft.tid()\n"
    "  while x[i] >= 0.0 do x[i] = x[i] + 1.0 end\n"
    "end }\n"
    "nest = weft.kernel{ x = weft.array(weft.float32), n = weft.int32, function(x, n)\n"
    "  local i = weft.tid()\n"
    "  for a = 1, n do for b = 1, n do x[i] = x[i] + 1.0 end end\n"
    "end }\n"
    "fill = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
    "  local i = weft.tid()\n"
    "  x[i] = weft.float32(i) * 2.0\n"
    "end }\n"
    "small = weft.zeros(8)\n"
    "big = weft.zeros(100000)\n";

static void test_interrupt_launch(void) {
  weft_State *W = weft_open();
  CHECK_INT(weft_dostring(W, kernels), WEFT_OK);
  /* one thread (inline launch) */
  stopper s;
  double t0 = now();
  stop_after(&s, W, 100);
  CHECK_INT(weft_dostring(W, "weft.launch(forever, 8, {small})"), WEFT_ERRINTR);
  pthread_join(s.th, NULL);
  double dt = now() - t0;
  CHECK(dt >= 0.09 && dt < 5.0);
  CHECK_HAS(weft_errmsg(W), "[string \"weft.launch(forever, 8, {small})\"]:1: interrupted");
  /* the state stays usable: a second launch works */
  CHECK_INT(weft_dostring(W, "weft.launch(fill, 8, {small}); assert(small[3] == 6)"), WEFT_OK);
  /* a big grid on the thread pool: every thread leaves */
  stop_after(&s, W, 100);
  t0 = now();
  CHECK_INT(weft_dostring(W, "weft.launch(forever, 100000, {big})"), WEFT_ERRINTR);
  pthread_join(s.th, NULL);
  CHECK(now() - t0 < 5.0);
  CHECK_HAS(weft_errmsg(W), ":1: interrupted");
  CHECK_INT(weft_dostring(W, "weft.launch(fill, 100000, {big}); assert(big[99999] == 199998)"),
            WEFT_OK);
  /* nested for loops */
  stop_after(&s, W, 100);
  t0 = now();
  CHECK_INT(weft_dostring(W, "weft.launch(nest, 8, {small, 2000000000})"), WEFT_ERRINTR);
  pthread_join(s.th, NULL);
  CHECK(now() - t0 < 5.0);
  /* through weft_launch, and an error the script catches */
  weft_Arg arg;
  memset(&arg, 0, sizeof arg);
  arg.type = WEFT_ARG_GLOBAL;
  arg.s = "small";
  int64_t dim = 8;
  stop_after(&s, W, 100);
  CHECK_INT(weft_launch(W, "forever", 1, &dim, 1, &arg), WEFT_ERRINTR);
  pthread_join(s.th, NULL);
  CHECK_HAS(weft_errmsg(W), "interrupted");
  stop_after(&s, W, 100);
  CHECK_INT(weft_dostring(W, "local ok, e = pcall(weft.launch, forever, 8, {small})\n"
                             "assert(not ok and e:find('interrupted'), e)\n"
                             "caught = true"),
            WEFT_OK);
  pthread_join(s.th, NULL);
  CHECK_INT(weft_dostring(W, "assert(caught)"), WEFT_OK);
  weft_close(W);
}

static void test_interrupt_lua(void) {
  weft_State *W = weft_open();
  /* an endless interpreted loop (the hook runs in the interpreter) */
  stopper s;
  stop_after(&s, W, 100);
  double t0 = now();
  CHECK_INT(weft_dostring(W, "jit.off()\nlocal n = 0\nwhile true do n = n + 1 end"), WEFT_ERRINTR);
  pthread_join(s.th, NULL);
  CHECK(now() - t0 < 5.0);
  CHECK_HAS(weft_errmsg(W), ":3: interrupted");
  /* usable afterwards; no stale hook or request */
  CHECK_INT(
      weft_dostring(W, "jit.on(); x = 0; for i = 1, 1000 do x = x + i end; assert(x == 500500)"),
      WEFT_OK);
  /* a request made while nothing runs stops the next call, once */
  weft_interrupt(W);
  CHECK_INT(weft_dostring(W, "y = 1"), WEFT_ERRINTR);
  CHECK_HAS(weft_errmsg(W), "interrupted");
  CHECK_INT(weft_dostring(W, "y = 2"), WEFT_OK);
  weft_interrupt(NULL); /* harmless */
  weft_close(W);
}

static void test_sandbox_exit(void) {
  weft_Options o;
  memset(&o, 0, sizeof o);
  o.sandbox_exit = 1;
  weft_State *W = weft_open_ex(&o);
  CHECK(W != NULL);
  CHECK_INT(weft_dostring(W, "x = 1\nos.exit(3)"), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), ":2: os.exit is disabled by the host");
  CHECK_INT(weft_dostring(W, "local ok, e = pcall(os.exit, 0)\n"
                             "assert(not ok and e:find('os.exit is disabled by the host'), e)"),
            WEFT_OK);
  weft_close(W);
  /* NULL options: as weft_open (os.exit stays; not called here) */
  W = weft_open_ex(NULL);
  CHECK(W != NULL);
  CHECK_INT(weft_dostring(W, "assert(type(os.exit) == 'function')"), WEFT_OK);
  weft_close(W);
}

static char *huge_chunk(size_t n) {
  char *code = malloc(n + 16);
  if (!code) return NULL;
  strcpy(code, "s = '");
  memset(code + 5, 'x', n);
  strcpy(code + 5 + n, "'");
  return code;
}

static void test_memory(void) {
  weft_Options o;
  memset(&o, 0, sizeof o);
  o.memory_limit = (size_t)64 << 20;
  weft_State *W = weft_open_ex(&o);
  CHECK(W != NULL);
  /* out of memory while running */
  CHECK_INT(weft_dostring(W, "local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(1e5) .. i end"),
            WEFT_ERRMEM);
  CHECK_HAS(weft_errmsg(W), "not enough memory");
  CHECK_INT(weft_dostring(W, "x = 1"), WEFT_OK);
  /* out of memory while loading (was WEFT_ERRSYNTAX) */
  char *code = huge_chunk((size_t)80 << 20);
  CHECK(code != NULL);
  if (code) CHECK_INT(weft_dostring(W, code), WEFT_ERRMEM);
  free(code);
  CHECK_INT(weft_dostring(W, "x = 2"), WEFT_OK);
  code = huge_chunk((size_t)80 << 20);
  FILE *f = fopen("test_embed_tmp.lua", "w");
  CHECK(f != NULL && code != NULL);
  if (f && code) {
    fputs(code, f);
    fclose(f);
    CHECK_INT(weft_dofile(W, "test_embed_tmp.lua"), WEFT_ERRMEM);
    remove("test_embed_tmp.lua");
    CHECK_INT(weft_dostring(W, "x = 3"), WEFT_OK);
  }
  free(code);
  /* through weft_call */
  CHECK_INT(weft_dostring(W, "function grow() local t = {} for i = 1, 1e9 do t[i] = {i} end end"),
            WEFT_OK);
  /* the garbage of a failed call is collected: the next call runs */
  for (int k = 0; k < 5; k++) {
    CHECK_INT(weft_call(W, "grow", 0, NULL, 0, NULL), WEFT_ERRMEM);
    CHECK_INT(weft_dostring(W, "x = 4"), WEFT_OK);
  }
  weft_close(W);
}

/* ~300k live arrays at close, after an out-of-memory error. With the
** limit still on while the finalizers ran, each failing finalizer made
** lua_close rescan them all: minutes. Now well under a second or two. */
static void test_close_many_arrays(void) {
  weft_Options o;
  memset(&o, 0, sizeof o);
  o.memory_limit = (size_t)192 << 20;
  weft_State *W = weft_open_ex(&o);
  CHECK(W != NULL);
  CHECK_INT(weft_dostring(W, "keep = {} for i = 1, 300000 do keep[i] = weft.zeros(1) end"),
            WEFT_OK);
  CHECK_INT(weft_dostring(W, "fill = {} for i = 1, 1e9 do fill[i] = {i, i, i, i} end"),
            WEFT_ERRMEM);
  double t0 = now();
  weft_close(W);
  double dt = now() - t0;
  CHECK(dt < 10.0);
  printf("close with 300k arrays after out of memory: %.2f s\n", dt);
}

/* A game's script as it comes out of a pak file: loaded with
** luaL_loadbuffer under "=level1/ai", its text registered by the host. */
static const char *ai_script = "ai = {}\n"
                               "ai.think = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
                               "  local i = weft.tid()\n"
                               "  x[i] = weft.float32(i) * 3.0\n"
                               "end }\n";

static void test_chunk_from_buffer(void) {
  weft_State *W = weft_open();
  lua_State *L = weft_lua(W);
  /* without the text: the launch fails and says how to provide it */
  CHECK_INT(luaL_loadbuffer(L, ai_script, strlen(ai_script), "=level1/ai"), 0);
  CHECK_INT(weft_pcall(W, 0, 0), WEFT_OK);
  CHECK_INT(weft_dostring(W, "x = weft.zeros(4); weft.launch(ai.think, 4, { x })"), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "level1/ai:2 has no source text");
  CHECK_HAS(weft_errmsg(W), "weft_register_source");
  CHECK(strstr(weft_errmsg(W), "lua/weft/") == NULL); /* none of weft's own frames */
  /* registered, then loaded by the host itself */
  CHECK_INT(weft_register_source(W, "=level1/ai", ai_script, strlen(ai_script)), WEFT_OK);
  CHECK_INT(luaL_loadbuffer(L, ai_script, strlen(ai_script), "=level1/ai"), 0);
  CHECK_INT(weft_pcall(W, 0, 0), WEFT_OK);
  CHECK_INT(weft_dostring(W, "weft.launch(ai.think, 4, { x }); assert(x[3] == 9)"), WEFT_OK);
  /* weft_dobuffer keeps the text itself; errors name the chunk */
  const char *buf = "ai2 = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
                    "  x[weft.tid()] = weft.int32(1)\n"
                    "end }\n"
                    "weft.launch(ai2, 4, { x })\n";
  CHECK_INT(weft_dobuffer(W, buf, strlen(buf), "=level2/ai"), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "level2/ai:2:");
  CHECK(strstr(weft_errmsg(W), "lua/weft/") == NULL);
  const char *ok = "ai3 = weft.kernel{ x = weft.array(weft.float32), function(x)\n"
                   "  x[weft.tid()] = 7.0\n"
                   "end }\n";
  CHECK_INT(weft_dobuffer(W, ok, strlen(ok), "=level3/ai"), WEFT_OK);
  /* eager compile: the launch then compiles nothing */
  CHECK_INT(weft_compile(W, "ai3", 1, "cpu"), WEFT_OK);
  CHECK_INT(weft_dostring(W, "assert(weft.stats(ai3).compiles + weft.stats(ai3).disk_hits == 1)\n"
                             "weft.launch(ai3, 4, { x }); assert(x[2] == 7)\n"
                             "assert(weft.stats(ai3).compiles + weft.stats(ai3).disk_hits == 1)"),
            WEFT_OK);
  CHECK_INT(weft_compile(W, "nothing", 1, NULL), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "weft_compile: no kernel named 'nothing'");
  CHECK_INT(weft_dostring(W, "gen = weft.kernel{ function(x) end }"), WEFT_OK);
  CHECK_INT(weft_compile(W, "gen", 1, NULL), WEFT_ERRRUN);
  CHECK_HAS(weft_errmsg(W), "parameter 'x' is generic");
  weft_close(W);
}

/* weft_open_ex tells the host why it failed (here: a heap too small for
** the weft module). */
static void test_open_error(void) {
  char why[256] = "untouched";
  weft_Options o;
  memset(&o, 0, sizeof o);
  o.memory_limit = 32 * 1024;
  o.errbuf = why;
  o.errbuf_size = sizeof why;
  CHECK(weft_open_ex(&o) == NULL);
  CHECK_HAS(why, "weft_open: ");
  CHECK_HAS(why, "memory");
  o.memory_limit = 0;
  weft_State *W = weft_open_ex(&o);
  CHECK(W != NULL);
  CHECK_STR(why, "");
  weft_close(W);
}

int main(void) {
  test_chunk_from_buffer();
  test_open_error();
  test_interrupt_launch();
  test_interrupt_lua();
  test_sandbox_exit();
  test_memory();
  test_close_many_arrays();
  WTEST_DONE();
}
