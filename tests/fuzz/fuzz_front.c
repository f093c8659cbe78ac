/*
** fuzz_front.c -- libFuzzer harness for the kernel front end (src/front,
** down through src/ir, src/ad, src/cpu emit and src/cuda emit).
**
** The input is a Lua chunk that returns a kernel, as the files in
** spec/fails/ do:
**     local weft = require "weft"
**     return weft.kernel{ x = weft.array(weft.float32), function(x) ... end }
** It runs in a sandbox (weft, math and bit read-only, no io/os/debug/load,
** an instruction budget, the JIT off so the budget holds) inside one
** weft_State reused across inputs. The kernel then goes through k:ir(),
** its adjoint and tangent, k:source("cuda") and k:source("llvm"); one input
** in four whose IR has no loop is also launched on the CPU in debug mode
** (bounds checked) over small arrays. Lua errors are expected. Findings:
** crashes, sanitizer reports, hangs, and these broken invariants (abort):
**   - an error saying "IR verification failed" (a pass or the front end
**     made invalid IR);
**   - an error raised inside weft's own Lua files ("lua/weft/x.lua:N:
**     attempt to ...") rather than at the kernel's line: reported on
**     stderr, and fatal with WEFT_FUZZ_STRICT=1.
**
** Build: CC=clang-16 CXX=clang++-16 cmake -S . -B build-fuzz -DWEFT_FUZZ=ON
**        cmake --build build-fuzz --target fuzz_front
** Run:   build-fuzz/fuzz_front -dict=tests/fuzz/front.dict -max_len=4096 \
**          -timeout=20 -rss_limit_mb=4096 NEWDIR tests/fuzz/front/corpus
**        (make fuzz FUZZ_SECONDS=3600 runs every harness that long; replay
**        one input with build-fuzz/fuzz_front FILE). Seeds come from
**        tests/fuzz/extract-kernels.lua (spec kernels and spec/fails).
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

/* The Lua side: fuzz_one(src, launch) runs one input and returns nil, or
** a message when an invariant broke ("!" first: fatal). */
static const char driver[] =
    "local weft = require 'weft'\n"
    "jit.off()\n"
    "weft.config.mode = 'debug'\n"
    "local function ro(t, name)\n"
    "  return setmetatable({}, {\n"
    "    __index = function(_, k)\n"
    "      if type(k) == 'string' and k:sub(1, 1) == '_' then return nil end\n"
    "      return t[k]\n"
    "    end,\n"
    "    __newindex = function() error(name .. ' is read-only in the fuzzer', 2) end,\n"
    "    __metatable = false })\n"
    "end\n"
    "local W, M, B = ro(weft, 'weft'), ro(math, 'math'), ro(bit, 'bit')\n"
    "local libs = { weft = W, math = M, bit = B }\n"
    "local safe = { weft = W, math = M, bit = B, print = print, pairs = pairs,\n"
    "  ipairs = ipairs, type = type, tostring = tostring, tonumber = tonumber,\n"
    "  select = select, unpack = unpack, error = error, assert = assert,\n"
    "  pcall = pcall, next = next,\n"
    "  require = function(n) return libs[n] or error('no module ' .. tostring(n), 2) end }\n"
    "local function budget() error('fuzz: instruction budget', 0) end\n"
    "local function guarded(f, ...)\n"
    "  debug.sethook(budget, '', 2000000)\n"
    "  local r = { pcall(f, ...) }\n"
    "  debug.sethook()\n"
    "  return unpack(r)\n"
    "end\n"
    "local weft_src = '/weft/[%w_]+%.lua:%d+: '\n"
    "local function check(err)\n"
    "  err = tostring(err)\n"
    "  if err:find('IR verification failed', 1, true) then return '!' .. err end\n"
    "  if err:find('fuzz: instruction budget', 1, true) then return nil end\n"
    "  local first = err:match('^[^\\n]*')\n"
    "  if first:find(weft_src) and not first:find('^%[string') then return err end\n"
    "  return nil\n"
    "end\n"
    "-- launch only kernels that surely end soon: no while loop, and no\n"
    "-- constant that could make a for loop long (big, or a tiny step)\n"
    "local function bounded(ir)\n"
    "  if ir:find(' while ', 1, true) then return false end\n"
    "  if not ir:find(' for ', 1, true) then return true end\n"
    "  for c in ir:gmatch(' const ([^ ]+)') do\n"
    "    local v = tonumber(c)\n"
    "    if not v or v ~= v or math.abs(v) > 256 or (v ~= 0 and math.abs(v) < 1e-3) then\n"
    "      return false\n"
    "    end\n"
    "  end\n"
    "  return true\n"
    "end\n"
    "local function arg_of(t)\n"
    "  if t == nil then return weft.zeros(4, weft.float32) end\n"
    "  if t.kind == 'array' then\n"
    "    local shape = {}\n"
    "    for d = 1, t.ndim or 1 do shape[d] = 3 end\n"
    "    return weft.zeros(shape, t.dtype)\n"
    "  end\n"
    "  if t.kind == 'int' then return 1 end\n"
    "  if t.kind == 'float' then return 1.5 end\n"
    "  if t.kind == 'bool' then return true end\n"
    "  if t.kind == 'struct' then return t{} end\n"
    "  return t()\n"
    "end\n"
    "fuzz_stats = { loaded = 0, kernel = 0, ir = 0, llvm = 0, launched = 0, ran = 0 }\n"
    "local stats = fuzz_stats\n"
    "function fuzz_one(src, launch)\n"
    "  local chunk = loadstring(src)\n"
    "  if not chunk then return nil end\n"
    "  stats.loaded = stats.loaded + 1\n"
    "  setfenv(chunk, setmetatable({}, { __index = safe }))\n"
    "  local ok, k = guarded(chunk)\n"
    "  if not ok or not weft.is_kernel(k) then return nil end\n"
    "  stats.kernel = stats.kernel + 1\n"
    "  local argtypes = {}\n"
    "  for i, p in ipairs(k.params) do argtypes[i] = p.type or weft.array(weft.float32) end\n"
    "  local ok, ir = guarded(k.ir, k, argtypes)\n"
    "  if not ok then return check(ir) end\n"
    "  stats.ir = stats.ir + 1\n"
    "  local m = k:_module(argtypes)\n"
    "  for _, d in ipairs({ 'adj', 'jvp' }) do\n"
    "    local ok, e = guarded(weft._derived_module, d, k, m, argtypes, false)\n"
    "    if not ok then local c = check(e) if c then return c end end\n"
    "  end\n"
    "  for _, kind in ipairs({ 'cuda', 'llvm' }) do\n"
    "    local ok, e = guarded(k.source, k, kind, argtypes)\n"
    "    if not ok then local c = check(e) if c then return c end\n"
    "    elseif kind == 'llvm' then stats.llvm = stats.llvm + 1 end\n"
    "  end\n"
    "  if not launch or not bounded(ir) then return nil end\n"
    "  local args = {}\n"
    "  for i, p in ipairs(k.params) do\n"
    "    local ok, a = pcall(arg_of, p.type)\n"
    "    if not ok then return nil end\n"
    "    args[i] = a\n"
    "  end\n"
    "  stats.launched = stats.launched + 1\n"
    "  local ok, e = guarded(weft.launch, k, 2, args)\n"
    "  if not ok then return check(e) end\n"
    "  stats.ran = stats.ran + 1\n"
    "  return nil\n"
    "end\n";

static const char *const stage_names[] = {"loaded", "kernel", "ir", "llvm", "launched", "ran"};
#define NSTAGES 6

typedef struct fuzz_state {
  weft_State *W;
  int runs; /* inputs since the state was opened */
  int strict;
  int launch_all; /* WEFT_FUZZ_LAUNCH=1: launch every input */
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
  fprintf(stderr, "fuzz_front: inputs that reached each stage:");
  for (int k = 0; k < NSTAGES; k++) fprintf(stderr, " %s %lld", stage_names[k], S->stages[k]);
  fprintf(stderr, "\n");
}

static void open_state(fuzz_state *S) {
  S->W = weft_open();
  if (!S->W) {
    fprintf(stderr, "fuzz_front: weft_open failed\n");
    abort();
  }
  if (weft_dostring(S->W, driver) != WEFT_OK) {
    fprintf(stderr, "fuzz_front: driver: %s\n", weft_errmsg(S->W));
    abort();
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
  for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 16777619u;
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
  lua_getglobal(L, "fuzz_one");
  lua_pushlstring(L, (const char *)data, size);
  lua_pushboolean(L, S->launch_all || (fnv(data, size) & 3) == 0);
  if (lua_pcall(L, 2, 1, 0) != 0) {
    fprintf(stderr, "fuzz_front: the driver failed: %s\n", lua_tostring(L, -1));
    abort();
  }
  const char *msg = lua_tostring(L, -1);
  if (msg) {
    int fatal = msg[0] == '!';
    fprintf(stderr, "fuzz_front: %s: %s\n---- input:\n%.*s\n",
            fatal ? "broken invariant" : "internal error", msg + fatal, (int)size,
            (const char *)data);
    if (fatal || S->strict) abort();
  }
  lua_settop(L, top);
  if ((S->runs & 31) == 0) lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
