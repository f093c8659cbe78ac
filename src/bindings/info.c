/*
** info.c -- facts about the host for `weft info` and weft.info():
** LLVM version, host CPU name and features, CUDA toolkit and driver.
*/
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "bindings/bindings.h"

/* Is "+name" one of the comma-separated entries of an LLVM feature list? */
static int has_feature(const char *features, const char *name) {
  size_t n = strlen(name);
  for (const char *p = features; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n + 1 && p[0] == '+' && strncmp(p + 1, name, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

/* The vector extensions present, widest first, e.g. "avx512f avx2 fma". */
static void push_vector_features(lua_State *L, const char *features) {
  static const char *const names[] = {"avx512f", "avx512bw", "avx512vl", "avx2", "fma",
                                      "avx",     "sse4.2",   "neon",     "sve"};
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int n = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (!has_feature(features, names[i])) continue;
    if (n++) luaL_addchar(&b, ' ');
    luaL_addstring(&b, names[i]);
  }
  if (n == 0) luaL_addstring(&b, "none");
  luaL_pushresult(&b);
}

static int can_dlopen(const char *name) {
  void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
  if (!h) return 0;
  dlclose(h);
  return 1;
}

/* core.host_info() -> { llvm=, cpu=, features=, vector=, cuda_toolkit=,
** cuda_driver_lib= } */
static int l_host_info(lua_State *L) {
  lua_createtable(L, 0, 8);
  lua_pushstring(L, WEFT_LLVM_VERSION);
  lua_setfield(L, -2, "llvm");
  char *cpu = LLVMGetHostCPUName();
  char *feat = LLVMGetHostCPUFeatures();
  lua_pushstring(L, cpu ? cpu : "unknown");
  lua_setfield(L, -2, "cpu");
  lua_pushstring(L, feat ? feat : "");
  lua_setfield(L, -2, "features");
  push_vector_features(L, feat ? feat : "");
  lua_setfield(L, -2, "vector");
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  int toolkit = access(WEFT_CUDA_HOME "/bin/ptxas", X_OK) == 0 || can_dlopen("libnvrtc.so.13") ||
                can_dlopen(WEFT_CUDA_HOME "/lib64/libnvrtc.so");
  lua_pushstring(L, toolkit ? "found (" WEFT_CUDA_HOME ")" : "not found");
  lua_setfield(L, -2, "cuda_toolkit");
  lua_pushboolean(L, can_dlopen("libcuda.so.1"));
  lua_setfield(L, -2, "cuda_driver_lib");
  return 1;
}

void wf_bind_info(lua_State *L, int t) {
  lua_pushcfunction(L, l_host_info);
  lua_setfield(L, t, "host_info");
}
