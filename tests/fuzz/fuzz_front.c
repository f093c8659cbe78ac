/*
** fuzz_front.c -- libFuzzer harness for the kernel front end (src/front,
** down through src/ir, src/ad, src/cpu emit and src/cuda emit).
**
** The input is a Lua chunk that returns a kernel, as the files in
** spec/fails/ do:
**     local weft = require "weft"
**     return weft.kernel{ x = weft.array(weft.float32), function(x) ... end }
** tests/fuzz/driver.lua (fuzz_one) runs it in a sandbox (weft, math and
** bit read-only, no io/os/debug/load, an instruction budget, the JIT off
** so the budget holds) inside one weft_State reused across inputs. The
** kernel then goes through k:ir(), its adjoint and tangent,
** k:source("cuda") and k:source("llvm"); one input in four (all with
** WEFT_FUZZ_LAUNCH=1) whose loops surely end is also launched on the CPU
** in debug mode (bounds checked) over small arrays. Lua errors are
** expected. Findings: crashes, sanitizer reports, hangs, and these broken
** invariants:
**   - an error saying "IR verification failed" (a pass or the front end
**     made invalid IR): abort;
**   - an error raised inside weft's own Lua files ("lua/weft/x.lua:N:
**     attempt to ...") rather than at the kernel's line: reported on
**     stderr, and an abort with WEFT_FUZZ_STRICT=1.
** WEFT_FUZZ_STATS=1 prints at exit how many inputs reached each stage.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_front
** Run:   build-fuzz/fuzz_front -dict=tests/fuzz/front.dict -max_len=4096 \
**          -timeout=20 -rss_limit_mb=4096 NEWDIR tests/fuzz/front/corpus
**        (make fuzz FUZZ_SECONDS=3600 runs every harness that long; replay
**        one input with build-fuzz/fuzz_front FILE). The seeds came from
**        tests/fuzz/extract-seeds.lua (spec kernels and spec/fails).
*/
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "weft.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* fuzz_gen.c reuses this file with its own entry point. */
#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY "fuzz_one"
#define FUZZ_NAME "fuzz_front"
#endif

static const char *const stage_names[] = {"loaded", "kernel", "ir", "llvm", "launched", "ran"};
#define NSTAGES 6

typedef struct fuzz_state {
  weft_State *W;
  int runs; /* inputs since the state was opened */
  int strict;
  int launch_all;            /* WEFT_FUZZ_LAUNCH=1: launch every input */
  long long stages[NSTAGES]; /* inputs that reached each stage (closed states) */
} fuzz_state;

/* The harness's one state, reopened now and then to bound its memory. */
static fuzz_state *the_state(void) {
  static fuzz_state S; /* libFuzzer's entry points take no context */
  return &S;
}

/* Add the stage counts of the open state to S->stages. */
static void collect_stats(fuzz_state *S) {
  lua_State *L = weft_lua(S->W);
  lua_getglobal(L, "fuzz_stats");
  for (int k = 0; k < NSTAGES && lua_istable(L, -1); k++) {
    lua_getfield(L, -1, stage_names[k]);
    S->stages[k] += (long long)lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* WEFT_FUZZ_STATS=1: how far the inputs got, at exit. */
static void print_stats(void) {
  fuzz_state *S = the_state();
  if (S->W) collect_stats(S), S->W = (weft_close(S->W), NULL);
  fprintf(stderr, FUZZ_NAME ": inputs that reached each stage:");
  for (int k = 0; k < NSTAGES; k++)
    fprintf(stderr, " %s %lld", stage_names[k], S->stages[k]);
  fprintf(stderr, "\n");
}

/* Open the state and load the driver. Other work may be rewriting the Lua
** layer while a long run reopens its state: retry a few times first. */
static void open_state(fuzz_state *S) {
  for (int tries = 0;; tries++) {
    S->W = weft_open();
    if (S->W && weft_dofile(S->W, WEFT_SOURCE_DIR "/tests/fuzz/driver.lua") == WEFT_OK) break;
    fprintf(stderr, FUZZ_NAME ": cannot open the state: %s\n",
            S->W ? weft_errmsg(S->W) : "weft_open failed");
    if (S->W) weft_close(S->W);
    S->W = NULL;
    if (tries == 4) abort();
    sleep(2);
  }
  S->runs = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("WEFT_CACHE_DIR", "off", 1); /* no disk cache: every input is new */
  setenv("WEFT_VERIFY", "1", 1);      /* the verifier after every pass */
  /* kernels may print; keep libFuzzer's stderr readable */
  int fd = open("/dev/null", O_WRONLY);
  if (fd >= 0) {
    dup2(fd, 1);
    close(fd);
  }
  fuzz_state *S = the_state();
  const char *e = getenv("WEFT_FUZZ_STRICT");
  S->strict = e && e[0] == '1';
  e = getenv("WEFT_FUZZ_LAUNCH");
  S->launch_all = e && e[0] == '1';
  open_state(S);
  const char *st = getenv("WEFT_FUZZ_STATS");
  if (st && st[0] == '1') atexit(print_stats);
  return 0;
}

/* A cheap hash of the input: which inputs are launched (stable per input). */
static uint32_t fnv(const uint8_t *d, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ d[i]) * 16777619u;
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_state *S = the_state();
  if (S->runs >= 500) {
    collect_stats(S);
    weft_close(S->W);
    open_state(S);
  }
  S->runs++;
  lua_State *L = weft_lua(S->W);
  int top = lua_gettop(L);
  lua_getglobal(L, FUZZ_ENTRY);
  lua_pushlstring(L, (const char *)data, size);
  lua_pushboolean(L, S->launch_all || (fnv(data, size) & 3) == 0);
  if (lua_pcall(L, 2, 1, 0) != 0) {
    fprintf(stderr, FUZZ_NAME ": the driver failed: %s\n", lua_tostring(L, -1));
    abort();
  }
  const char *msg = lua_tostring(L, -1);
  if (msg) {
    int fatal = msg[0] == '!';
    lua_getglobal(L, "fuzz_last_src"); /* the kernel source (generated by fuzz_gen) */
    fprintf(stderr, FUZZ_NAME ": %s: %s\n---- kernel source:\n%s\n",
            fatal ? "broken invariant" : "internal error", msg + fatal, lua_tostring(L, -1));
    if (fatal || S->strict) abort();
  }
  lua_settop(L, top);
  if ((S->runs & 31) == 0) lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
